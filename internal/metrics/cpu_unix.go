//go:build unix

package metrics

import "syscall"

// processCPUSeconds returns the user and the system CPU time of this process.
func processCPUSeconds() (user, sys float64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return float64(ru.Utime.Nano()) / 1e9, float64(ru.Stime.Nano()) / 1e9, true
}
