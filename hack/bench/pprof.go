package main

// The manager's pprof endpoint: profiles saved beside the results, and a
// garbage collection on request before a heap figure is read.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

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
