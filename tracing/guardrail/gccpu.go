package guardrail

import (
	"runtime/metrics"
	"time"
)

// gcCPUMetric is the runtime's estimate of the CPU time its garbage collector has used.
const gcCPUMetric = "/cpu/classes/gc/total:cpu-seconds"

// GCCPU returns the CPU time the garbage collector has used, from runtime/metrics, and
// false when the runtime does not report it. It allocates: call it once per window.
func GCCPU() (time.Duration, bool) {
	s := []metrics.Sample{{Name: gcCPUMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0, false
	}
	return time.Duration(s[0].Value.Float64() * float64(time.Second)), true
}
