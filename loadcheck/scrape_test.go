package loadcheck

import (
	"math"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/loadcheck/stats"
)

const metricsText = `# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.34
# TYPE tracecar_process_cpu_seconds_total counter
tracecar_process_cpu_seconds_total 12.345678
# TYPE tracecar_added_latency_seconds histogram
tracecar_added_latency_seconds_bucket{le="1e-06"} 10
tracecar_added_latency_seconds_bucket{le="2e-06"} 60
tracecar_added_latency_seconds_bucket{le="5e-06"} 99
tracecar_added_latency_seconds_bucket{le="+Inf"} 100
tracecar_added_latency_seconds_sum 0.0003
tracecar_added_latency_seconds_count 100
`

func TestParseSample(t *testing.T) {
	s, err := parseSample(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	if !s.hasCPU || !s.fine || s.cpu != 12.345678 {
		t.Errorf("cpu = %v (fine %v, known %v); want the microsecond series, 12.345678", s.cpu, s.fine, s.hasCPU)
	}
	if got := s.added.total(); got != 100 {
		t.Errorf("added total = %d; want 100", got)
	}

	coarse, err := parseSample(strings.NewReader("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 7.5\n"))
	if err != nil || !coarse.hasCPU || coarse.fine || coarse.cpu != 7.5 || coarse.added.total() != 0 {
		t.Errorf("coarse = %+v, %v; want the tick series, 7.5, and no histogram", coarse, err)
	}
	none, err := parseSample(strings.NewReader("# TYPE other gauge\nother 1\n"))
	if err != nil || none.hasCPU {
		t.Errorf("no CPU series: %+v, %v; want unknown CPU", none, err)
	}
	if _, err := parseSample(strings.NewReader("not { metrics")); err == nil {
		t.Error("parseSample accepted garbage")
	}
}

func TestBucketQuantile(t *testing.T) {
	b := bucket{bounds: []float64{1, 2, 5}, counts: []uint64{10, 60, 99, 100}}
	tests := []struct {
		q, want float64
	}{
		{0.05, 0.5},        // in the first bucket, from 0
		{0.5, 1.8},         // 50th of 100: 40 of the 50 in (1, 2]
		{0.99, 5},          // the 99th is the last in (2, 5]
		{0.995, 5},         // beyond the last bound: that bound
		{0.61, 2 + 3.0/39}, // the first of the 39 in (2, 5]
	}
	for _, tt := range tests {
		if got, ok := b.quantile(tt.q); !ok || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, %v; want %v", tt.q, got, ok, tt.want)
		}
	}
	if _, ok := (bucket{}).quantile(0.5); ok {
		t.Error("an empty histogram has a quantile")
	}

	later := bucket{bounds: b.bounds, counts: []uint64{15, 70, 120, 125}}
	d := later.sub(b)
	if d.total() != 25 || d.counts[0] != 5 {
		t.Errorf("delta = %v; want 5, 10, 21, 25", d.counts)
	}
	if sum := d.add(d); sum.total() != 50 {
		t.Errorf("sum of deltas = %v; want total 50", sum.counts)
	}
	if r := b.sub(later); r.total() != 0 {
		t.Errorf("a counter that went down (a restart) gave %v; want no delta", r.counts)
	}
}

func TestTQuantile(t *testing.T) {
	for _, tt := range []struct{ p, df, want float64 }{
		{0.975, 1, 12.706}, {0.975, 9, 2.262}, {0.975, 30, 2.042}, {0.5, 5, 0}, {0.025, 9, -2.262},
	} {
		if got := stats.TQuantile(tt.p, tt.df); math.Abs(got-tt.want) > 0.001 {
			t.Errorf("stats.TQuantile(%v, %v) = %.4f; want %.3f", tt.p, tt.df, got, tt.want)
		}
	}
}

func TestCompareMetric(t *testing.T) {
	base := []float64{10, 10.2, 9.9, 10.1}
	mode := []float64{11, 11.1, 10.9, 11.2}
	d := compareMetric(mode, base)
	if !d.ok || math.Abs(d.diff-1) > 1e-9 || d.pairedP == nil || *d.pairedP >= Significance || d.welchP == nil {
		t.Fatalf("compareMetric = %+v; want diff 1, paired p < 0.05", d)
	}
	if d.minDetect <= 0 || d.minDetect >= 1 {
		t.Errorf("min detectable %v; want between 0 and the diff", d.minDetect)
	}
	if math.Abs(d.pct-100*1/10.05) > 1e-9 {
		t.Errorf("pct = %v; want %v", d.pct, 100/10.05)
	}
	if u := compareMetric(nil, base); u.ok {
		t.Error("an unknown metric compared")
	}
}
