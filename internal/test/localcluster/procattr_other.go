//go:build !linux && !windows

package localcluster

import "syscall"

// ChildProcAttr is the process attributes of every process the harness
// starts: its own process group. Only Linux can also tie a child's life to
// the test process (Pdeathsig), so elsewhere a child of a crashed suite must
// be stopped by hand. The local cluster runs on Linux (docs/development.md);
// this file lets the harness compile on macOS.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
