//go:build !linux && !windows

package localcluster

import "syscall"

// ChildProcAttr is the process attributes of every process the harness
// starts: its own process group. Only Linux can also signal a child when the
// test process dies (Pdeathsig), so onParentDeath is unused and a child of a
// crashed suite must be stopped by hand. The local cluster runs on Linux
// (docs/development.md); this file lets the harness compile on macOS.
func ChildProcAttr(onParentDeath syscall.Signal) *syscall.SysProcAttr {
	_ = onParentDeath
	return &syscall.SysProcAttr{Setpgid: true}
}
