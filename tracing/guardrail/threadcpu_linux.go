package guardrail

import (
	"syscall"
	"unsafe"
)

// threadCPUOK says that threadCPU reads a real clock.
const threadCPUOK = true

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// threadCPU returns the calling thread's CPU time in nanoseconds. It is a system call
// (the vDSO does not serve this clock), so it is called only around recorded work.
func threadCPU() (int64, bool) {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
