package admin_test

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/metrics"
)

// TestMetrics parses /metrics with the Prometheus text parser and checks the series.
func TestMetrics(t *testing.T) {
	m := metrics.New()
	m.Request(cql.OpExecute)
	m.Request(cql.OpExecute)
	m.Latency(cql.OpExecute, 2*time.Millisecond)
	tr := newFakeTracer()
	f := mustServe(t, admin.Config{Tracer: tr, Metrics: m})
	if status, _ := do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?enable=true&fast=true"}); status != 200 {
		t.Fatal(status)
	}
	status, body := do(t, client, f.url, request{method: "GET", path: "/metrics"})
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	// value returns the value of the series of family name whose labels include want.
	value := func(name string, want map[string]string) (float64, bool) {
		mf, ok := mfs[name]
		if !ok {
			return 0, false
		}
	next:
		for _, mm := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mm.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return mm.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return mm.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(mm.GetHistogram().GetSampleCount()), true
			}
		}
		return 0, false
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tracecar_requests_total", map[string]string{"opcode": "EXECUTE"}, 2},
		{"tracecar_requests_total", map[string]string{"opcode": "QUERY"}, 0},
		{"tracecar_request_duration_seconds", map[string]string{"opcode": "EXECUTE"}, 1},
		{"tracecar_slow_sessions_total", nil, 2},
		{"tracecar_traced_total", nil, 10},
		{"tracecar_sink_dropped_total", map[string]string{"sink": "otel"}, 3},
		{"tracecar_sink_dropped_total", map[string]string{"sink": "log"}, 0},
		{"tracecar_sink_errors_total", map[string]string{"sink": "otel"}, 1},
		{"tracecar_tracing_mode", map[string]string{"mode": "fast"}, 1},
		{"tracecar_tracing_mode", map[string]string{"mode": "off"}, 0},
		{"tracecar_slow_query_threshold_seconds", nil, 0.5},
		{"tracecar_trace_probability", nil, 0},
		{"tracecar_client_connections", nil, 0},
	}
	for _, tt := range tests {
		got, ok := value(tt.name, tt.labels)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (found %v); want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	if _, ok := mfs["go_goroutines"]; !ok {
		t.Error("no Go runtime series")
	}
}

// TestMetricsExemplarsInOpenMetrics checks that a scraper asking for OpenMetrics, as
// Prometheus does, gets the latency histogram with the exemplar of a recorded trace on the
// bucket of its latency, and that the text format everyone else gets is unchanged.
func TestMetricsExemplarsInOpenMetrics(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	m := metrics.New()
	m.Request(cql.OpExecute)
	m.Latency(cql.OpExecute, 3*time.Millisecond)
	m.Exemplar(cql.OpExecute, 3*time.Millisecond, traceID)
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Metrics: m})

	accept := "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
	req := request{method: "GET", path: "/metrics", header: map[string]string{"Accept": accept}}
	status, body := do(t, client, f.url, req)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	want := `tracecar_request_duration_seconds_bucket{opcode="EXECUTE",le="0.005"} 1 # {trace_id="` + traceID + `"} 0.003 `
	if !strings.Contains(body, want) {
		t.Errorf("OpenMetrics /metrics lacks the exemplar line %q:\n%s", want, grepLines(body, "tracecar_request_duration_seconds_bucket{opcode=\"EXECUTE\""))
	}
	if !strings.HasSuffix(body, "# EOF\n") {
		t.Errorf("OpenMetrics /metrics does not end with # EOF")
	}

	for _, a := range []string{"", "*/*", "text/plain"} {
		status, body := do(t, client, f.url, request{method: "GET", path: "/metrics", header: map[string]string{"Accept": a}})
		if status != 200 || strings.Contains(body, "# {") || strings.Contains(body, "# EOF") {
			t.Errorf("Accept %q: status %d, an OpenMetrics body; want the text format", a, status)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
