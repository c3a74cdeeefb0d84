package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
)

// traceContextHeading is the section of docs/tracing.md whose snippets these tests run.
const traceContextHeading = "## Follow a request from the application into the database"

// readmeSnippet returns the first block of language lang under traceContextHeading.
func readmeSnippet(tb testing.TB, lang string) string {
	tb.Helper()
	_, rest, ok := strings.Cut(readDoc(tb, "docs/tracing.md"), "\n"+traceContextHeading+"\n")
	if !ok {
		tb.Fatalf("docs/tracing.md has no heading %q", traceContextHeading)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		tb.Fatalf("no %s block under %q", lang, traceContextHeading)
	}
	return block + "\n"
}

// tcAdmin sends a request to the admin API at base and fails tb unless it gets a 200; it
// decodes a JSON answer into v when v is not nil.
func tcAdmin(tb testing.TB, method, base, path string, v any) {
	tb.Helper()
	status, body := call(tb, method, base+path, "")
	if status != 200 {
		tb.Fatalf("%s %s: %d %s", method, path, status, body)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			tb.Fatalf("%s %s: %v: %s", method, path, err, body)
		}
	}
}

// slowLog returns every session the sidecar's ring holds.
func slowLog(tb testing.TB, base string) []tracing.Session {
	tb.Helper()
	var out []tracing.Session
	tcAdmin(tb, "GET", base, "/tracecar/slow_log?limit=100000", &out)
	return out
}

