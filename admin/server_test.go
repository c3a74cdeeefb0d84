package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
)

// TestEndpoints runs every endpoint's happy path in order on one server, checking the
// response and the state it leaves.
func TestEndpoints(t *testing.T) {
	tr := newFakeTracer()
	f := mustServe(t, admin.Config{Tracer: tr})
	steps := []struct {
		name       string
		req        request
		wantStatus int
		wantBody   string            // exact, when not empty
		wantCfg    *tracing.Config   // tracer config afterwards, when not nil
		wantLevels map[string]string // some levels afterwards
	}{
		{name: "slow_query defaults", req: request{method: "GET", path: "/storage_service/slow_query"},
			wantStatus: 200, wantBody: `{"enable":false,"ttl":86400,"threshold":500000,"fast":false}`},
		{name: "slow_query all in query", req: request{method: "POST", path: "/storage_service/slow_query?enable=true&fast=true&threshold=200000&ttl=3600"},
			wantStatus: 200, wantCfg: &tracing.Config{Enable: true, Fast: true, ThresholdMicros: 200000, TTLSeconds: 3600}},
		{name: "slow_query read back", req: request{method: "GET", path: "/storage_service/slow_query"},
			wantStatus: 200, wantBody: `{"enable":true,"ttl":3600,"threshold":200000,"fast":true}`},
		{name: "slow_query one param keeps the rest", req: request{method: "POST", path: "/storage_service/slow_query?fast=FALSE"},
			wantStatus: 200, wantCfg: &tracing.Config{Enable: true, ThresholdMicros: 200000, TTLSeconds: 3600}},
		{name: "slow_query form body", req: request{method: "POST", path: "/storage_service/slow_query", body: "enable=0&threshold=0"},
			wantStatus: 200, wantCfg: &tracing.Config{ThresholdMicros: 0, TTLSeconds: 3600}},
		{name: "slow_query query and body together", req: request{method: "POST", path: "/storage_service/slow_query?enable=True", body: "fast=1&ttl=0"},
			wantStatus: 200, wantCfg: &tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0, TTLSeconds: 0}},
		{name: "slow_query no params is a no-op", req: request{method: "POST", path: "/storage_service/slow_query"},
			wantStatus: 200, wantCfg: &tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0, TTLSeconds: 0}},
		{name: "trace_probability default", req: request{method: "GET", path: "/storage_service/trace_probability"},
			wantStatus: 200, wantBody: `0`},
		{name: "trace_probability set", req: request{method: "POST", path: "/storage_service/trace_probability?probability=0.25"},
			wantStatus: 200, wantCfg: &tracing.Config{Enable: true, Fast: true, Probability: 0.25}},
		{name: "trace_probability read back", req: request{method: "GET", path: "/storage_service/trace_probability"},
			wantStatus: 200, wantBody: `0.25`},
		{name: "trace_probability 1 in body", req: request{method: "POST", path: "/storage_service/trace_probability", body: "probability=1"},
			wantStatus: 200, wantCfg: &tracing.Config{Enable: true, Fast: true, Probability: 1}},
		{name: "logger names", req: request{method: "GET", path: "/system/logger"},
			wantStatus: 200, wantBody: `["sidecar","tracing","slowlog","admin","node","loadcheck"]`},
		{name: "one logger", req: request{method: "GET", path: "/system/logger/sidecar"},
			wantStatus: 200, wantBody: `"info"`},
		{name: "set one logger", req: request{method: "POST", path: "/system/logger/sidecar?level=debug"},
			wantStatus: 200, wantLevels: map[string]string{"sidecar": "debug", "node": "info"}},
		{name: "one logger read back", req: request{method: "GET", path: "/system/logger/sidecar"},
			wantStatus: 200, wantBody: `"debug"`},
		{name: "set one logger upper case, in body", req: request{method: "POST", path: "/system/logger/node", body: "level=TRACE"},
			wantStatus: 200, wantLevels: map[string]string{"sidecar": "debug", "node": "trace"}},
		{name: "logging_level", req: request{method: "GET", path: "/storage_service/logging_level"},
			wantStatus: 200, wantBody: `[{"key":"sidecar","value":"debug"},{"key":"tracing","value":"info"},{"key":"slowlog","value":"info"},{"key":"admin","value":"info"},{"key":"node","value":"trace"},{"key":"loadcheck","value":"info"}]`},
		{name: "set all loggers", req: request{method: "POST", path: "/system/logger?level=warn"},
			wantStatus: 200, wantLevels: map[string]string{"sidecar": "warn", "tracing": "warn", "slowlog": "warn", "admin": "warn", "node": "warn", "loadcheck": "warn"}},
		{name: "healthz", req: request{method: "GET", path: "/healthz"}, wantStatus: 200, wantBody: `{"status":"ok"}`},
		{name: "readyz", req: request{method: "GET", path: "/readyz"}, wantStatus: 200, wantBody: `{"status":"ready"}`},
		{name: "HEAD is GET without a body", req: request{method: "HEAD", path: "/storage_service/slow_query"}, wantStatus: 200},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			status, body := do(t, client, f.url, st.req)
			if status != st.wantStatus {
				t.Fatalf("%v: status %d, body %q; want %d", st.req, status, body, st.wantStatus)
			}
			if st.wantBody != "" && body != st.wantBody {
				t.Errorf("%v: body %s; want %s", st.req, body, st.wantBody)
			}
			if st.req.method == "POST" && body != "" {
				t.Errorf("%v: body %q; want empty, as Scylla", st.req, body)
			}
			if st.wantCfg != nil {
				if got := tr.Config(); got != *st.wantCfg {
					t.Errorf("config %+v; want %+v", got, *st.wantCfg)
				}
			}
			for n, want := range st.wantLevels {
				if got, _ := f.logs.Level(n); got != want {
					t.Errorf("level of %s = %q; want %q", n, got, want)
				}
			}
		})
	}
}

