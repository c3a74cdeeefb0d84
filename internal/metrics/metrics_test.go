package metrics

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tracecar/tracecar/internal/cql"
)

// gather returns the scraped series by name and opcode label ("" for none).
func gather(tb testing.TB, m *Metrics) map[string]map[string]*dto.Metric {
	tb.Helper()
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]map[string]*dto.Metric{}
	for _, mf := range mfs {
		out[mf.GetName()] = map[string]*dto.Metric{}
		for _, mm := range mf.GetMetric() {
			op := ""
			for _, l := range mm.GetLabel() {
				if l.GetName() == "opcode" {
					op = l.GetValue()
				}
			}
			out[mf.GetName()][op] = mm
		}
	}
	return out
}

func TestRequestAndLatency(t *testing.T) {
	m := New()
	m.Request(cql.OpQuery)
	m.Request(cql.OpQuery)
	m.Request(cql.OpExecute)
	m.Request(cql.Opcode(0x42))
	m.Latency(cql.OpQuery, 3*time.Millisecond)   // bucket 0.005
	m.Latency(cql.OpQuery, 100*time.Microsecond) // exactly on the first bound: bucket 0.0001
	m.Latency(cql.OpQuery, time.Minute)          // beyond the last bound: +Inf only
	m.ConnOpened()
	m.ConnOpened()
	m.ConnClosed()

	g := gather(t, m)
	counters := []struct {
		op   string
		want float64
	}{{"QUERY", 2}, {"EXECUTE", 1}, {"other", 1}, {"BATCH", 0}, {"STARTUP", 0}}
	for _, c := range counters {
		if got := g["tracecar_requests_total"][c.op].GetCounter().GetValue(); got != c.want {
			t.Errorf("requests{opcode=%s} = %v; want %v", c.op, got, c.want)
		}
	}
	if got := g["tracecar_client_connections"][""].GetGauge().GetValue(); got != 1 {
		t.Errorf("connections = %v; want 1", got)
	}
	if _, ok := g["tracecar_client_connections_limit"]; ok {
		t.Error("tracecar_client_connections_limit without a limit")
	}
	m.SetConnectionLimit(4096)
	if got := gather(t, m)["tracecar_client_connections_limit"][""].GetGauge().GetValue(); got != 4096 {
		t.Errorf("connections limit = %v; want 4096", got)
	}
	h := g["tracecar_request_duration_seconds"]["QUERY"].GetHistogram()
	if h.GetSampleCount() != 3 {
		t.Errorf("sample count = %d; want 3", h.GetSampleCount())
	}
	if want := 60.0031; math.Abs(h.GetSampleSum()-want) > 1e-9 {
		t.Errorf("sample sum = %v; want %v", h.GetSampleSum(), want)
	}
	wantCum := map[float64]uint64{0.0001: 1, 0.00025: 1, 0.0025: 1, 0.005: 2, 10: 2}
	for _, b := range h.GetBucket() {
		if w, ok := wantCum[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v = %d; want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	if n := len(g["tracecar_request_duration_seconds"]); n != numLabels {
		t.Errorf("%d latency series; want %d", n, numLabels)
	}
}

// TestConcurrent counts from many goroutines; the sums are exact. Run it with -race.
func TestConcurrent(t *testing.T) {
	m := New()
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				m.Request(cql.OpExecute)
				m.Latency(cql.OpExecute, time.Millisecond)
			}
		})
	}
	wg.Wait()
	g := gather(t, m)
	if got := g["tracecar_requests_total"]["EXECUTE"].GetCounter().GetValue(); got != goroutines*each {
		t.Errorf("requests = %v; want %d", got, goroutines*each)
	}
	if got := g["tracecar_request_duration_seconds"]["EXECUTE"].GetHistogram().GetSampleCount(); got != goroutines*each {
		t.Errorf("samples = %v; want %d", got, goroutines*each)
	}
}

func TestNil(t *testing.T) {
	var m *Metrics
	m.Request(cql.OpQuery)
	m.Latency(cql.OpQuery, time.Second)
	m.ConnOpened()
	m.ConnClosed()
	if mfs, err := m.Gatherer().Gather(); err != nil || len(mfs) != 0 {
		t.Errorf("nil Gather = %v, %v; want nothing", mfs, err)
	}
}

// BenchmarkRequest is the per-request cost of counting.
func BenchmarkRequest(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.Request(cql.OpExecute)
	}
}

// BenchmarkRequestLatency is the per-request cost of counting and observing the latency.
func BenchmarkRequestLatency(b *testing.B) {
	m := New()
	d := 1200 * time.Microsecond
	b.ReportAllocs()
	for b.Loop() {
		m.Request(cql.OpExecute)
		m.Latency(cql.OpExecute, d)
	}
}

// BenchmarkRequestLatencyParallel is the same from every core at once, as the sidecar's
// connections do.
func BenchmarkRequestLatencyParallel(b *testing.B) {
	m := New()
	d := 1200 * time.Microsecond
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Request(cql.OpExecute)
			m.Latency(cql.OpExecute, d)
		}
	})
}

