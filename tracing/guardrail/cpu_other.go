//go:build !unix

package guardrail

import "time"

// ProcessCPU reports false: the CPU figure is unknown on this platform.
func ProcessCPU() (time.Duration, bool) { return 0, false }
