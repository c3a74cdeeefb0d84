package latencyhist

import "testing"

// TestHistogramBuckets: every latency falls in the bucket whose bounds hold it, a bucket
// is at most 1/8 of its lower bound wide past the linear ones, buckets grow with latency,
// and a huge latency lands in the last one.
func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for us := uint64(0); us < 1<<20; us += 1 + us/64 {
		i := BucketOf(us)
		low, width := BucketBounds(i)
		if us < low || us >= low+width {
			t.Fatalf("%d µs in bucket %d [%d, %d)", us, i, low, low+width)
		}
		if low >= linearBuckets && width*subBuckets > low {
			t.Fatalf("bucket %d is %d wide at %d", i, width, low)
		}
		if i < prev {
			t.Fatalf("bucket order: %d after %d", i, prev)
		}
		prev = i
	}
	if BucketOf(1<<62) != NumBuckets-1 {
		t.Error("huge latency not in the last bucket")
	}
}
