//go:build !unix

package loadcheck

import "time"

// cpuTime returns 0: process CPU time is read with getrusage, on Unix only.
func cpuTime() time.Duration { return 0 }