// schema creates demo.kv, the table of docs/tracing.md's snippets, through s.
func schema(tb testing.TB, s *gocql.Session) {
	tb.Helper()
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS demo WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS demo.kv (k text PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// readGocql reads k's value through session, as a step of the application's trace in ctx:
// the OpenTelemetry propagator writes the W3C context of ctx's span into the request's
// custom payload. docs/tracing.md shows this function as it is.
func readGocql(ctx context.Context, session *gocql.Session, k string) (string, error) {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier) // traceparent, and tracestate if any
	payload := map[string][]byte{}
	for key, v := range carrier {
		payload[key] = []byte(v)
	}
	var v string
	err := session.Query(`SELECT v FROM demo.kv WHERE k = ?`, k).WithContext(ctx).CustomPayload(payload).Scan(&v)
	return v, err
}

// TestREADMEGocqlSnippet checks that docs/tracing.md's Go block is readGocql as this file has it,
// so that the page shows the code the test runs.
func TestREADMEGocqlSnippet(t *testing.T) {
	src, err := os.ReadFile("tracecontext_e2e_test.go")
	if err != nil {
		t.Fatal(err)
	}
	block := readmeSnippet(t, "go")
	if !strings.Contains(string(src), block) {
		t.Errorf("docs/tracing.md's go block under %q is not readGocql as tracecontext_e2e_test.go has it:\n%s", traceContextHeading, block)
	}
}

// recordOnlyExecutesOfKV turns full mode with threshold 0 on, for EXECUTEs of demo.kv alone
// (the drivers' PREPAREs and control queries carry no context and are not recorded).
func recordOnlyExecutesOfKV(tb testing.TB, base string) {
	tb.Helper()
	tcAdmin(tb, "POST", base, "/tracecar/trace_filter?table=kv&opcode=EXECUTE", nil)
	tcAdmin(tb, "POST", base, "/storage_service/slow_query?enable=true&fast=false&threshold=0", nil)
}

// checkAllCarry checks that the ring holds n sessions and that every one carries traceID
// and parentID.
func checkAllCarry(tb testing.TB, base, traceID, parentID string, n int) {
	tb.Helper()
	var sessions []tracing.Session
	deadline := time.Now().Add(10 * time.Second)
	for {
		sessions = slowLog(tb, base)
		if len(sessions) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(sessions) != n {
		tb.Errorf("%d recorded sessions; want %d, one per EXECUTE sent", len(sessions), n)
	}
	for _, s := range sessions {
		if s.TraceID != traceID || s.ParentSpanID != parentID {
			tb.Errorf("session %s (%s %s): trace_id %q parent_span_id %q; want the sent %s and %s",
				s.ID, s.Command, s.Parameters["query"], s.TraceID, s.ParentSpanID, traceID, parentID)
		}
	}
	var byTrace []tracing.Session
	tcAdmin(tb, "GET", base, "/tracecar/slow_log?limit=100000&trace_id="+traceID, &byTrace)
	if len(byTrace) != len(sessions) {
		tb.Errorf("slow_log?trace_id=%s: %d sessions; want all %d", traceID, len(byTrace), len(sessions))
	}
	if len(sessions) > 0 {
		var one tracing.Session
		tcAdmin(tb, "GET", base, "/tracecar/sessions/"+sessions[0].ID, &one)
		if one.TraceID != traceID || one.ParentSpanID != parentID {
			tb.Errorf("/tracecar/sessions/%s: trace_id %q parent_span_id %q; want %s %s", one.ID, one.TraceID, one.ParentSpanID, traceID, parentID)
		}
	}
}

// TestTraceContextGocql sends prepared SELECTs from gocql with the context of a span of the
// OpenTelemetry Go SDK, written into the custom payload by its W3C propagator, and checks
// that every recorded session has that span's trace id and span id.
func TestTraceContextGocql(t *testing.T) {
	st := mustStack(t, stackConfig{})
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	schema(t, s)
	if err := s.Query(`INSERT INTO demo.kv (k, v) VALUES (?, ?)`, "hello", "world").Exec(); err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("shop").Start(context.Background(), "checkout")
	defer span.End()
	if _, err := readGocql(context.Background(), s, "hello"); err != nil { // prepares, untraced
		t.Fatal(err)
	}
	recordOnlyExecutesOfKV(t, st.Admin)
	const n = 30
	for i := range n {
		if v, err := readGocql(ctx, s, "hello"); err != nil || v != "world" {
			t.Fatalf("read %d: %q, %v", i, v, err)
		}
	}
	sc := span.SpanContext()
	checkAllCarry(t, st.Admin, sc.TraceID().String(), sc.SpanID().String(), n)
}

// TestTraceContextPythonDriver runs docs/tracing.md's Python snippet (the Python driver's
// custom_payload= with a traceparent made by hand) and checks that every recorded session
// has the trace id and span id it printed.
func TestTraceContextPythonDriver(t *testing.T) {
	drivertest.RequirePython(t)
	st := mustStack(t, stackConfig{})
	recordOnlyExecutesOfKV(t, st.Admin)
	host, port, _ := net.SplitHostPort(st.Sidecar)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, drivertest.Python, "-")
	cmd.Stdin = strings.NewReader(readmeSnippet(t, "python"))
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docs/tracing.md's Python: %v\n%s", err, out)
	}
	tc, why := tracing.ParseTraceparent([]byte(strings.TrimSpace(lastLine(string(out)))))
	if why != 0 {
		t.Fatalf("docs/tracing.md's Python printed %q: not a traceparent (%s)", out, why)
	}
	checkAllCarry(t, st.Admin, fmt.Sprintf("%x", tc.TraceID), fmt.Sprintf("%x", tc.SpanID), 20)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestParentBasedSamplingEndToEnd is parent-based sampling through the real sidecar and the
// embedded node: slow-query logging off, probability 0, follow_client_sampling=true; 100
// requests whose context has the sampled flag and 100 without it must give exactly 100
// sessions, each in mode parent with the node's own trace events merged in.
func TestParentBasedSamplingEndToEnd(t *testing.T) {
	st := mustStack(t, stackConfig{})
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	schema(t, s)
	if err := s.Query(`INSERT INTO demo.kv (k, v) VALUES (?, ?)`, "hello", "world").Exec(); err != nil {
		t.Fatal(err)
	}
	tcAdmin(t, "POST", st.Admin, "/storage_service/slow_query?enable=false", nil)
	tcAdmin(t, "POST", st.Admin, "/storage_service/trace_probability?probability=0", nil)
	var got struct {
		Follow bool `json:"follow_client_sampling"`
	}
	tcAdmin(t, "POST", st.Admin, "/tracecar/trace_context?follow_client_sampling=true", &got)
	if !got.Follow {
		t.Fatal("follow_client_sampling did not turn on")
	}
	var status struct {
		Mode string `json:"mode"`
	}
	tcAdmin(t, "GET", st.Admin, "/tracecar/status", &status)
	if status.Mode != "parent" {
		t.Errorf("status mode %q; want parent", status.Mode)
	}

	sampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample())).Tracer("shop")
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("shop")
	want := map[string]bool{}
	for i := range 200 {
		tr := sampled
		if i%2 == 1 {
			tr = unsampled
		}
		ctx, span := tr.Start(context.Background(), "checkout")
		if span.SpanContext().IsSampled() {
			want[span.SpanContext().TraceID().String()] = true
		}
		if _, err := readGocql(ctx, s, "hello"); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		span.End()
	}
	if len(want) != 100 {
		t.Fatalf("%d sampled contexts sent; want 100", len(want))
	}
	var sessions []tracing.Session
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if sessions = slowLog(t, st.Admin); len(sessions) >= 100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // anything more would be a session too many
	if sessions = slowLog(t, st.Admin); len(sessions) != 100 {
		t.Fatalf("%d sessions; want exactly 100, one per request with the sampled flag", len(sessions))
	}
	for _, sess := range sessions {
		if sess.Mode != tracing.ModeParent || !want[sess.TraceID] {
			t.Errorf("session %s: mode %q trace_id %q; want parent and a sampled request's trace", sess.ID, sess.Mode, sess.TraceID)
		}
		delete(want, sess.TraceID)
		node := 0
		for _, e := range sess.Events {
			if e.Source == tracing.SourceNode {
				node++
			}
		}
		if node == 0 {
			t.Errorf("session %s has no node events: %+v", sess.ID, sess.Events)
		}
	}
}

