package chlocal

import "syscall"

// sysProcAttr puts the server in its own process group (Stop kills the
// group) and kills it if this process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
