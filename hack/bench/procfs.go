package main

// What /proc says of the processes the bench measures: their CPU time and
// their resident memory.

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// Roles of the processes whose CPU time the admission item accounts for,
// by their command name (/proc/<pid>/comm).
const (
	roleAPIServer = "kube-apiserver"
	roleEtcd      = "etcd"
	roleDeckhand  = "Deckhand manager"
	roleKruise    = "kruise-manager"
	roleBench     = "bench (clients, minimal webhook)"
	roleMachine   = "whole machine"
	roleKCM       = "kube-controller-manager"
	roleScheduler = "kube-scheduler"
	roleKwok      = "kwok"
)

var cpuRoles = []string{roleAPIServer, roleEtcd, roleDeckhand, roleKruise, roleBench, roleMachine}

// roleOfComm: a command name is at most 15 characters.
var roleOfComm = map[string]string{"kube-apiserver": roleAPIServer, "etcd": roleEtcd, "deckhand": roleDeckhand, "kruise-manager": roleKruise,
	"kube-controller": roleKCM, "kube-scheduler": roleScheduler, "kwok": roleKwok}

// cpuSnapshot is the CPU time (user + system) each role's processes have
// used so far, and the machine's busy time (every CPU, /proc/stat).
type cpuSnapshot map[string]time.Duration

func readCPU() (cpuSnapshot, error) {
	s := cpuSnapshot{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		comm, cpu, ok := parseStatCPU(b)
		if !ok {
			continue
		}
		role := roleOfComm[comm]
		if pid == self {
			role = roleBench
		}
		if role == "" {
			continue
		}
		s[role] += cpu
	}
	busy, err := machineBusy()
	if err != nil {
		return nil, err
	}
	s[roleMachine] = busy
	return s, nil
}

// parseStatCPU reads a /proc/<pid>/stat: the command name and the CPU time
// (user + system) the process has used.
func parseStatCPU(b []byte) (comm string, cpu time.Duration, ok bool) {
	// The command name is in parentheses and may hold spaces; the
	// fields after it start with the state (field 3 of proc(5)).
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return string(b[open+1 : end]), ticks(utime + stime), true
}

// processCPU is the CPU time (user + system) process pid has used.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, cpu, ok := parseStatCPU(b)
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return cpu, nil
}

// machineBusy is the time every CPU spent not idle (nor waiting for I/O).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, x := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 7 { // guest time is already counted in user time
			break
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return ticks(busy), nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }

// sub is the CPU time used between before and s.
func (s cpuSnapshot) sub(before cpuSnapshot) cpuSnapshot {
	d := cpuSnapshot{}
	for k, v := range s {
		d[k] = v - before[k]
	}
	return d
}

// add adds d to s.
func (s cpuSnapshot) add(d cpuSnapshot) {
	for k, v := range d {
		s[k] += v
	}
}

// seconds is s in seconds by role, for the raw JSON.
func (s cpuSnapshot) seconds() map[string]float64 {
	out := make(map[string]float64, len(s))
	for k, v := range s {
		out[k] = v.Seconds()
	}
	return out
}

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