// malformedTraceparents are the W3C specification's invalid cases, and the inputs the fuzzer
// found for FuzzTraceparent (tracing/testdata/fuzz), all of which it rejects.
func malformedTraceparents(tb testing.TB) []string {
	tb.Helper()
	const id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	out := []string{
		"00-" + id + "-" + parent + "-0",                        // too short
		"00-" + id + "-" + parent + "-01-more",                  // version 00 with more
		"ff-" + id + "-" + parent + "-01",                       // version ff
		"00-" + strings.ToUpper(id) + "-" + parent + "-01",      // upper-case hex
		"00-4bf92f3577b34da6a3ce929d0e0e473z-" + parent + "-01", // not hex
		"00-00000000000000000000000000000000-" + parent + "-01", // zero trace id
		"00-" + id + "-0000000000000000-01",                     // zero parent id
		"00_" + id + "_" + parent + "_01",                       // no dashes
		"",
	}
	files, err := filepath.Glob("../../tracing/testdata/fuzz/FuzzTraceparent/*")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no fuzz corpus for FuzzTraceparent: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		lit, ok := strings.CutPrefix(lines[len(lines)-1], "string(")
		if !ok {
			continue
		}
		v, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out = append(out, v)
	}
	// And random mutations of a valid one: a byte changed, dropped or added.
	rnd := rand.New(rand.NewPCG(21, 21))
	valid := []byte("00-" + id + "-" + parent + "-01")
	for len(out) < 150 {
		v := append([]byte(nil), valid...)
		i := rnd.IntN(len(v))
		switch rnd.IntN(3) {
		case 0:
			v[i] = byte(rnd.IntN(256))
		case 1:
			v = append(v[:i], v[i+1:]...)
		default:
			v = append(v[:i], append([]byte{byte(rnd.IntN(256))}, v[i:]...)...)
		}
		out = append(out, string(v))
	}
	var bad []string
	for _, v := range out {
		if _, why := tracing.ParseTraceparent([]byte(v)); why != 0 {
			bad = append(bad, v)
		}
	}
	return bad
}

