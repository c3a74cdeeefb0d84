package guardrail

import (
	"sync/atomic"
	"time"
)

// AddedBounds are the upper bounds of the added-latency buckets: 5 µs to 100 ms.
var AddedBounds = []time.Duration{
	5 * time.Microsecond, 10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
}

// Histogram is a cumulative count of durations by bucket: Counts[i] counts those at most
// Bounds[i] and above Bounds[i-1]; the last count is those above every bound. The zero
// value is an empty histogram with no bounds.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
}

// Sub returns h minus an earlier reading of the same series. A reading with other bounds
// (or none) counts as empty.
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	copy(out.Counts, h.Counts)
	if len(earlier.Counts) != len(h.Counts) {
		return out
	}
	for i, c := range earlier.Counts {
		if out.Counts[i] >= c {
			out.Counts[i] -= c
		} else {
			out.Counts[i] = 0
		}
	}
	return out
}

// Total returns the number of durations counted.
func (h Histogram) Total() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Quantile estimates the q-quantile by linear interpolation within its bucket, as
// Prometheus's histogram_quantile does. Above the last bound it returns the last bound.
func (h Histogram) Quantile(q float64) time.Duration {
	total := h.Total()
	if total == 0 || len(h.Bounds) == 0 {
		return 0
	}
	rank := q * float64(total)
	var seen float64
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			if i >= len(h.Bounds) {
				return h.Bounds[len(h.Bounds)-1]
			}
			var lo time.Duration
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			frac := (rank - seen) / float64(c)
			return lo + time.Duration(frac*float64(h.Bounds[i]-lo))
		}
		seen += float64(c)
	}
	return h.Bounds[len(h.Bounds)-1]
}

// AddedLatency counts added latencies into AddedBounds buckets. Its Observe fits
// tracing.Options.AddedLatency. It is safe for concurrent use; the zero value is ready.
type AddedLatency struct {
	counts [15]atomic.Uint64 // len(AddedBounds) + 1
}

// Observe counts one request that spent d in the sidecar.
func (a *AddedLatency) Observe(d time.Duration) {
	i := 0
	for i < len(AddedBounds) && d > AddedBounds[i] {
		i++
	}
	a.counts[i].Add(1)
}

// Histogram returns the counts so far.
func (a *AddedLatency) Histogram() Histogram {
	h := Histogram{Bounds: AddedBounds, Counts: make([]uint64, len(a.counts))}
	for i := range a.counts {
		h.Counts[i] = a.counts[i].Load()
	}
	return h
}
