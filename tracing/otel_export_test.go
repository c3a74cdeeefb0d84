package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP receiver on loopback that keeps what it is sent and answers
// status.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	paths  []string
	header http.Header
	reqs   []*coltrace.ExportTraceServiceRequest
}

func newReceiver(tb testing.TB, status int) *receiver {
	tb.Helper()
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m coltrace.ExportTraceServiceRequest
		err := proto.Unmarshal(body, &m)
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.header = req.Header.Clone()
		if err == nil {
			r.reqs = append(r.reqs, &m)
		}
		r.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "no such path", status)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) snapshot() ([]string, http.Header, []*coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...), r.header, append([]*coltrace.ExportTraceServiceRequest(nil), r.reqs...)
}

// clearOTelEnv unsets the OTEL_* variables the sink reads, so the machine's do not leak in.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SEMCONV_STABILITY_OPT_IN"} {
		t.Setenv(k, "")
	}
}

func writeOne(t *testing.T, o OTelOptions) *OTelSink {
	t.Helper()
	sink, err := NewOTelSink(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{ID: "x", StartedAt: time.Now(), DurationUS: 100, Command: "QUERY", Mode: ModeFull,
		Coordinator: "127.0.0.9:9042", Client: "127.0.0.1:5555",
		Parameters: map[string]string{"query": "SELECT v FROM ks.t WHERE k = 'secret'", "consistency_level": "ONE"}}
	if err := sink.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sink.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return sink
}

// TestOTLPEndpoint checks that spans reach /v1/traces from a base URL, as the OTLP
// specification defines, from the option and from each environment variable, with the
// SDK's precedence, and that the resource and headers come from the environment.
func TestOTLPEndpoint(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string            // OTelOptions.Endpoint, with BASE replaced
		env      map[string]string // with BASE replaced
		service  string
		wantPath string
	}{
		{name: "option base URL", endpoint: "BASE", wantPath: "/v1/traces", service: "tracecar"},
		{name: "option base URL with slash", endpoint: "BASE/", wantPath: "/v1/traces", service: "tracecar"},
		{name: "option full URL", endpoint: "BASE/custom/v1/traces", wantPath: "/custom/v1/traces", service: "tracecar"},
		{name: "option over env", endpoint: "BASE/a", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
			wantPath: "/a/v1/traces", service: "tracecar"},
		{name: "env base URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "BASE", "OTEL_SERVICE_NAME": "shop"},
			wantPath: "/v1/traces", service: "shop"},
		{name: "env traces URL over base", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "BASE/x/v1/traces",
			"OTEL_RESOURCE_ATTRIBUTES": "service.name=fromattrs,deployment.environment=test"},
			wantPath: "/x/v1/traces", service: "fromattrs"},
		{name: "service name over resource attributes", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "BASE",
			"OTEL_RESOURCE_ATTRIBUTES": "service.name=fromattrs", "OTEL_SERVICE_NAME": "fromname",
			"OTEL_EXPORTER_OTLP_HEADERS": "x-token=s3cret"},
			wantPath: "/v1/traces", service: "fromname"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearOTelEnv(t)
			r := newReceiver(t, http.StatusOK)
			for k, v := range tt.env {
				t.Setenv(k, strings.ReplaceAll(v, "BASE", r.srv.URL))
			}
			sink := writeOne(t, OTelOptions{Endpoint: strings.ReplaceAll(tt.endpoint, "BASE", r.srv.URL)})
			paths, header, reqs := r.snapshot()
			if len(paths) != 1 || paths[0] != tt.wantPath {
				t.Fatalf("receiver saw POSTs to %q; want one to %s", paths, tt.wantPath)
			}
			if len(reqs) != 1 || len(reqs[0].ResourceSpans) != 1 {
				t.Fatalf("receiver decoded %d requests; want 1 with one resource", len(reqs))
			}
			attrs := map[string]string{}
			for _, kv := range reqs[0].ResourceSpans[0].Resource.Attributes {
				attrs[kv.Key] = kv.Value.GetStringValue()
			}
			if attrs["service.name"] != tt.service {
				t.Errorf("service.name = %q; want %q", attrs["service.name"], tt.service)
			}
			if strings.Contains(tt.env["OTEL_RESOURCE_ATTRIBUTES"], "deployment") && attrs["deployment.environment"] != "test" {
				t.Errorf("resource %v lacks deployment.environment=test from OTEL_RESOURCE_ATTRIBUTES", attrs)
			}
			if tt.env["OTEL_EXPORTER_OTLP_HEADERS"] != "" && header.Get("X-Token") != "s3cret" {
				t.Errorf("header X-Token = %q; want it from OTEL_EXPORTER_OTLP_HEADERS", header.Get("X-Token"))
			}
			if st := sink.ExportStats(); st.Failures != 0 {
				t.Errorf("ExportStats = %+v; want no failures", st)
			}
		})
	}
}