// TestMalformedTraceContextsEndToEnd sends gocql requests whose traceparent is malformed,
// in full mode with threshold 0: every request succeeds, no session has a trace id, and
// tracecar_trace_context_invalid_total counts each one.
func TestMalformedTraceContextsEndToEnd(t *testing.T) {
	st := mustStack(t, stackConfig{})
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	schema(t, s)
	if err := s.Query(`INSERT INTO demo.kv (k, v) VALUES (?, ?)`, "hello", "world").Exec(); err != nil {
		t.Fatal(err)
	}
	recordOnlyExecutesOfKV(t, st.Admin)
	bad := malformedTraceparents(t)
	for _, v := range bad {
		var got string
		err := s.Query(`SELECT v FROM demo.kv WHERE k = ?`, "hello").
			CustomPayload(map[string][]byte{"traceparent": []byte(v), "tracestate": []byte("rojo=1")}).Scan(&got)
		if err != nil || got != "world" {
			t.Fatalf("request with traceparent %q: %q, %v; want it served", v, got, err)
		}
	}
	var sessions []tracing.Session
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if sessions = slowLog(t, st.Admin); len(sessions) >= len(bad) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(sessions) != len(bad) {
		t.Errorf("%d sessions; want %d, one per request", len(sessions), len(bad))
	}
	for _, sess := range sessions {
		if sess.TraceID != "" || sess.ParentSpanID != "" || sess.TraceState != "" {
			t.Errorf("session %s carries trace_id %q parent_span_id %q trace_state %q from a malformed context", sess.ID, sess.TraceID, sess.ParentSpanID, sess.TraceState)
		}
	}
	var total float64
	for _, l := range strings.Split(getMetrics(t, st.Admin), "\n") {
		if strings.HasPrefix(l, "tracecar_trace_context_invalid_total{") {
			f := strings.Fields(l)
			n, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += n
		}
	}
	if int(total) != len(bad) {
		t.Errorf("tracecar_trace_context_invalid_total sums to %v; want %d, one per malformed context", total, len(bad))
	}
}

// otelNodePackages are the npm packages of docs/tracing.md's Node.js snippet, pinned to versions
// that install on Node.js 20; .ci/run installs them into NODE_PATH.
var otelNodePackages = []string{
	"@opentelemetry/api", "@opentelemetry/sdk-trace-base", "@opentelemetry/exporter-trace-otlp-http",
	"@opentelemetry/core", "@opentelemetry/resources",
}

// requireNodeOTel skips tb, or fails it when TRACECAR_REQUIRE_DRIVERS is set, unless node,
// the cassandra-driver and the OpenTelemetry JS SDK are installed.
func requireNodeOTel(tb testing.TB) {
	tb.Helper()
	drivertest.RequireNodeJS(tb)
	drivertest.RequireNodeModules(tb, otelNodePackages...)
}