func TestSlowLogAndSessions(t *testing.T) {
	tr := newFakeTracer()
	f := mustServe(t, admin.Config{Tracer: tr})
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantIDs    []string // session ids in the response, for 200
	}{
		{"default limit", "/tracecar/slow_log", 200, []string{tr.sessions[0].ID, tr.sessions[1].ID}},
		{"limit 1 is the newest", "/tracecar/slow_log?limit=1", 200, []string{tr.sessions[0].ID}},
		{"limit 0", "/tracecar/slow_log?limit=0", 400, nil},
		{"limit not a number", "/tracecar/slow_log?limit=ten", 400, nil},
		{"one session", "/tracecar/sessions/" + tr.sessions[1].ID, 200, []string{tr.sessions[1].ID}},
		{"unknown session", "/tracecar/sessions/nope", 404, nil},
		{"no id", "/tracecar/sessions/", 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do(t, client, f.url, request{method: "GET", path: tt.path})
			if status != tt.wantStatus {
				t.Fatalf("GET %s: status %d, body %q; want %d", tt.path, status, body, tt.wantStatus)
			}
			if status != 200 {
				apiError(t, status, body)
				return
			}
			var got []tracing.Session
			if strings.HasPrefix(body, "[") {
				err := json.Unmarshal([]byte(body), &got)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				var s tracing.Session
				if err := json.Unmarshal([]byte(body), &s); err != nil {
					t.Fatal(err)
				}
				got = append(got, s)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			if strings.Join(ids, ",") != strings.Join(tt.wantIDs, ",") {
				t.Errorf("ids %v; want %v", ids, tt.wantIDs)
			}
		})
	}
	// The record keeps the DESIGN.md field names.
	_, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/sessions/" + tr.sessions[1].ID})
	for _, key := range []string{`"session_id"`, `"started_at"`, `"duration_us"`, `"command"`, `"mode"`, `"events"`, `"source_elapsed_us"`} {
		if !strings.Contains(body, key) {
			t.Errorf("session %s lacks %s", body, key)
		}
	}
}

