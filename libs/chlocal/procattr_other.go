//go:build !linux

package chlocal

import "syscall"

// sysProcAttr puts the server in its own process group (Stop kills the
// group).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
