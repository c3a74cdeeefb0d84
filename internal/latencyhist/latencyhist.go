// Package latencyhist is the layout of the per-statement latency histogram, shared by the
// statistics that fill it (tracing/statements) and the clients that merge several
// sidecars' histograms (admin/adminapi), so that both read the same buckets.
//
// The buckets are fixed and log-linear, in microseconds: one bucket per value below 16 µs,
// then 8 buckets per power of two, up to 2^36 µs (about 19 hours). A bucket is at most 1/8
// of its lower bound wide, so a percentile read from it (its middle) is within 6.25% of the
// true value. The layout is the same everywhere, so histograms from several sidecars merge
// exactly by adding counts bucket by bucket.
package latencyhist

import "math/bits"

const (
	linearBuckets = 16
	subBits       = 3
	subBuckets    = 1 << subBits
	maxExp        = 36
	// NumBuckets is the number of buckets of a histogram.
	NumBuckets = linearBuckets + (maxExp-4)*subBuckets
	// Layout names the bucket layout in the JSON, so that a reader can refuse buckets it
	// does not know.
	Layout = "log2x8-us"
)

// Dense is a histogram's counts, bucket by bucket.
type Dense [NumBuckets]uint64

// Bucket is one non-empty bucket of a histogram: its index and count.
type Bucket [2]uint64

// BucketOf returns the bucket of a latency of us microseconds.
func BucketOf(us uint64) int {
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

// Add adds the counts of buckets (sparse, any order of indexes) to d, leaving out an index
// past the layout's.
func (d *Dense) Add(buckets []Bucket) {
	for _, b := range buckets {
		if b[0] < NumBuckets {
			d[b[0]] += b[1]
		}
	}
}

// Total returns the number of observations in d.
func (d *Dense) Total() uint64 {
	var n uint64
	for _, c := range d {
		n += c
	}
	return n
}

// Quantile returns the q-quantile (0 < q ≤ 1) of the n observations of d, in
// microseconds: the middle of the bucket that holds it, capped at maxUS. It returns 0 for
// an empty histogram.
func (d *Dense) Quantile(n uint64, q float64, maxUS uint64) uint64 {
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
	for i, c := range d {
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

// Sparse returns the non-empty buckets of d.
func (d *Dense) Sparse() []Bucket {
	var out []Bucket
	for i, c := range d {
		if c != 0 {
			out = append(out, Bucket{uint64(i), c})
		}
	}
	return out
}