func TestStatus(t *testing.T) {
	tr := newFakeTracer()
	tr.cfg.Enable, tr.cfg.Fast = true, true
	f := mustServe(t, admin.Config{Tracer: tr, Guardrail: func() admin.Guardrail {
		return admin.Guardrail{State: "breached", Detail: "full: 25% > 20%"}
	}})
	status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/status"})
	if status != 200 {
		t.Fatalf("status %d %q", status, body)
	}
	var got admin.Status
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"mode", got.Mode, "fast"},
		{"requests", got.Counters.Requests, uint64(1000)},
		{"traced", got.Counters.Traced, uint64(10)},
		{"slow sessions", got.Counters.SlowSessions, uint64(2)},
		{"otel dropped", got.SinkDropped["otel"], uint64(3)},
		{"otel errors", got.SinkErrors["otel"], uint64(1)},
		{"guardrail", got.Guardrail.State, "breached"},
		{"sidecar level", got.Loggers["sidecar"], "info"},
		{"threshold", got.SlowQuery != nil && got.SlowQuery.Threshold == 500000, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v (body %s)", c.name, c.got, c.want, body)
		}
	}
}

func TestReadyz(t *testing.T) {
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Ready: func(ctx context.Context) error {
		return errors.New("dial node 127.0.0.1:9042: connection refused")
	}})
	status, body := do(t, client, f.url, request{method: "GET", path: "/readyz"})
	if status != http.StatusServiceUnavailable {
		t.Fatalf("status %d; want 503", status)
	}
	if e := apiError(t, status, body); !strings.Contains(e.Message, "connection refused") {
		t.Errorf("message %q does not say why", e.Message)
	}
}

