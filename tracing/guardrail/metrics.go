package guardrail

import "github.com/prometheus/client_golang/prometheus"

// StateCollector returns the tracecar_guardrail_stepped_down gauge, for /metrics: 1 while
// the guardrail runs a cheaper tracing level than the user asked for, else 0. An alert on
// it holds for as long as tracing is held down, where one on the steps counter would see
// only the step.
func (c *Controller) StateCollector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tracecar_guardrail_stepped_down",
		Help: "1 while the runtime guardrail runs tracing at a cheaper level than the user asked for, else 0.",
	}, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.g.steppedDown { // while failing closed too
			return 1
		}
		return 0
	})
}
