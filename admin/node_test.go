package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/nodeapi"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/guardrail"
)

// embeddedNode serves a real embedded node's API, as `tracecar node --api` does, and
// returns the node, its logger registry and a client of its API.
func embeddedNode(tb testing.TB) (*node.Server, *logs.Registry, *nodeapi.Client) {
	tb.Helper()
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	srv := node.New(node.Config{Logger: reg.Logger(logs.Node)})
	tr := admin.ConfigOnly(func() tracing.Config {
		c := tracing.DefaultConfig()
		c.Probability = srv.TraceProbability()
		return c
	}, func(c tracing.Config) error { return srv.SetTraceProbability(c.Probability) })
	url := serve(tb, admin.New(admin.Config{Tracer: tr, Loggers: reg}), false)
	c, err := nodeapi.New(nodeapi.Config{Kind: nodeapi.KindTracecar, URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	return srv, reg, c
}

func TestNodeLoggersThroughTheSidecar(t *testing.T) {
	_, nodeLogs, nc := embeddedNode(t)
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Node: nc, NodeApply: admin.NodeApply{TraceProbability: true}})

	status, body := do(t, client, f.url, request{method: "GET", path: "/system/logger"})
	var names []string
	if status != 200 || json.Unmarshal([]byte(body), &names) != nil ||
		!strings.Contains(","+strings.Join(names, ",")+",", ",sidecar,") || !strings.Contains(body, `"node:node"`) {
		t.Fatalf("GET /system/logger: %d %s; want the sidecar's loggers and node:node", status, body)
	}
	if status, body := do(t, client, f.url, request{method: "POST", path: "/system/logger/node:node?level=debug"}); status != 200 {
		t.Fatalf("POST node:node: %d %s", status, body)
	}
	if l, _ := nodeLogs.Level("node"); l != "debug" {
		t.Fatalf("the node's node logger is at %q; want debug", l)
	}
	if l, _ := f.logs.Level("node"); l != "info" {
		t.Fatalf("the sidecar's own node logger changed to %q; want info", l)
	}
	if status, body := do(t, client, f.url, request{method: "GET", path: "/system/logger/node:node"}); status != 200 || body != `"debug"` {
		t.Fatalf("GET node:node: %d %s; want \"debug\"", status, body)
	}
	for _, r := range []request{
		{method: "POST", path: "/system/logger/node:node?level=loud"},
		{method: "POST", path: "/system/logger/node:nope?level=info"},
		{method: "GET", path: "/system/logger/node:nope"},
	} {
		status, body := do(t, client, f.url, r)
		apiError(t, status, body)
		if status != 400 {
			t.Errorf("%v: %d %s; want 400", r, status, body)
		}
	}
	if l, _ := nodeLogs.Level("node"); l != "debug" {
		t.Fatalf("a refused request changed the node's logger to %q", l)
	}
}

func TestNodeLoggerWithoutNodeAPI(t *testing.T) {
	f := mustServe(t, admin.Config{Tracer: newFakeTracer()})
	status, body := do(t, client, f.url, request{method: "POST", path: "/system/logger/node:node?level=debug"})
	if e := apiError(t, status, body); status != 400 || !strings.Contains(e.Message, "--node-api") {
		t.Fatalf("%d %s; want a 400 saying to give --node-api", status, body)
	}
}

func TestTraceProbabilityAppliedToNode(t *testing.T) {
	srv, _, nc := embeddedNode(t)
	tr := newFakeTracer()
	f := mustServe(t, admin.Config{Tracer: tr, Node: nc, NodeApply: admin.NodeApply{TraceProbability: true}})
	if status, body := do(t, client, f.url, request{method: "POST", path: "/storage_service/trace_probability?probability=0.3"}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if tr.Config().Probability != 0.3 || srv.TraceProbability() != 0.3 {
		t.Fatalf("sidecar %v, node %v; want 0.3 on both", tr.Config().Probability, srv.TraceProbability())
	}
	// The node only.
	if status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/node/trace_probability?probability=0.01"}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if tr.Config().Probability != 0.3 || srv.TraceProbability() != 0.01 {
		t.Fatalf("sidecar %v, node %v; want 0.3 and 0.01", tr.Config().Probability, srv.TraceProbability())
	}
	if status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/node/trace_probability"}); status != 200 || body != "0.01" {
		t.Fatalf("GET node probability: %d %s", status, body)
	}
	// slow_query is not applied by default.
	if status, body := do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?enable=true"}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
}

