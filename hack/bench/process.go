package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// rssBytes reads VmRSS from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) {
	s, err := readRSS(pid)
	return s.total, err
}

// rssSample is a process's resident memory split as the kernel counts it:
// anonymous pages (the Go heap, stacks and runtime) and file-backed pages
// (the mapped executable's code and read-only data that have been touched,
// plus whatever the kernel mapped around them).
type rssSample struct {
	total, anon, file int64
}

// readRSS reads VmRSS, RssAnon and RssFile from /proc/<pid>/status.
func readRSS(pid int) (rssSample, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return rssSample{}, err
	}
	var s rssSample
	fields := map[string]*int64{"VmRSS:": &s.total, "RssAnon:": &s.anon, "RssFile:": &s.file}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if dst, ok := fields[f[0]]; ok {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return rssSample{}, fmt.Errorf("%s in /proc/%d/status: %w", f[0], pid, err)
			}
			*dst = kb * 1024
		}
	}
	if s.total == 0 {
		return rssSample{}, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return s, nil
}

// cachesSynced waits until every controller the manager started has logged
// "Starting workers" (controller-runtime does so once the controller's
// caches have synced) and returns when the bench saw the last such line (the
// log's timestamps have whole seconds only; the bench reads the log every
// 20 ms).
// want, when > 0, is the number of controllers to wait for (the count the
// same manager reached on an empty cluster): controllers do not all log
// "Starting Controller" at once when the caches are large.
func cachesSynced(ctx context.Context, logPath string, want int, timeout time.Duration) (time.Time, int, error) {
	var n, lastStarting, lastN int
	var at, changed time.Time
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, nil
		}
		s := string(data)
		// Quoted messages match Deckhand's JSON log ("msg":"Starting workers")
		// and kruise-manager's klog text ("Starting workers" controller=...).
		starting := strings.Count(s, `"Starting Controller"`)
		n = strings.Count(s, `"Starting workers"`)
		now := time.Now()
		if starting != lastStarting || n != lastN {
			lastStarting, lastN, changed = starting, n, now
			if starting > 0 && n == starting && (want == 0 || n >= want) {
				at = now
			}
		}
		// Done once every started controller has its workers and no new
		// controller has shown up for 3 seconds (the manager adds its
		// controllers once its webhook certificates are ready, and a late
		// one was seen to start a second after the first ones were running).
		// The figure is the time of the last change, not of the wait.
		if want > 0 {
			return n >= want, nil
		}
		return starting > 0 && n == starting && now.Sub(changed) >= 3*time.Second, nil
	})
	return at, n, err
}

// pprofGet fetches /debug/pprof/<kind> from the manager.
func (e *env) pprofGet(ctx context.Context, kind string) ([]byte, error) {
	if e.pprofPort == 0 {
		return nil, fmt.Errorf("the manager serves no pprof endpoint")
	}
	return httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", e.pprofPort, kind))
}

// forceGC makes the manager run a garbage collection (the heap profile
// handler does one when asked with gc=1).
func (e *env) forceGC(ctx context.Context) error {
	_, err := e.pprofGet(ctx, "heap?gc=1")
	return err
}

// saveProfile fetches a pprof profile from the manager into bin/bench-profiles.
func (e *env) saveProfile(ctx context.Context, cfg *config, kind, name string) {
	if e.pprofPort == 0 {
		return
	}
	data, err := e.pprofGet(ctx, kind)
	if err != nil {
		logf("pprof %s: %v", kind, err)
		return
	}
	dir := filepath.Join(cfg.root, "bin", "bench-profiles")
	_ = os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, name+".pprof")
	if err := os.WriteFile(path, data, 0o644); err == nil {
		logf("saved %s", path)
	}
}

// profileWhile saves a 5 s CPU profile of the manager, named name, taken
// while work runs, and returns work's error once both are done.
func (e *env) profileWhile(ctx context.Context, cfg *config, name string, work func() error) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.saveProfile(ctx, cfg, "profile?seconds=5", name)
	}()
	err := work()
	<-done
	return err
}
