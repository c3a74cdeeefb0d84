package main

import "syscall"

// childProcAttr puts a child in process group pgid (a new one when 0) and has the kernel
// kill it when loadcheck dies, even by SIGKILL. Pdeathsig fires when the thread that
// started the child exits; Go keeps its threads for the life of the process unless a
// goroutine exits locked to one, which loadcheck never does.
func childProcAttr(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
}
