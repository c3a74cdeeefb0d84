package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tracecar/tracecar/cql"
)

func TestRequestAndLatency(t *testing.T) {
	m := New()
	m.Request(cql.OpQuery)
	m.Request(cql.OpQuery)
	m.Request(cql.OpExecute)
	m.Request(cql.Opcode(0x42))
	m.Latency(cql.OpQuery, 3*time.Millisecond)
	m.ConnOpened()
	m.ConnOpened()
	m.ConnClosed()

	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"QUERY", value(t, m.ops[cql.OpQuery].requests), 2},
		{"EXECUTE", value(t, m.ops[cql.OpExecute].requests), 1},
		{"other", value(t, m.ops[0x42].requests), 1},
		{"BATCH", value(t, m.ops[cql.OpBatch].requests), 0},
		{"connections", value(t, m.conns), 1},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v; want %v", tt.name, tt.got, tt.want)
		}
	}
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var samples uint64
	for _, mf := range mfs {
		if mf.GetName() != "tracecar_request_duration_seconds" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			samples += mm.GetHistogram().GetSampleCount()
		}
	}
	if samples != 1 {
		t.Errorf("histogram samples = %d; want 1", samples)
	}
}

// value reads a counter or gauge.
func value(tb testing.TB, c prometheus.Metric) float64 {
	tb.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		tb.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
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