// TestBadInput sends requests that must be refused, and checks the status, that the
// message names the parameter, and that nothing changed.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantInMsg  string
	}{
		{"non-numeric threshold", request{method: "POST", path: "/storage_service/slow_query?threshold=abc"}, 400, "threshold"},
		{"threshold with a unit", request{method: "POST", path: "/storage_service/slow_query?threshold=500ms"}, 400, "microseconds"},
		{"negative threshold", request{method: "POST", path: "/storage_service/slow_query?threshold=-1"}, 400, "threshold"},
		{"threshold overflows", request{method: "POST", path: "/storage_service/slow_query?threshold=99999999999999999999"}, 400, "threshold"},
		{"negative ttl", request{method: "POST", path: "/storage_service/slow_query?ttl=-5"}, 400, "ttl"},
		{"ttl beyond Cassandra's max", request{method: "POST", path: "/storage_service/slow_query?ttl=630720001"}, 400, "ttl"},
		{"enable=yes", request{method: "POST", path: "/storage_service/slow_query?enable=yes"}, 400, "true, false, 1 or 0"},
		{"fast=2", request{method: "POST", path: "/storage_service/slow_query?fast=2"}, 400, "fast"},
		{"good enable, bad threshold: nothing applied", request{method: "POST", path: "/storage_service/slow_query?enable=true&fast=true&threshold=x"}, 400, "threshold"},
		{"good query, bad body: nothing applied", request{method: "POST", path: "/storage_service/slow_query?enable=true", body: "ttl=-1"}, 400, "ttl"},
		{"empty value", request{method: "POST", path: "/storage_service/slow_query?enable=true&threshold="}, 400, "threshold"},
		{"no value", request{method: "POST", path: "/storage_service/slow_query?enable"}, 400, "enable"},
		{"repeated", request{method: "POST", path: "/storage_service/slow_query?enable=true&enable=false"}, 400, "more than once"},
		{"in query and body", request{method: "POST", path: "/storage_service/slow_query?enable=true", body: "enable=true"}, 400, "more than once"},
		{"unknown parameter", request{method: "POST", path: "/storage_service/slow_query?enable=true&treshold=100"}, 400, "treshold"},
		{"JSON body", request{method: "POST", path: "/storage_service/slow_query", body: `{"enable":true}`,
			header: map[string]string{"Content-Type": "application/json"}}, 400, "application/x-www-form-urlencoded"},
		{"probability 1.5", request{method: "POST", path: "/storage_service/trace_probability?probability=1.5"}, 400, "probability"},
		{"probability -0.1", request{method: "POST", path: "/storage_service/trace_probability?probability=-0.1"}, 400, "0 to 1"},
		{"probability NaN", request{method: "POST", path: "/storage_service/trace_probability?probability=NaN"}, 400, "probability"},
		{"probability words", request{method: "POST", path: "/storage_service/trace_probability?probability=half"}, 400, "probability"},
		{"missing probability", request{method: "POST", path: "/storage_service/trace_probability"}, 400, "missing parameter probability"},
		{"level loud", request{method: "POST", path: "/system/logger/sidecar?level=loud"}, 400, "error, warn, info, debug, trace"},
		{"level loud for all", request{method: "POST", path: "/system/logger?level=loud"}, 400, "level"},
		{"missing level", request{method: "POST", path: "/system/logger/sidecar"}, 400, "missing parameter level"},
		{"missing level for all", request{method: "POST", path: "/system/logger"}, 400, "missing parameter level"},
		{"unknown logger, POST", request{method: "POST", path: "/system/logger/nope?level=debug"}, 400, "unknown logger"},
		{"unknown logger, GET", request{method: "GET", path: "/system/logger/nope"}, 400, "sidecar"},
		{"unknown logger and bad level", request{method: "POST", path: "/system/logger/nope?level=loud"}, 400, "unknown logger"},
		{"wrong method DELETE", request{method: "DELETE", path: "/storage_service/slow_query"}, 405, "GET, HEAD, POST"},
		{"wrong method PUT", request{method: "PUT", path: "/system/logger/sidecar?level=debug"}, 405, "PUT"},
		{"POST to a read-only endpoint", request{method: "POST", path: "/storage_service/logging_level?level=debug"}, 405, "GET"},
		{"POST to status", request{method: "POST", path: "/tracecar/status"}, 405, "GET"},
		{"unknown path", request{method: "GET", path: "/storage_service/nope"}, 404, "/storage_service/nope"},
		{"trailing slash", request{method: "GET", path: "/storage_service/slow_query/"}, 404, "no endpoint"},
		{"nested logger path", request{method: "POST", path: "/system/logger/sidecar/x?level=debug"}, 404, "no endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustServe(t, admin.Config{Tracer: newFakeTracer()})
			before := f.state(t)
			status, body := do(t, client, f.url, tt.req)
			if status != tt.wantStatus {
				t.Fatalf("%v: status %d, body %q; want %d", tt.req, status, body, tt.wantStatus)
			}
			if e := apiError(t, status, body); !strings.Contains(e.Message, tt.wantInMsg) {
				t.Errorf("%v: message %q; want it to mention %q", tt.req, e.Message, tt.wantInMsg)
			}
			if after := f.state(t); !after.equal(before) {
				t.Errorf("%v changed state: %+v; want %+v", tt.req, after, before)
			}
		})
	}
}

