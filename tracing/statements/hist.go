package statements

import (
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/latencyhist"
)

// The per-statement latency histogram's layout is package latencyhist's, which the
// clients that merge several sidecars' histograms read too.
const (
	// NumBuckets is the number of buckets of a statement's histogram.
	NumBuckets = latencyhist.NumBuckets
	// HistogramLayout names the bucket layout in the JSON, so that a reader can refuse
	// buckets it does not know.
	HistogramLayout = latencyhist.Layout
)

// bucketOf returns the bucket of a latency of us microseconds.
func bucketOf(us uint64) int { return latencyhist.BucketOf(us) }

// BucketBounds returns the lowest value of bucket i and its width, in microseconds.
func BucketBounds(i int) (low, width uint64) { return latencyhist.BucketBounds(i) }

// histogram is a statement's latency histogram, updated with atomic adds.
type histogram [NumBuckets]atomic.Uint64

// Bucket is one non-empty bucket of a histogram: its index and count.
type Bucket = latencyhist.Bucket

// Quantile returns the q-quantile (0 < q ≤ 1) of the counts in buckets (sparse, any order
// of indexes), in microseconds: the middle of the bucket that holds it, capped at maxUS. It
// returns 0 for an empty histogram.
func Quantile(buckets []Bucket, q float64, maxUS uint64) uint64 {
	var dense latencyhist.Dense
	dense.Add(buckets)
	return dense.Quantile(dense.Total(), q, maxUS)
}

// snapshot copies h into dense and returns its total count.
func (h *histogram) snapshot(dense *latencyhist.Dense) uint64 {
	var n uint64
	for i := range h {
		c := h[i].Load()
		dense[i] = c
		n += c
	}
	return n
}
