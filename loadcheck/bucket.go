package loadcheck

import "sort"

// The sidecar's added-latency histogram as read from its /metrics: cumulative counts by upper bound.

// bucket is a cumulative Prometheus histogram: counts[i] observations ≤ bounds[i], and
// counts[len(bounds)] in all.
type bucket struct {
	bounds []float64
	counts []uint64
}

// sub returns the observations between an earlier scrape o and b, or nil when the two do
// not have the same buckets.
func (b bucket) sub(o bucket) bucket {
	if len(b.counts) == 0 || len(b.counts) != len(o.counts) {
		return bucket{}
	}
	d := bucket{bounds: b.bounds, counts: make([]uint64, len(b.counts))}
	for i := range b.counts {
		if b.counts[i] < o.counts[i] {
			return bucket{} // the process restarted
		}
		d.counts[i] = b.counts[i] - o.counts[i]
	}
	return d
}

// add returns the sum of two deltas of the same histogram; either may be empty.
func (b bucket) add(o bucket) bucket {
	switch {
	case len(b.counts) == 0:
		return o
	case len(o.counts) == 0 || len(o.counts) != len(b.counts):
		return b
	}
	s := bucket{bounds: b.bounds, counts: make([]uint64, len(b.counts))}
	for i := range b.counts {
		s.counts[i] = b.counts[i] + o.counts[i]
	}
	return s
}

// total is the number of observations.
func (b bucket) total() uint64 {
	if len(b.counts) == 0 {
		return 0
	}
	return b.counts[len(b.counts)-1]
}

// quantile estimates the q-quantile (0 < q < 1) the way Prometheus's histogram_quantile
// does: linearly within the bucket that holds it, from 0 for the first bucket. Beyond the
// last bound it returns that bound. ok is false without observations.
func (b bucket) quantile(q float64) (float64, bool) {
	n := b.total()
	if n == 0 || len(b.bounds) == 0 {
		return 0, false
	}
	rank := q * float64(n)
	i := sort.Search(len(b.bounds), func(i int) bool { return float64(b.counts[i]) >= rank })
	if i == len(b.bounds) {
		return b.bounds[len(b.bounds)-1], true
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = b.bounds[i-1], float64(b.counts[i-1])
	}
	in := float64(b.counts[i]) - below
	if in <= 0 {
		return b.bounds[i], true
	}
	return lo + (b.bounds[i]-lo)*(rank-below)/in, true
}