// TestOTLPExportFailure checks that a receiver answering 404 counts a failure and the
// spans it lost, and that the failure is logged with the status, once.
func TestOTLPExportFailure(t *testing.T) {
	clearOTelEnv(t)
	r := newReceiver(t, http.StatusNotFound)
	var logBuf syncBuffer
	sink, err := NewOTelSink(context.Background(), OTelOptions{Endpoint: r.srv.URL, Logger: zerolog.New(&logBuf)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		s := &Session{ID: "x", StartedAt: time.Now(), DurationUS: 100, Command: "QUERY", Parameters: map[string]string{"query": "SELECT 1"}}
		for j := 0; j < 3; j++ {
			if err := sink.Write(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := sink.ForceFlush(ctx); err != nil {
			t.Fatalf("ForceFlush: %v", err)
		}
		cancel()
	}
	st := sink.ExportStats()
	if st.Failures != 2 || st.SpansDropped != 6 {
		t.Errorf("ExportStats = %+v; want 2 failures and 6 spans dropped", st)
	}
	logs := string(logBuf.Bytes())
	if n := strings.Count(logs, "OTLP export failed"); n != 1 {
		t.Errorf("%d failure log lines; want 1 (at most one a minute):\n%s", n, logs)
	}
	if !strings.Contains(logs, "404") {
		t.Errorf("failure log lacks the receiver's status 404:\n%s", logs)
	}
	if err := sink.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestResolveProtocol(t *testing.T) {
	tests := []struct {
		name, opt, env, tracesEnv, want string
		wantErr                         bool
	}{
		{name: "default", want: ProtocolHTTP},
		{name: "env grpc", env: "grpc", want: ProtocolGRPC},
		{name: "traces env over env", env: "grpc", tracesEnv: "http/protobuf", want: ProtocolHTTP},
		{name: "option over env", opt: "grpc", env: "http/protobuf", want: ProtocolGRPC},
		{name: "json unsupported", env: "http/json", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tt.env)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", tt.tracesEnv)
			got, err := ResolveProtocol(tt.opt)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ResolveProtocol(%q) = %q, %v; want %q, error %v", tt.opt, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestSemconvDup checks OTEL_SEMCONV_STABILITY_OPT_IN=database/dup.
func TestSemconvDup(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http,database/dup")
	r := newReceiver(t, http.StatusOK)
	writeOne(t, OTelOptions{Endpoint: r.srv.URL})
	_, _, reqs := r.snapshot()
	if len(reqs) != 1 {
		t.Fatalf("%d requests; want 1", len(reqs))
	}
	sp := reqs[0].ResourceSpans[0].ScopeSpans[0].Spans[0]
	attrs := map[string]string{}
	for _, kv := range sp.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	want := map[string]string{
		"db.system.name": "cassandra", "db.system": "cassandra",
		"db.namespace": "ks", "db.name": "ks", "db.collection.name": "t", "db.cassandra.table": "t",
		"db.query.text": "SELECT v FROM ks.t WHERE k = ?", "db.statement": "SELECT v FROM ks.t WHERE k = ?",
		"cassandra.consistency.level": "one", "db.cassandra.consistency_level": "one", "server.address": "127.0.0.9",
	}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q; want %q", k, attrs[k], v)
		}
	}
	if sp.Name != "SELECT ks.t" {
		t.Errorf("span name %q; want \"SELECT ks.t\"", sp.Name)
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct{ q, op, ks, table string }{
		{"SELECT * FROM ks.t WHERE k = ?", "SELECT", "ks", "t"},
		{"select v from t", "SELECT", "", "t"},
		{`SELECT v FROM "Ks"."My""T"`, "SELECT", "Ks", `My"T`},
		{"SELECT v FROM Ks.MyT", "SELECT", "ks", "myt"}, // unquoted names fold to lower case, as statements.Target has them
		{"SELECT a, b, c, d, e, f, g FROM ks.t", "SELECT", "ks", "t"},
		{"select v from \"from\".t", "SELECT", "from", "t"},
		{"INSERT INTO ks.t (k, v) VALUES (?, ?)", "INSERT", "ks", "t"},
		{"UPDATE t SET v = 1 WHERE k = 2", "UPDATE", "", "t"},
		{"DELETE FROM ks.t WHERE k = 1", "DELETE", "ks", "t"},
		{"TRUNCATE TABLE ks.t", "TRUNCATE", "ks", "t"},
		{"USE ks", "USE", "ks", ""},
		{`USE "MyKs"`, "USE", "MyKs", ""},
		{"CREATE KEYSPACE x WITH replication = {}", "CREATE", "", ""},
		{"", "", "", ""},
	}
	for _, tt := range tests {
		op, ks, table := parseTarget(tt.q)
		if op != tt.op || ks != tt.ks || table != tt.table {
			t.Errorf("parseTarget(%q) = %q, %q, %q; want %q, %q, %q", tt.q, op, ks, table, tt.op, tt.ks, tt.table)
		}
	}
}

func TestRedactLiterals(t *testing.T) {
	tests := []struct{ q, want string }{
		{"SELECT * FROM t WHERE k = ?", "SELECT * FROM t WHERE k = ?"},
		{"INSERT INTO t1 (k, v) VALUES (12, 'it''s secret')", "INSERT INTO t1 (k, v) VALUES (?, ?)"},
		{"UPDATE t SET b = 0xcafe, f = 1.5e-3 WHERE id = 123e4567-e89b-12d3-a456-426614174000", "UPDATE t SET b = ?, f = ? WHERE id = ?"},
		{"UPDATE t SET s = $$two words$$ WHERE k = a3bb189e-8bf9-3888-9912-ace4e6543002", "UPDATE t SET s = ? WHERE k = ?"},
		{`SELECT "Quoted" FROM "T"`, `SELECT "Quoted" FROM "T"`},
	}
	for _, tt := range tests {
		if got := redactLiterals(tt.q); got != tt.want {
			t.Errorf("redactLiterals(%q) = %q; want %q", tt.q, got, tt.want)
		}
	}
}