// TestAuth checks that a token guards everything but /healthz, and that a refused change
// changes nothing.
func TestAuth(t *testing.T) {
	const token = "s3cret-token"
	f := mustServe(t, admin.Config{Token: token, Tracer: newFakeTracer()})
	tests := []struct {
		name       string
		req        request
		wantStatus int
	}{
		{"no header", request{method: "GET", path: "/storage_service/slow_query"}, 401},
		{"wrong token", request{method: "GET", path: "/storage_service/slow_query", header: map[string]string{"Authorization": "Bearer nope"}}, 401},
		{"token prefix", request{method: "GET", path: "/storage_service/slow_query", header: map[string]string{"Authorization": "Bearer s3cret"}}, 401},
		{"basic scheme", request{method: "GET", path: "/storage_service/slow_query", header: map[string]string{"Authorization": "Basic " + token}}, 401},
		{"bare token", request{method: "GET", path: "/storage_service/slow_query", header: map[string]string{"Authorization": token}}, 401},
		{"change without token", request{method: "POST", path: "/storage_service/slow_query?enable=true"}, 401},
		{"change with wrong token", request{method: "POST", path: "/system/logger?level=trace", header: map[string]string{"Authorization": "Bearer x"}}, 401},
		{"metrics without token", request{method: "GET", path: "/metrics"}, 401},
		{"readyz without token", request{method: "GET", path: "/readyz"}, 401},
		{"unknown path without token", request{method: "GET", path: "/nope"}, 401},
		{"healthz without token", request{method: "GET", path: "/healthz"}, 200},
		{"healthz HEAD without token", request{method: "HEAD", path: "/healthz"}, 200},
		{"healthz POST without token", request{method: "POST", path: "/healthz"}, 401},
		{"DELETE without token", request{method: "DELETE", path: "/storage_service/slow_query"}, 401},
		{"unusual method without token", request{method: "PROPFIND", path: "/system/logger"}, 401},
		{"right token", request{method: "GET", path: "/storage_service/slow_query", header: map[string]string{"Authorization": "Bearer " + token}}, 200},
		{"scheme in lower case", request{method: "GET", path: "/system/logger", header: map[string]string{"Authorization": "bearer " + token}}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.state(t)
			status, body := do(t, client, f.url, tt.req)
			if status != tt.wantStatus {
				t.Fatalf("%v: status %d, body %q; want %d", tt.req, status, body, tt.wantStatus)
			}
			if status == 401 {
				apiError(t, status, body)
			}
			if after := f.state(t); !after.equal(before) {
				t.Errorf("%v changed state", tt.req)
			}
		})
	}
	status, _ := do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?enable=true",
		header: map[string]string{"Authorization": "Bearer " + token}})
	if got := f.tr.Config().Enable; status != 200 || !got {
		t.Errorf("authorized change: status %d, enable %v; want 200, true", status, got)
	}
}

// TestRoutesListsEveryMethod checks that Routes lists the methods of every route, DELETE
// included, as it reads them from the table that routes requests.
func TestRoutesListsEveryMethod(t *testing.T) {
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(context.Background()) })
	s := admin.New(admin.Config{Tracer: newFakeTracer(), TraceFilter: tr})
	routes := s.Routes()
	for _, want := range []admin.Route{
		{Method: "DELETE", Path: "/tracecar/trace_filter"},
		{Method: "GET", Path: "/tracecar/trace_filter"},
		{Method: "POST", Path: "/tracecar/trace_filter"},
		{Method: "GET", Path: "/healthz"},
		{Method: "POST", Path: "/system/logger/"},
	} {
		if !slices.Contains(routes, want) {
			t.Errorf("Routes() = %v; want it to hold %v", routes, want)
		}
	}
}

// TestNoTracer is the embedded node's case without a tracer: loggers only.
func TestNoTracer(t *testing.T) {
	f := mustServe(t, admin.Config{})
	tests := []struct {
		req        request
		wantStatus int
	}{
		{request{method: "GET", path: "/storage_service/slow_query"}, 404},
		{request{method: "POST", path: "/storage_service/trace_probability?probability=0.5"}, 404},
		{request{method: "GET", path: "/tracecar/slow_log"}, 404},
		{request{method: "GET", path: "/system/logger"}, 200},
		{request{method: "POST", path: "/system/logger/node?level=debug"}, 200},
		{request{method: "GET", path: "/tracecar/status"}, 200},
		{request{method: "GET", path: "/metrics"}, 200},
	}
	for _, tt := range tests {
		if status, body := do(t, client, f.url, tt.req); status != tt.wantStatus {
			t.Errorf("%v: status %d, body %q; want %d", tt.req, status, body, tt.wantStatus)
		}
	}
}

