package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
)

// pythonLoad is the Python driver's side of the Jaeger test: a keyspace, a table, one
// INSERT with a literal (which must not reach the span), then N prepared SELECTs in the
// session's keyspace, so that the spans learn the keyspace from the prepared metadata.
const pythonLoad = `
import os
from cassandra.cluster import Cluster
c = Cluster([os.environ['CQL_HOST']], port=int(os.environ['CQL_PORT']), protocol_version=4)
s = c.connect()
s.execute("CREATE KEYSPACE IF NOT EXISTS shop WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE IF NOT EXISTS shop.items (k int PRIMARY KEY, v text)")
s.set_keyspace('shop')
s.execute("INSERT INTO items (k, v) VALUES (424242, 'literal-secret')")
sel = s.prepare("SELECT v FROM items WHERE k = ?")
for i in range(int(os.environ['SELECTS'])):
    list(s.execute(sel, (i,)))
c.shutdown()
`

func runPythonLoad(tb testing.TB, sidecar string, selects int) {
	tb.Helper()
	drivertest.RequirePythonModules(tb, "python3-cassandra", "cassandra")
	host, port, _ := net.SplitHostPort(sidecar)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, drivertest.Python, "-c", pythonLoad)
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port, "SELECTS="+strconv.Itoa(selects))
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("python load: %v\n%s", err, out)
	}
}

// TestJaegerPythonPrepared is the acceptance test of OTLP export: a real Jaeger on loopback,
// OTEL_EXPORTER_OTLP_ENDPOINT as its base URL, threshold 0, and 50 prepared SELECTs from the
// Python driver through the sidecar. Jaeger's query API must return 50 traces or more with
// the database conventions' attributes, the node as server.address, no literal values in
// db.query.text, and the sidecar's events. Then, in sampled mode, the node's own events
// must be there too, with source=node.
func TestJaegerPythonPrepared(t *testing.T) {
	j := mustJaeger(t)
	const service = "tracecar-e2e"
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPHTTP)
	t.Setenv("OTEL_SERVICE_NAME", service)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	st := mustStack(t, stackConfig{})
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	runPythonLoad(t, st.Sidecar, 50)
	nodeHost, nodePort, _ := net.SplitHostPort(st.Node)

	sel := url.Values{"operation": {"SELECT shop.items"}, "tags": {`{"tracecar.mode":"full"}`}}
	traces := j.waitTraces(t, service, sel, 50)
	if len(traces) < 50 {
		t.Fatalf("Jaeger has %d traces of SELECT shop.items for %s; want at least 50", len(traces), service)
	}
	for _, tr := range traces {
		if len(tr.Spans) != 1 {
			t.Fatalf("trace %s has %d spans; want 1", tr.TraceID, len(tr.Spans))
		}
		if svc := tr.Processes[tr.Spans[0].ProcessID].ServiceName; svc != service {
			t.Errorf("service %q; want %q from OTEL_SERVICE_NAME", svc, service)
		}
		tags := tr.tags(0)
		want := map[string]string{
			"db.system.name": "cassandra", "db.namespace": "shop", "db.collection.name": "items",
			"db.operation.name": "SELECT", "db.query.text": "SELECT v FROM items WHERE k = ?",
			"db.query.summary": "SELECT items", "server.address": nodeHost, "server.port": nodePort,
			"network.peer.address": "127.0.0.1", "span.kind": "client", "tracecar.command": "EXECUTE",
			"cassandra.consistency.level": "local_one",
		}
		for k, v := range want {
			if tags[k] != v {
				t.Fatalf("trace %s: tag %s = %q; want %q (all tags %v)", tr.TraceID, k, tags[k], v, tags)
			}
		}
		sp := tr.Spans[0]
		events := map[string]bool{}
		for _, l := range sp.Logs {
			var name, source string
			for _, f := range l.Fields {
				switch f.Key {
				case "event":
					name, _ = f.Value.(string)
				case "source":
					source, _ = f.Value.(string)
				}
			}
			events[name+"/"+source] = true
			if l.Timestamp < sp.StartTime || l.Timestamp > sp.StartTime+sp.Duration {
				t.Errorf("trace %s: event %q at %d µs, outside its span [%d, %d]", tr.TraceID, name, l.Timestamp, sp.StartTime, sp.StartTime+sp.Duration)
			}
		}
		for _, e := range []string{tracing.EventReceived, tracing.EventSentToNode, tracing.EventNodeResponded} {
			if !events[e+"/sidecar"] {
				t.Fatalf("trace %s lacks the event %q with source=sidecar: %v", tr.TraceID, e, events)
			}
		}
	}
	// An unprepared statement names no keyspace of its own: the span has the table only.
	inserts := j.waitTraces(t, service, url.Values{"operation": {"INSERT items"}}, 1)
	if len(inserts) == 0 {
		t.Fatal("no INSERT items trace")
	}
	if q := inserts[0].tags(0)["db.query.text"]; q != "INSERT INTO items (k, v) VALUES (?, ?)" {
		t.Errorf("INSERT db.query.text = %q; want its literals redacted", q)
	}

	// Sampled mode: the node traces the request, and its events join the span.
	if err := st.tracer.SetConfig(tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	runPythonLoad(t, st.Sidecar, 5)
	sampled := url.Values{"operation": {"SELECT shop.items"}, "tags": {`{"tracecar.mode":"sampled"}`}}
	traces = j.waitTraces(t, service, sampled, 5)
	if len(traces) < 5 {
		t.Fatalf("Jaeger has %d sampled SELECT traces; want at least 5", len(traces))
	}
	withNode := 0
	for _, tr := range traces {
		// The Python driver compresses (lz4); a sampled response is decompressed to strip
		// the tracing id, so its row count is known. k = 0..4 match no row.
		if n := tr.tags(0)["db.response.returned_rows"]; n != "0" {
			t.Errorf("sampled trace %s: db.response.returned_rows = %q; want 0", tr.TraceID, n)
		}
		for _, l := range tr.Spans[0].Logs {
			for _, f := range l.Fields {
				if f.Key == "source" && f.Value == "node" {
					withNode++
					goto next
				}
			}
		}
	next:
	}
	if withNode != len(traces) {
		t.Errorf("%d of %d sampled traces carry node events (source=node); want all", withNode, len(traces))
	}
}

