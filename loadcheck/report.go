package loadcheck

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latency summarizes a latency histogram, in milliseconds.
type Latency struct {
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// latencyOf reads a microsecond histogram. Percentiles are HdrHistogram's: the highest value
// equivalent to the one at that rank, so within 0.1% at 3 significant digits.
func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		MeanMs: h.Mean() / 1000,
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P95Ms:  ms(h.ValueAtQuantile(95)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}

// Interval is one line of a run's interval series, like a cassandra-stress interval line.
// Rates and latencies cover the interval alone; TotalOps is cumulative.
type Interval struct {
	TimeS    float64 `json:"time_s"` // end of the interval, seconds since the run started
	TotalOps int64   `json:"total_ops"`
	Ops      int64   `json:"ops"`
	OpRate   float64 `json:"op_rate"`
	PkRate   float64 `json:"pk_rate"`
	RowRate  float64 `json:"row_rate"`
	Latency
	Errors int64 `json:"errors"`
	// Stderr is the standard error of the mean interval op rate so far, relative to that
	// mean, as cassandra-stress prints it: a run is steady when it is small.
	Stderr float64 `json:"stderr"`
}

var _ = time.Second