// TestConfigOnly is the embedded node's case: a trace probability and nothing else.
func TestConfigOnly(t *testing.T) {
	var cfg = tracing.DefaultConfig()
	tr := admin.ConfigOnly(func() tracing.Config { return cfg }, func(c tracing.Config) error { cfg = c; return nil })
	f := mustServe(t, admin.Config{Tracer: tr})
	if status, _ := do(t, client, f.url, request{method: "POST", path: "/storage_service/trace_probability?probability=0.5"}); status != 200 {
		t.Fatalf("status %d", status)
	}
	if _, body := do(t, client, f.url, request{method: "GET", path: "/storage_service/trace_probability"}); body != "0.5" {
		t.Errorf("probability %s; want 0.5", body)
	}
	// It serves only what it applies: no sessions, and no slow-query change.
	if status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/slow_log"}); status != 404 {
		t.Errorf("slow_log %d %s; want 404", status, body)
	}
	if status, body := do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?enable=true"}); status != 501 || !strings.Contains(body, "trace_probability") {
		t.Errorf("POST slow_query %d %s; want 501 saying what is applied", status, body)
	}
	if cfg.Enable {
		t.Errorf("POST slow_query changed the configuration")
	}
}

// TestChangesLogged checks the audit line of a change: who, what, old and new.
func TestChangesLogged(t *testing.T) {
	f := mustServe(t, admin.Config{Tracer: newFakeTracer()})
	do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?enable=true&threshold=1000"})
	do(t, client, f.url, request{method: "POST", path: "/system/logger/sidecar?level=debug"})
	do(t, client, f.url, request{method: "POST", path: "/storage_service/trace_probability?probability=2"})

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["message"] != "admin API listening" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("got %d log lines %v; want 3", len(lines), lines)
	}
	sq, lg, bad := lines[0], lines[1], lines[2]
	old, _ := sq["old"].(map[string]any)
	nw, _ := sq["new"].(map[string]any)
	if sq["what"] != "slow_query" || old["enable"] != false || nw["enable"] != true || nw["threshold"] != 1000.0 ||
		!strings.HasPrefix(sq["remote"].(string), "127.0.0.1:") {
		t.Errorf("slow_query line = %v", sq)
	}
	if lg["what"] != "logger sidecar" || lg["old"] != "info" || lg["new"] != "debug" {
		t.Errorf("logger line = %v", lg)
	}
	if bad["status"] != 400.0 || !strings.Contains(bad["error"].(string), "probability") {
		t.Errorf("refusal line = %v", bad)
	}
}

// fakeListener has a non-loopback address and accepts nothing.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

func TestOpenRefused(t *testing.T) {
	public := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 10000}
	tests := []struct {
		name string
		cfg  admin.Config
		addr net.Addr
		want error
	}{
		{"public without token", admin.Config{}, public, admin.ErrOpen},
		{"unspecified without token", admin.Config{}, &net.TCPAddr{IP: net.IPv4zero, Port: 10000}, admin.ErrOpen},
		{"public with token", admin.Config{Token: "t"}, public, nil},
		{"public, insecure", admin.Config{Insecure: true}, public, nil},
		{"IPv6 loopback", admin.Config{}, &net.TCPAddr{IP: net.IPv6loopback, Port: 10000}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Tracer = newFakeTracer()
			s := admin.New(cfg)
			err := s.Serve(context.Background(), fakeListener{tt.addr})
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("Serve = %v; want %v", err, tt.want)
				}
				return
			}
			if errors.Is(err, admin.ErrOpen) {
				t.Fatalf("Serve = %v; want it to serve", err)
			}
		})
	}
}

