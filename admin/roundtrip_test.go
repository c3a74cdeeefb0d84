package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/guardrail"
	"github.com/tracecar/tracecar/tracing/statements"
)

// roundTrip decodes body as a T, refusing a field T does not have, and checks that T
// writes body back byte for byte.
func roundTrip[T any](body []byte) error {
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	again, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, body) {
		return &roundTripError{body, again}
	}
	return nil
}

type roundTripError struct{ sent, again []byte }

func (e *roundTripError) Error() string {
	return "the shape writes back\n" + string(e.again) + "\nthe server sent\n" + string(e.sent)
}

// shapeOf is, for the path of every GET route, the request to send and the check of its
// answer against its shape in adminapi.
var shapeOf = map[string]struct {
	path  string
	check func([]byte) error
}{
	"/system/logger":                     {"/system/logger", roundTrip[adminapi.Loggers]},
	"/system/logger/":                    {"/system/logger/admin", roundTrip[adminapi.Level]},
	"/storage_service/logging_level":     {"/storage_service/logging_level", roundTrip[adminapi.LoggerLevels]},
	"/storage_service/slow_query":        {"/storage_service/slow_query", roundTrip[adminapi.SlowQuery]},
	"/storage_service/trace_probability": {"/storage_service/trace_probability", roundTrip[adminapi.Probability]},
	"/tracecar/status":                   {"/tracecar/status", roundTrip[adminapi.Status]},
	"/healthz":                           {"/healthz", roundTrip[adminapi.Health]},
	"/readyz":                            {"/readyz", roundTrip[adminapi.Health]},
	"/tracecar/slow_log":                 {"/tracecar/slow_log", roundTrip[adminapi.Sessions]},
	"/tracecar/sessions/":                {"/tracecar/sessions/a0000000-0000-1000-8000-000000000001", roundTrip[adminapi.Session]},
	"/tracecar/trace_context":            {"/tracecar/trace_context", roundTrip[adminapi.TraceContext]},
	"/tracecar/trace_filter":             {"/tracecar/trace_filter", roundTrip[adminapi.TraceFilter]},
	"/tracecar/trace_floor":              {"/tracecar/trace_floor", roundTrip[adminapi.TraceFloor]},
	"/tracecar/guardrail":                {"/tracecar/guardrail", roundTrip[adminapi.Guardrail]},
	"/tracecar/statement_stats":          {"/tracecar/statement_stats", roundTrip[adminapi.StatementStats]},
	"/tracecar/statements":               {"/tracecar/statements?histogram=true", roundTrip[adminapi.Statements]},
	"/tracecar/capture":                  {"/tracecar/capture", roundTrip[adminapi.Capture]},
	"/tracecar/audit":                    {"/tracecar/audit", roundTrip[adminapi.Audit]},
	"/tracecar/queries":                  {"/tracecar/queries", roundTrip[adminapi.Queries]},
	"/tracecar/nodes":                    {"/tracecar/nodes", roundTrip[adminapi.NodeStates]},
	"/tracecar/node/trace_probability":   {"/tracecar/node/trace_probability", roundTrip[adminapi.Probability]},
	"/metrics": {"/metrics", func(b []byte) error { // the Prometheus text format, not JSON
		_, err := adminapi.ParseRequestMetrics(b)
		return err
	}},
}

