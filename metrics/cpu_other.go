//go:build !unix

package metrics

// processCPUSeconds is unknown off Unix.
func processCPUSeconds() (float64, bool) { return 0, false }