func TestAddr(t *testing.T) {
	s := admin.New(admin.Config{})
	if got := s.Addr(); got != admin.DefaultAddr {
		t.Errorf("Addr() before Serve = %q; want %q", got, admin.DefaultAddr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	// Serving is visible through a request; Addr is set before the first one is answered.
	if status, _ := do(t, client, "http://"+ln.Addr().String(), request{method: "GET", path: "/healthz"}); status != 200 {
		t.Fatalf("healthz %d", status)
	}
	if got := s.Addr(); got != ln.Addr().String() {
		t.Errorf("Addr() = %q; want %q", got, ln.Addr())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v; want nil", err)
	}
}

// TestAuditIgnoresLevel checks that a change is logged even with the admin logger at
// error, so that nobody can hide changes by turning the admin logger down first.
func TestAuditIgnoresLevel(t *testing.T) {
	var buf syncBuffer
	reg, err := logs.New(logs.Config{Format: "json", Writer: &buf})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, admin.New(admin.Config{Logger: reg.Logger(logs.Admin), Tracer: newFakeTracer(), Loggers: reg}), false)
	for _, path := range []string{"/system/logger/admin?level=error", "/storage_service/slow_query?enable=true"} {
		if status, body := do(t, client, url, request{method: "POST", path: path}); status != 200 {
			t.Fatalf("POST %s: %d %s", path, status, body)
		}
	}
	var whats []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["message"] == "admin change" {
			whats = append(whats, m["what"].(string))
			if m["level"] != "info" || m["logger"] != "admin" {
				t.Errorf("audit line %v; want level info, logger admin", m)
			}
		}
	}
	if strings.Join(whats, ",") != "logger admin,slow_query" {
		t.Errorf("audit lines for %v; want logger admin, slow_query", whats)
	}
}

func TestListenAndServe(t *testing.T) {
	s := admin.New(admin.Config{Addr: "127.0.0.1:0", Tracer: newFakeTracer()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx) }()
	var addr string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if addr = s.Addr(); addr != "127.0.0.1:0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ListenAndServe never set Addr")
		}
	}
	if status, body := do(t, client, "http://"+addr, request{method: "GET", path: "/storage_service/slow_query"}); status != 200 {
		t.Errorf("GET on %s: %d %s", addr, status, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe after cancel = %v; want nil", err)
	}
	if err := admin.New(admin.Config{Addr: "256.0.0.1:1"}).ListenAndServe(context.Background()); err == nil {
		t.Error("ListenAndServe on a bad address succeeded")
	}
}

// TestServeCancelledAtOnce checks that Serve returns when its context is already done as it
// starts: a shutdown that runs before the HTTP server has taken the listener must still end
// it (a sidecar cancelled right after start hung there under load).
func TestServeCancelledAtOnce(t *testing.T) {
	for i := range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { done <- admin.New(admin.Config{Tracer: newFakeTracer()}).Serve(ctx, ln) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run %d: Serve: %v; want nil after a cancel", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("run %d: Serve did not return after its context was cancelled", i)
		}
	}
}

// TestZeroConfig: a Server of the zero Config serves: no loggers, a status, health and
// readiness, and no tracing endpoint.
func TestZeroConfig(t *testing.T) {
	url := serve(t, admin.New(admin.Config{}), false)
	for _, tt := range []struct {
		path       string
		wantStatus int
		wantBody   string
	}{
		{"/system/logger", 200, "[]"},
		{"/storage_service/logging_level", 200, "[]"},
		{"/healthz", 200, `{"status":"ok"}`},
		{"/readyz", 200, `{"status":"ready"}`},
		{"/tracecar/status", 200, ""},
		{"/metrics", 200, ""},
		{"/storage_service/slow_query", 404, ""},
	} {
		status, body := do(t, client, url, request{method: "GET", path: tt.path})
		if status != tt.wantStatus || tt.wantBody != "" && body != tt.wantBody {
			t.Errorf("GET %s: %d %s; want %d %s", tt.path, status, body, tt.wantStatus, tt.wantBody)
		}
	}
}