// BenchmarkGather is the cost of one scrape.
func BenchmarkGather(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Gatherer().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientGolangParallel is what Request and Latency cost with client_golang's own
// Counter and Histogram, for comparison: every core updates the same cache lines.
func BenchmarkClientGolangParallel(b *testing.B) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c", Help: "c"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: LatencyBuckets})
	d := 1200 * time.Microsecond
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
			h.Observe(d.Seconds())
		}
	})
}

// BenchmarkClientGolang is BenchmarkRequestLatency with client_golang's own Counter and
// Histogram, for comparison.
func BenchmarkClientGolang(b *testing.B) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c", Help: "c"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: LatencyBuckets})
	d := 1200 * time.Microsecond
	b.ReportAllocs()
	for b.Loop() {
		c.Inc()
		h.Observe(d.Seconds())
	}
}

func TestAddedLatency(t *testing.T) {
	m := New()
	m.AddedLatency(800 * time.Nanosecond) // first bucket (≤ 1 µs)
	m.AddedLatency(4 * time.Microsecond)  // ≤ 5 µs
	m.AddedLatency(time.Second)           // +Inf
	h := gather(t, m)["tracecar_added_latency_seconds"][""].GetHistogram()
	if h == nil {
		t.Fatal("no tracecar_added_latency_seconds histogram")
	}
	if got := h.GetSampleCount(); got != 3 {
		t.Errorf("count = %d; want 3", got)
	}
	want := map[float64]uint64{1e-6: 1, 3e-6: 1, 5e-6: 2, 0.1: 2}
	for _, b := range h.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%g: %d; want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	if got, want := h.GetSampleSum(), 1.0000048; math.Abs(got-want) > 1e-9 {
		t.Errorf("sum = %v; want %v", got, want)
	}
}

func TestProcessCPUSeconds(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(RuntimeCollectors()...)
	read := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "tracecar_process_cpu_seconds_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no tracecar_process_cpu_seconds_total")
		return 0
	}
	before := read()
	// Burn CPU until the counter moves: with microsecond resolution it moves long before the
	// 10 ms tick of process_cpu_seconds_total would.
	x := 0
	for i := 0; read() == before; i++ {
		for j := range 100000 {
			x += j ^ i
		}
		if i > 1e6 {
			t.Fatal("CPU time never moved")
		}
	}
	_ = x
	// Linux splits the total between user and system by clock ticks, so the user part is
	// only checked to be there and at most the total.
	total, user := -1.0, -1.0
	mfs, _ := reg.Gather() // one scrape, so that both are of the same moment
	for _, mf := range mfs {
		switch mf.GetName() {
		case "tracecar_process_cpu_user_seconds_total":
			user = mf.GetMetric()[0].GetCounter().GetValue()
		case "tracecar_process_cpu_seconds_total":
			total = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if user < 0 || user > total {
		t.Errorf("user CPU %v; want a series from 0 to the total %v", user, total)
	}
}

// TestCountRequestsFromSource checks that tracecar_requests_total adds the counts of the
// source set with CountRequests (the sidecar's one counter) to those of Request.
func TestCountRequestsFromSource(t *testing.T) {
	m := New()
	m.Request(cql.OpExecute)
	m.CountRequests(func() map[cql.Opcode]uint64 {
		return map[cql.Opcode]uint64{cql.OpExecute: 41, cql.OpQuery: 7, cql.Opcode(0x42): 2}
	})
	got := map[string]float64{}
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tracecar_requests_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"EXECUTE": 42, "QUERY": 7, "other": 2}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tracecar_requests_total{opcode=%q} = %v; want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// TestAnsweredIsLatencyAndAddedLatency checks that recording a read's responses at once
// (Answered) gives the very series that recording them one by one gives.
func TestAnsweredIsLatencyAndAddedLatency(t *testing.T) {
	const arrived, now = int64(50_000_000), int64(53_000_000)
	answers := []Answer{
		{Start: now - int64(3*time.Millisecond), Op: cql.OpQuery},
		{Start: now - int64(100*time.Microsecond), Op: cql.OpQuery},
		{Start: now - int64(time.Minute), Op: cql.OpExecute},
		{Start: now + 5, Op: cql.OpBatch}, // a clock that went back: 0
		{Start: now - 7, Op: cql.Opcode(0x42)},
	}
	one, batch := New(), New()
	for _, a := range answers {
		one.Latency(a.Op, time.Duration(now-a.Start))
		one.AddedLatency(time.Duration(now - arrived))
	}
	batch.Answered(answers, arrived, now)
	batch.Answered(nil, arrived, now)
	want, got := gather(t, one), gather(t, batch)
	for _, name := range []string{"tracecar_request_duration_seconds", "tracecar_added_latency_seconds"} {
		if len(want[name]) == 0 {
			t.Fatalf("no %s series", name)
		}
		for op, w := range want[name] {
			if g := got[name][op]; g.GetHistogram().String() != w.GetHistogram().String() {
				t.Errorf("%s{opcode=%q}:\n got  %v\n want %v", name, op, g.GetHistogram(), w.GetHistogram())
			}
		}
	}
}
