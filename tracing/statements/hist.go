package statements

import (
	"math/bits"
	"sync/atomic"
)

// The per-statement latency histogram has fixed log-linear buckets in microseconds: one
// bucket per value below 16 µs, then 8 buckets per power of two, up to 2^36 µs (about 19
// hours). A bucket is at most 1/8 of its lower bound wide, so a percentile read from it (its
// middle) is within 6.25% of the true value. The layout is the same everywhere, so
// histograms from several sidecars merge exactly by adding counts bucket by bucket.
const (
	linearBuckets = 16
	subBits       = 3
	subBuckets    = 1 << subBits
	maxExp        = 36
	// NumBuckets is the number of buckets of a statement's histogram.
	NumBuckets = linearBuckets + (maxExp-4)*subBuckets
	// HistogramLayout names the bucket layout in the JSON, so that a reader can refuse
	// buckets it does not know.
	HistogramLayout = "log2x8-us"
)

// bucketOf returns the bucket of a latency of us microseconds.
func bucketOf(us uint64) int {
	if us < linearBuckets {
		return int(us)
	}
	e := bits.Len64(us) - 1
	if e >= maxExp {
		return NumBuckets - 1
	}
	sub := int(us>>(e-subBits)) & (subBuckets - 1)
	return linearBuckets + (e-4)*subBuckets + sub
}

// BucketBounds returns the lowest value of bucket i and its width, in microseconds.
func BucketBounds(i int) (low, width uint64) {
	if i < linearBuckets {
		return uint64(i), 1
	}
	e := (i-linearBuckets)/subBuckets + 4
	sub := uint64((i - linearBuckets) % subBuckets)
	return (subBuckets + sub) << (e - subBits), 1 << (e - subBits)
}

// histogram is a statement's latency histogram, updated with atomic adds.
type histogram [NumBuckets]atomic.Uint64

// Bucket is one non-empty bucket of a histogram: its index and count.
type Bucket [2]uint64

// Quantile returns the q-quantile (0 < q ≤ 1) of the counts in buckets (sparse, any order
// of indexes), in microseconds: the middle of the bucket that holds it, capped at maxUS. It
// returns 0 for an empty histogram.
func Quantile(buckets []Bucket, q float64, maxUS uint64) uint64 {
	var dense [NumBuckets]uint64
	var n uint64
	for _, b := range buckets {
		if b[0] < NumBuckets {
			dense[b[0]] += b[1]
			n += b[1]
		}
	}
	return quantile(&dense, n, q, maxUS)
}

func quantile(dense *[NumBuckets]uint64, n uint64, q float64, maxUS uint64) uint64 {
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	var seen uint64
	for i, c := range dense {
		seen += c
		if seen >= rank {
			low, width := BucketBounds(i)
			v := low + width/2
			if v > maxUS && maxUS > 0 {
				v = maxUS
			}
			return v
		}
	}
	return maxUS
}

// snapshot copies h into dense and returns its total count.
func (h *histogram) snapshot(dense *[NumBuckets]uint64) uint64 {
	var n uint64
	for i := range h {
		c := h[i].Load()
		dense[i] = c
		n += c
	}
	return n
}

// sparse returns the non-empty buckets of dense.
func sparse(dense *[NumBuckets]uint64) []Bucket {
	var out []Bucket
	for i, c := range dense {
		if c != 0 {
			out = append(out, Bucket{uint64(i), c})
		}
	}
	return out
}