// jaegerSpan is a span of Jaeger's /api/traces/{id}.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// jaegerTraceByID returns trace id's spans and their services, polling Jaeger until it has
// at least n spans or 60 s have passed.
func (j *jaeger) traceByID(tb testing.TB, id string, n int) ([]jaegerSpan, map[string]string) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, body := call(tb, "GET", j.Query+"/api/traces/"+id, "")
		var out struct {
			Data []struct {
				Spans     []jaegerSpan `json:"spans"`
				Processes map[string]struct {
					ServiceName string `json:"serviceName"`
				} `json:"processes"`
			} `json:"data"`
		}
		if status == 200 && json.Unmarshal([]byte(body), &out) == nil && len(out.Data) == 1 &&
			(len(out.Data[0].Spans) >= n || time.Now().After(deadline)) {
			svc := map[string]string{}
			for pid, p := range out.Data[0].Processes {
				svc[pid] = p.ServiceName
			}
			return out.Data[0].Spans, svc
		}
		if time.Now().After(deadline) {
			tb.Fatalf("Jaeger /api/traces/%s: %d %s", id, status, body)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestJaegerNodeJSOTelSDK is the acceptance test of trace context end to end: docs/tracing.md's
// Node.js program, with the real OpenTelemetry JS SDK from npm exporting OTLP to a real
// Jaeger, starts a span, puts its traceparent in the Node.js driver's customPayload and runs
// prepared statements through the sidecar (full mode, threshold 0), which exports to the
// same Jaeger. Jaeger's query API must return one trace holding the program's span and
// tracecar's spans as its children.
func TestJaegerNodeJSOTelSDK(t *testing.T) {
	requireNodeOTel(t)
	j := mustJaeger(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPHTTP)
	t.Setenv("OTEL_SERVICE_NAME", "tracecar")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	st := mustStack(t, stackConfig{})
	tcAdmin(t, "POST", st.Admin, "/storage_service/slow_query?enable=true&fast=false&threshold=0", nil)

	dir := t.TempDir()
	prog := filepath.Join(dir, "checkout.js")
	if err := os.WriteFile(prog, []byte(readmeSnippet(t, "js")), 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(st.Sidecar)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", prog)
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/tracing.md's Node.js program: %v\n%s", err, out)
	}
	var traceID, spanID string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && len(f[0]) == 32 && len(f[1]) == 16 {
			traceID, spanID = f[0], f[1]
		}
	}
	if traceID == "" {
		t.Fatalf("the program printed no trace id and span id:\n%s", out)
	}

	const statements = 10 // the program's prepared INSERTs and SELECTs, each with the context
	spans, services := j.traceByID(t, traceID, statements+1)
	var app, children int
	for _, sp := range spans {
		svc := services[sp.ProcessID]
		switch {
		case svc == "checkout" && sp.SpanID == spanID:
			app++
			if len(sp.References) != 0 {
				t.Errorf("the program's span has references %+v; want a root", sp.References)
			}
		case svc == "tracecar":
			if len(sp.References) != 1 || sp.References[0].RefType != "CHILD_OF" || sp.References[0].SpanID != spanID ||
				sp.References[0].TraceID != traceID {
				t.Errorf("tracecar span %s (%s) references %+v; want CHILD_OF the program's span %s", sp.SpanID, sp.OperationName, sp.References, spanID)
				continue
			}
			children++
		default:
			t.Errorf("unexpected span %s of service %q in the trace", sp.OperationName, svc)
		}
	}
	if app != 1 || children != statements {
		t.Errorf("trace %s: %d program spans and %d tracecar children; want 1 and %d (%d spans in all)", traceID, app, children, statements, len(spans))
	}
}

// requirePrometheus returns Debian's prometheus, or skips tb (fails it with
// TRACECAR_REQUIRE_DRIVERS).
func requirePrometheus(tb testing.TB) string {
	tb.Helper()
	return drivertest.RequireTool(tb, "prometheus", "prometheus")
}

// mustPrometheus runs a Prometheus with exemplar storage on loopback, scraping the admin
// API at target every second, until the test ends, and returns its base URL.
func mustPrometheus(tb testing.TB, target string) string {
	tb.Helper()
	bin := requirePrometheus(tb)
	dir := tb.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: tracecar\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	addr := freeAddrs(tb, 1)[0]
	out := &lockedBuffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--enable-feature=exemplar-storage")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			tb.Fatalf("prometheus exited:\n%s", out.String())
		case <-time.After(200 * time.Millisecond):
		}
		// Not listening yet is what this loop waits out: a refused connection is retried.
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
	}
	tb.Fatalf("prometheus did not become ready:\n%s", out.String())
	return ""
}