// fullConfig is a server with every part the API serves, each holding something to show.
func fullConfig(t *testing.T) admin.Config {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "captures")
	if err := capture.CheckDir(dir); err != nil {
		t.Fatal(err)
	}
	real := tracing.New(tracing.Options{})
	t.Cleanup(func() { real.Close(t.Context()) })
	real.SetFilter(tracing.Filter{Keyspace: "ks", Opcode: "QUERY"})
	gc := guardrail.NewController(guardrail.Config{Tracer: real, Source: guardrail.SourceFunc(func() guardrail.Sample { return guardrail.Sample{} })})
	if err := gc.SetBudget(guardrail.Budget{CPUPercent: 5, Window: 10 * time.Second, Cooldown: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, _, nc := embeddedNode(t)
	return admin.Config{
		Tracer: newFakeTracer(), TraceFilter: real, GuardrailControl: gc, Statements: fakeStatements{at},
		Capture: capture.New(capture.Config{Dir: dir}), Audit: mustAudit(t, audit.Block, &memSink{}),
		Node: nc, NodeControl: fakeNodes{}, Collectors: []prometheus.Collector{gc.Collector()},
		TraceContextKeys: []string{"traceparent", "tp"},
		Queries: func(time.Duration, int) []admin.Query {
			return []admin.Query{{Client: "10.0.0.1:5000", Opcode: "QUERY", ElapsedUS: 1500, StartedAt: &at, Statement: "SELECT 1"}}
		},
		Process: func() admin.Process {
			return admin.Process{PID: 7, StartedAt: at, Predecessor: &admin.ProcessPeer{PID: 6, StartedAt: at},
				Handover: &admin.Handover{At: at, ConnectionsFrom: at, Received: 2, Done: true}}
		},
		Shards: func() *admin.Shards {
			return &admin.Shards{RequestsByShard: map[string]uint64{"0": 3}, CrossShardRequests: 1}
		},
		NodeLogin: func() admin.NodeLogin { return admin.NodeLogin{State: "ok", User: "cassandra"} },
	}
}

// fakeNodes is a test cluster of two nodes, the second stopped.
type fakeNodes struct{}

func (fakeNodes) Len() int        { return 2 }
func (fakeNodes) Up(i int) bool   { return i == 0 }
func (fakeNodes) Stop(int) error  { return nil }
func (fakeNodes) Start(int) error { return nil }

// TestEveryRouteRoundTrips: the answer of every GET route of a server with every part,
// each showing something, decodes into its shape in adminapi without a field the shape
// lacks, and the shape writes it back byte for byte, so that a client reads all the server
// writes. A route added without a shape here fails. An error answer's body is a shape too.
func TestEveryRouteRoundTrips(t *testing.T) {
	f := mustServe(t, fullConfig(t))
	srv := admin.New(fullConfig(t))
	seen := 0
	for _, r := range srv.Routes() {
		if r.Method != http.MethodGet {
			continue
		}
		seen++
		sh, ok := shapeOf[r.Path]
		if !ok {
			t.Errorf("GET %s: no shape in shapeOf: add the route's shape in adminapi, and here", r.Path)
			continue
		}
		status, body := do(t, client, f.url, request{method: "GET", path: sh.path})
		if status != http.StatusOK {
			t.Errorf("GET %s: %d %s", sh.path, status, body)
			continue
		}
		if err := sh.check([]byte(body)); err != nil {
			t.Errorf("GET %s: %v", sh.path, err)
		}
	}
	if seen < len(shapeOf) {
		t.Errorf("the full server has %d GET routes, shapeOf %d: serve every part in fullConfig", seen, len(shapeOf))
	}
	status, body := do(t, client, f.url, request{method: "POST", path: "/storage_service/trace_probability", body: "probability=2"})
	if err := roundTrip[adminapi.ErrorBody]([]byte(body)); status != http.StatusBadRequest || err != nil || !strings.Contains(body, `"code":400`) {
		t.Errorf("a bad probability: %d %s (%v); want 400 and the error shape", status, body, err)
	}
}

// fakeStatements holds one statement with every field set, and one never called.
type fakeStatements struct{ at time.Time }

func (fakeStatements) Enabled() bool   { return true }
func (fakeStatements) SetEnabled(bool) {}
func (fakeStatements) Reset()          {}
func (fakeStatements) Max() int        { return 10 }
func (fakeStatements) Evicted() uint64 { return 2 }
func (f fakeStatements) List(order string, limit int, histogram bool) []statements.Statement {
	s := statements.Statement{Statement: "SELECT v FROM ks.t WHERE k = ?", Prepared: true, Keyspace: "ks", Table: "t",
		Calls: 3, Errors: map[string]uint64{"overloaded": 1}, TotalTimeUS: 30, MeanUS: 10, MaxUS: 12, P50US: 10, P99US: 12,
		P999US: 12, Rows: 3, Consistency: map[string]uint64{"ONE": 3}, FirstSeen: f.at, LastSeen: f.at,
		AntiPatterns: []string{"cl_all"}, LastTraceID: "a0000000-0000-1000-8000-000000000001", LastTraceAt: &f.at}
	if histogram {
		s.Histogram = []statements.Bucket{{10, 2}, {12, 1}}
	}
	return []statements.Statement{s, {Statement: "INSERT INTO ks.t (k) VALUES (?)", Errors: map[string]uint64{}, Consistency: map[string]uint64{}}}
}
