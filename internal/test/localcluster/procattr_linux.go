package localcluster

import "syscall"

// ChildProcAttr is the process attributes of every process the harness (and
// the benchmarks, for their peers) starts: its own process group, so that
// stopping it stops what it started, and onParentDeath sent by the kernel if
// the test process dies first, so that no API server or manager outlives a
// crashed suite.
func ChildProcAttr(onParentDeath syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: onParentDeath}
}
