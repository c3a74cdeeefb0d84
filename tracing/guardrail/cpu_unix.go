//go:build unix

package guardrail

import (
	"syscall"
	"time"
)

// ProcessCPU returns the user plus system CPU time this process has used, from one
// getrusage call.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