func TestNodeFailureRollsBackTheSidecar(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"node is on fire","code":500}`, http.StatusInternalServerError)
	}))
	defer broken.Close()
	nc, err := nodeapi.New(nodeapi.Config{Kind: nodeapi.KindScylla, URL: broken.URL})
	if err != nil {
		t.Fatal(err)
	}
	tr := newFakeTracer()
	f := mustServe(t, admin.Config{Tracer: tr, Node: nc, NodeApply: admin.NodeApply{TraceProbability: true, SlowQuery: true}})
	before := f.state(t)
	for _, path := range []string{
		"/storage_service/trace_probability?probability=0.5",
		"/storage_service/slow_query?enable=true&fast=true&threshold=1000",
	} {
		status, body := do(t, client, f.url, request{method: "POST", path: path})
		e := apiError(t, status, body)
		if status != 502 || e.Outcomes["sidecar"] != "applied, then rolled back" || !strings.Contains(e.Outcomes["node"], "node is on fire") {
			t.Fatalf("POST %s: %d %s; want 502 with both outcomes", path, status, body)
		}
		if after := f.state(t); !after.equal(before) {
			t.Fatalf("POST %s: state %+v after a failed node change; want %+v", path, after, before)
		}
	}
}

func TestSlowQueryForwardedToScylla(t *testing.T) {
	var mu sync.Mutex
	var got []string
	scylla := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
	}))
	defer scylla.Close()
	nc, err := nodeapi.New(nodeapi.Config{Kind: nodeapi.KindScylla, URL: scylla.URL})
	if err != nil {
		t.Fatal(err)
	}
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Node: nc, NodeApply: admin.NodeApply{SlowQuery: true}})
	if status, body := do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?enable=true&fast=true&threshold=2000"}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if status, body := do(t, client, f.url, request{method: "POST", path: "/storage_service/trace_probability?probability=0.2"}); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "POST /storage_service/slow_query?enable=true&fast=true&threshold=2000&ttl=86400"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("the node got %q; want only %q (trace_probability is not applied)", got, want)
	}
}

func TestGuardrailEndpoint(t *testing.T) {
	tr := tracing.New(tracing.Options{})
	gc := guardrail.NewController(guardrail.Config{Tracer: tr, Source: guardrail.SourceFunc(func() guardrail.Sample { return guardrail.Sample{} })})
	f := mustServe(t, admin.Config{Tracer: gc.User(tr), GuardrailControl: gc, Collectors: []prometheus.Collector{gc.Collector()}})

	status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/guardrail"})
	if status != 200 || !strings.Contains(body, `"state":"none"`) {
		t.Fatalf("GET: %d %s; want state none", status, body)
	}
	for _, tc := range []struct{ query, param string }{
		{"added_p99=500&cpu=5", "added_p99"},
		{"cpu=5&added_p99=-1ms", "added_p99"},
		{"added_p99=1ms&cpu=101", "cpu"},
		{"cpu=5&drops=NaN", "drops"},
		{"cpu=5&window=10ms", "window"},
		{"cpu=5&cooldown=soon", "cooldown"},
		{"cpu=5&restore=yes", "restore"},
		{"cpu=5&cpus=5", "cpus"},
	} {
		status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/guardrail?" + tc.query})
		e := apiError(t, status, body)
		if status != 400 || !strings.Contains(e.Message, tc.param) {
			t.Errorf("POST %s: %d %s; want a 400 naming %s", tc.query, status, body, tc.param)
		}
		if gc.Budget().Enabled() {
			t.Fatalf("POST %s: a refused request set the budget %+v", tc.query, gc.Budget())
		}
	}
	if status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/guardrail?added_p99=500us&cpu=5&drops=100&window=1s&cooldown=30s&restore=true"}); status != 200 {
		t.Fatalf("POST: %d %s", status, body)
	}
	status, body = do(t, client, f.url, request{method: "GET", path: "/tracecar/guardrail"})
	var st guardrail.Status
	if status != 200 || json.Unmarshal([]byte(body), &st) != nil || st.State != "ok" || st.Budget == nil ||
		*st.Budget != (guardrail.BudgetJSON{AddedP99: "500µs", CPUPercent: 5, DropsPerSec: 100, Window: "1s", Cooldown: "30s", Restore: true}) {
		t.Fatalf("GET: %d %s; want the budget just set", status, body)
	}
	status, body = do(t, client, f.url, request{method: "GET", path: "/tracecar/status"})
	if status != 200 || !strings.Contains(body, `"guardrail":{"state":"ok"`) {
		t.Fatalf("status: %d %s; want the guardrail's state", status, body)
	}
}

// TestLoggingLevelListsEveryLogger: GET /storage_service/logging_level lists every logger
// that GET /system/logger lists, the node's included, each with its level (issue 47,
// finding 8: it listed 6 where /system/logger listed 12).
func TestLoggingLevelListsEveryLogger(t *testing.T) {
	_, nodeLogs, nc := embeddedNode(t)
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Node: nc, NodeApply: admin.NodeApply{TraceProbability: true}})
	if err := nodeLogs.SetLevel("node", "debug"); err != nil {
		t.Fatal(err)
	}
	status, body := do(t, client, f.url, request{method: "GET", path: "/system/logger"})
	var names []string
	if status != 200 || json.Unmarshal([]byte(body), &names) != nil {
		t.Fatalf("GET /system/logger: %d %s", status, body)
	}
	status, body = do(t, client, f.url, request{method: "GET", path: "/storage_service/logging_level"})
	var levels []struct{ Key, Value string }
	if status != 200 || json.Unmarshal([]byte(body), &levels) != nil {
		t.Fatalf("GET /storage_service/logging_level: %d %s", status, body)
	}
	got := map[string]string{}
	for _, kv := range levels {
		got[kv.Key] = kv.Value
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			t.Errorf("logger %s is in /system/logger but not in logging_level", n)
		}
	}
	if len(levels) != len(names) {
		t.Errorf("logging_level lists %d loggers, /system/logger %d", len(levels), len(names))
	}
	if got["node:node"] != "debug" {
		t.Errorf("node:node at %q in logging_level; want debug", got["node:node"])
	}
}