// TestOTLPGRPCCollector proves the gRPC protocol against the OpenTelemetry Collector's own
// OTLP receiver: spans sent with --otlp-protocol grpc arrive, with their attributes.
func TestOTLPGRPCCollector(t *testing.T) {
	r := mustOtelrecv(t)
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	st := mustStack(t, stackConfig{OTLPEndpoint: "http://" + r.Addr, OTLPProtocol: tracing.ProtocolGRPC})
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	const n = 10
	for i := 0; i < n; i++ {
		var rv string
		if err := s.Query("SELECT release_version FROM system.local WHERE key = 'local'").Scan(&rv); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	timeout := time.After(60 * time.Second)
	for got < n {
		select {
		case sp, ok := <-r.spans:
			if !ok {
				t.Fatalf("otelrecv exited after %d spans", got)
			}
			attrs, _ := sp["attributes"].(map[string]any)
			if q, _ := attrs["db.query.text"].(string); !strings.HasPrefix(q, "SELECT release_version") || attrs["tracecar.command"] == "PREPARE" {
				continue // the driver's own queries, and its PREPARE of ours
			}
			if sp["service"] != "tracecar" || sp["kind"] != "Client" || sp["name"] != "SELECT system.local" || attrs["db.system.name"] != "cassandra" ||
				attrs["db.query.text"] != "SELECT release_version FROM system.local WHERE key = ?" {
				t.Fatalf("span %v; want service tracecar, kind Client, name SELECT system.local, db.system.name cassandra, literal redacted", sp)
			}
			got++
		case <-timeout:
			t.Fatalf("the collector's receiver got %d SELECT spans over gRPC; want %d", got, n)
		}
	}
}

// TestOTLPReceiver404 checks that a receiver answering 404 shows in
// tracecar_otlp_export_failures_total, while clients see nothing wrong.
func TestOTLPReceiver404(t *testing.T) {
	srv := newStatusServer(t, 404)
	st := mustStack(t, stackConfig{OTLPEndpoint: srv})
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	for i := 0; i < 20; i++ {
		var rv string
		if err := s.Query("SELECT release_version FROM system.local WHERE key = 'local'").Scan(&rv); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		body := getMetrics(t, st.Admin)
		if strings.Contains(body, "tracecar_otlp_export_failures_total ") && !strings.Contains(body, "tracecar_otlp_export_failures_total 0") &&
			!strings.Contains(body, "tracecar_otlp_spans_dropped_total 0") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no export failure counted after 60 s:\n%s", grepLines(body, "tracecar_otlp"))
		}
		time.Sleep(250 * time.Millisecond)
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

// newStatusServer is an HTTP server on loopback answering every request with status; it
// returns its base URL.
func newStatusServer(tb testing.TB, status int) string {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(w, "not here", status)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// getMetrics returns the admin API's /metrics.
func getMetrics(tb testing.TB, admin string) string {
	tb.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// BenchmarkOTLPReceiver404 measures gocql queries through the sidecar in full mode with
// threshold 0 (every request becomes a span) with no exporter, and with an exporter whose
// receiver answers 404: the failing export must not slow the data path.
//
//	go test ./cmd/tracecar -run '^$' -bench OTLPReceiver404 -benchtime 5000x -count 5
func BenchmarkOTLPReceiver404(b *testing.B) {
	for _, bc := range []struct {
		name     string
		endpoint func(testing.TB) string
	}{
		{"no-exporter", func(testing.TB) string { return "" }},
		{"receiver-404", func(tb testing.TB) string { return newStatusServer(tb, 404) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
			b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			st := mustStack(b, stackConfig{OTLPEndpoint: bc.endpoint(b), RingSize: 1000})
			if err := st.tracer.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
				b.Fatal(err)
			}
			s := mustSession(b, st.Sidecar)
			defer s.Close()
			q := s.Query("SELECT release_version FROM system.local WHERE key = 'local'")
			var rv string
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := q.Scan(&rv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
