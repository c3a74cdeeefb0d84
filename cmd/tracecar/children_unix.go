//go:build unix

package main

import "syscall"

// signalGroup sends SIGTERM, or SIGKILL when kill, to the process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pgid, sig)
}
