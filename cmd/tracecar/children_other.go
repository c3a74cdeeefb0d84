//go:build unix && !linux

package main

import "syscall"

// childProcAttr puts a child in process group pgid (a new one when 0). Off Linux a child
// outlives a loadcheck killed by SIGKILL; any other end of loadcheck stops it.
func childProcAttr(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
}
