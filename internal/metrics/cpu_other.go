//go:build !unix

package metrics

// processCPUSeconds is unknown off Unix.
func processCPUSeconds() (user, sys float64, ok bool) { return 0, 0, false }
