package metrics

import "github.com/prometheus/client_golang/prometheus"

var cpuDesc = prometheus.NewDesc("tracecar_process_cpu_seconds_total",
	"User and system CPU time of this process, from getrusage, to the microsecond: "+
		"process_cpu_seconds_total counts in clock ticks (10 ms), too coarse for CPU per operation over a few seconds.", nil, nil)

var cpuUserDesc = prometheus.NewDesc("tracecar_process_cpu_user_seconds_total",
	"The user-space part of tracecar_process_cpu_seconds_total: the process's own code, without the kernel's work on its system calls.", nil, nil)

// cpuCollector serves tracecar_process_cpu_seconds_total where the platform can read it.
type cpuCollector struct{}

// Describe sends the description of the series.
func (cpuCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cpuDesc
	ch <- cpuUserDesc
}

// Collect reads the process's CPU time; it sends nothing where that is unknown.
func (cpuCollector) Collect(ch chan<- prometheus.Metric) {
	if user, sys, ok := processCPUSeconds(); ok {
		ch <- prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue, user+sys)
		ch <- prometheus.MustNewConstMetric(cpuUserDesc, prometheus.CounterValue, user)
	}
}