// TestPrometheusExemplarsLinkToJaeger is the acceptance test of exemplars: a real Prometheus
// (--enable-feature=exemplar-storage) scrapes the sidecar while gocql sends requests with
// sampled trace contexts in full mode; /api/v1/query_exemplars must return a trace id of
// tracecar_request_duration_seconds that Jaeger, which received the sidecar's spans, knows.
func TestPrometheusExemplarsLinkToJaeger(t *testing.T) {
	requirePrometheus(t)
	j := mustJaeger(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPHTTP)
	t.Setenv("OTEL_SERVICE_NAME", "tracecar")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	st := mustStack(t, stackConfig{})
	prom := mustPrometheus(t, strings.TrimPrefix(st.Admin, "http://"))
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	schema(t, s)
	if err := s.Query(`INSERT INTO demo.kv (k, v) VALUES (?, ?)`, "hello", "world").Exec(); err != nil {
		t.Fatal(err)
	}
	tcAdmin(t, "POST", st.Admin, "/storage_service/slow_query?enable=true&fast=false&threshold=0", nil)
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	sent := map[string]bool{}
	start := time.Now()
	var ids []string
	deadline := time.Now().Add(90 * time.Second)
	for len(ids) == 0 && time.Now().Before(deadline) {
		for range 20 {
			ctx, span := tp.Tracer("shop").Start(context.Background(), "checkout")
			sent[span.SpanContext().TraceID().String()] = true
			if _, err := readGocql(ctx, s, "hello"); err != nil {
				t.Fatal(err)
			}
			span.End()
		}
		time.Sleep(time.Second)
		q := url.Values{"query": {"tracecar_request_duration_seconds_bucket"},
			"start": {strconv.FormatInt(start.Add(-time.Minute).Unix(), 10)}, "end": {strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)}}
		status, body := call(t, "GET", prom+"/api/v1/query_exemplars?"+q.Encode(), "")
		if status != 200 {
			t.Fatalf("query_exemplars: %d %s", status, body)
		}
		var res struct {
			Data []struct {
				SeriesLabels map[string]string `json:"seriesLabels"`
				Exemplars    []struct {
					Labels map[string]string `json:"labels"`
				} `json:"exemplars"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatalf("query_exemplars: %v: %s", err, body)
		}
		for _, series := range res.Data {
			for _, e := range series.Exemplars {
				if id := e.Labels["trace_id"]; id != "" {
					ids = append(ids, id)
				}
			}
		}
	}
	if len(ids) == 0 {
		t.Fatal("Prometheus has no exemplar of tracecar_request_duration_seconds after 90 s of scrapes")
	}
	id := ids[len(ids)-1]
	if !sent[id] {
		t.Errorf("exemplar trace id %s is none of the %d contexts sent", id, len(sent))
	}
	spans, services := j.traceByID(t, id, 1)
	found := false
	for _, sp := range spans {
		if services[sp.ProcessID] == "tracecar" && sp.TraceID == id {
			found = true
		}
	}
	if !found {
		t.Errorf("Jaeger's trace %s has no tracecar span: %+v", id, spans)
	}
}

func TestTraceContextKeysFlag(t *testing.T) {
	tests := []struct {
		value   string
		want    string
		wantErr bool
	}{
		{value: "traceparent", want: "traceparent"},
		{value: "x-traceparent, traceparent", want: "x-traceparent,traceparent"},
		{value: "", wantErr: true},
		{value: "a,,b", wantErr: true},
		{value: "a,a", wantErr: true},
	}
	for _, tt := range tests {
		got, err := traceContextKeys(tt.value)
		if (err != nil) != tt.wantErr || strings.Join(got, ",") != tt.want {
			t.Errorf("traceContextKeys(%q) = %q, %v; want %q, error %v", tt.value, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestFollowClientSamplingFlag starts a stack as --follow-client-sampling and
// --trace-context-key do, and reads the settings back from the admin API.
func TestFollowClientSamplingFlag(t *testing.T) {
	st := mustStack(t, stackConfig{FollowClientSampling: true, TraceContextKeys: []string{"x-trace", "traceparent"}})
	var got struct {
		Follow bool     `json:"follow_client_sampling"`
		Keys   []string `json:"keys"`
	}
	tcAdmin(t, "GET", st.Admin, "/tracecar/trace_context", &got)
	if !got.Follow || strings.Join(got.Keys, ",") != "x-trace,traceparent" {
		t.Errorf("trace_context %+v; want following, keys x-trace,traceparent", got)
	}
}
