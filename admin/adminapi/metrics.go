package adminapi

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// PathMetrics is the Prometheus endpoint.
const PathMetrics = "/metrics"

// Series of /metrics that clients read.
const (
	SeriesRequests = "tracecar_requests_total"
	SeriesLatency  = "tracecar_request_duration_seconds"
)

// Histogram is a cumulative Prometheus histogram: Counts[i] observations at most
// Bounds[i], and Counts[len(Bounds)] in all (the +Inf bucket). The zero Histogram is empty.
type Histogram struct {
	Bounds []float64
	Counts []uint64
}

// Total returns the number of observations.
func (h Histogram) Total() uint64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Sub returns the observations of h since an earlier scrape o of the same series, or the
// empty Histogram when the two have different buckets or h went backwards (the process
// restarted).
func (h Histogram) Sub(o Histogram) Histogram {
	if len(h.Counts) == 0 || len(h.Counts) != len(o.Counts) {
		return Histogram{}
	}
	d := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		if h.Counts[i] < o.Counts[i] {
			return Histogram{}
		}
		d.Counts[i] = h.Counts[i] - o.Counts[i]
	}
	return d
}

// Add returns the sum of h and o, bucket by bucket: histograms of several sidecars merge
// this way, and a percentile is then read from the sum, never averaged. An empty one adds
// nothing; of two with different buckets, h is returned.
func (h Histogram) Add(o Histogram) Histogram {
	switch {
	case len(h.Counts) == 0:
		return o
	case len(o.Counts) != len(h.Counts):
		return h
	}
	s := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		s.Counts[i] = h.Counts[i] + o.Counts[i]
	}
	return s
}

// Quantile estimates the q-quantile (0 < q < 1) as Prometheus's histogram_quantile does:
// linearly within the bucket that holds it, from 0 in the first bucket; beyond the last
// bound it returns that bound. ok is false without observations.
func (h Histogram) Quantile(q float64) (v float64, ok bool) {
	n := h.Total()
	if n == 0 || len(h.Bounds) == 0 {
		return 0, false
	}
	rank := q * float64(n)
	i := sort.Search(len(h.Bounds), func(i int) bool { return float64(h.Counts[i]) >= rank })
	if i == len(h.Bounds) {
		return h.Bounds[len(h.Bounds)-1], true
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.Bounds[i-1], float64(h.Counts[i-1])
	}
	in := float64(h.Counts[i]) - below
	if in <= 0 {
		return h.Bounds[i], true
	}
	return lo + (h.Bounds[i]-lo)*(rank-below)/in, true
}

// RequestMetrics are the request series of one scrape of a sidecar's /metrics, by opcode
// label (QUERY, EXECUTE, …): the requests counted, and their latency histogram.
type RequestMetrics struct {
	Requests map[string]uint64
	Latency  map[string]Histogram
}

// ParseRequestMetrics reads tracecar_requests_total and tracecar_request_duration_seconds
// from a /metrics body in the Prometheus text format.
func ParseRequestMetrics(body []byte) (RequestMetrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return RequestMetrics{}, fmt.Errorf("parse %s: %w", PathMetrics, err)
	}
	rm := RequestMetrics{Requests: map[string]uint64{}, Latency: map[string]Histogram{}}
	if mf := mfs[SeriesRequests]; mf != nil {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "opcode" {
					rm.Requests[l.GetValue()] = uint64(m.GetCounter().GetValue())
				}
			}
		}
	}
	if mf := mfs[SeriesLatency]; mf != nil {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "opcode" {
					continue
				}
				var h Histogram
				for _, b := range m.GetHistogram().GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue
					}
					h.Bounds = append(h.Bounds, b.GetUpperBound())
					h.Counts = append(h.Counts, b.GetCumulativeCount())
				}
				h.Counts = append(h.Counts, m.GetHistogram().GetSampleCount())
				rm.Latency[l.GetValue()] = h
			}
		}
	}
	return rm, nil
}
