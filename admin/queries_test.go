package admin_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
)

// TestQueriesEndpoint checks GET /tracecar/queries: its parameters reach the source as
// given (defaults included), bad ones are a 400 naming them, and the JSON has its shape.
func TestQueriesEndpoint(t *testing.T) {
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var gotMin time.Duration
	var gotLimit int
	src := func(min time.Duration, limit int) []admin.Query {
		mu.Lock()
		gotMin, gotLimit = min, limit
		mu.Unlock()
		if min > time.Second {
			return nil
		}
		return []admin.Query{{Client: "127.0.0.1:50123", Username: "alice", Opcode: "EXECUTE", Stream: 3,
			ElapsedUS: 2500000, StartedAt: &started, Statement: "SELECT v FROM ks.t WHERE k = ?", Keyspace: "ks",
			Table: "t", Consistency: "LOCAL_ONE", StatementFrom: "tracing", TraceMode: "fast"}}
	}
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Queries: src})

	for _, tc := range []struct {
		path      string
		wantMin   time.Duration
		wantLimit int
		wantN     int
	}{
		{"/tracecar/queries", 0, admin.DefaultQueriesLimit, 1},
		{"/tracecar/queries?min_elapsed=250ms&limit=5", 250 * time.Millisecond, 5, 1},
		{"/tracecar/queries?min_elapsed=1m", time.Minute, admin.DefaultQueriesLimit, 0},
	} {
		status, body := do(t, client, f.url, request{method: "GET", path: tc.path})
		if status != 200 {
			t.Fatalf("GET %s: %d %s", tc.path, status, body)
		}
		var qs []map[string]any
		if err := json.Unmarshal([]byte(body), &qs); err != nil || qs == nil || len(qs) != tc.wantN {
			t.Fatalf("GET %s: %s (%v); want a JSON array of %d", tc.path, body, err, tc.wantN)
		}
		mu.Lock()
		if gotMin != tc.wantMin || gotLimit != tc.wantLimit {
			t.Errorf("GET %s: source asked for min %v limit %d; want %v and %d", tc.path, gotMin, gotLimit, tc.wantMin, tc.wantLimit)
		}
		mu.Unlock()
		if tc.wantN == 1 {
			for _, k := range []string{"client", "username", "opcode", "stream", "elapsed_us", "started_at", "statement",
				"keyspace", "table", "consistency", "statement_from", "trace_mode"} {
				if _, ok := qs[0][k]; !ok {
					t.Errorf("GET %s: no %q in %s", tc.path, k, body)
				}
			}
		}
	}
	for _, tc := range []struct{ path, param string }{
		{"/tracecar/queries?min_elapsed=100", "min_elapsed"}, // a number without a unit
		{"/tracecar/queries?min_elapsed=-1s", "min_elapsed"},
		{"/tracecar/queries?min_elapsed=soon", "min_elapsed"},
		{"/tracecar/queries?min_elapsed=", "min_elapsed"},
		{"/tracecar/queries?limit=0", "limit"},
		{"/tracecar/queries?limit=100001", "limit"},
		{"/tracecar/queries?limit=ten", "limit"},
		{"/tracecar/queries?limit=1&limit=2", "limit"},
		{"/tracecar/queries?min=1s", "min"},
	} {
		status, body := do(t, client, f.url, request{method: "GET", path: tc.path})
		e := apiError(t, status, body)
		if status != 400 || !strings.Contains(e.Message, tc.param) {
			t.Errorf("GET %s: %d %s; want a 400 naming %s", tc.path, status, body, tc.param)
		}
	}
	if status, _ := do(t, client, f.url, request{method: "POST", path: "/tracecar/queries"}); status != 405 {
		t.Errorf("POST /tracecar/queries: %d; want 405", status)
	}
	bare := mustServe(t, admin.Config{Tracer: newFakeTracer()})
	if status, _ := do(t, client, bare.url, request{method: "GET", path: "/tracecar/queries"}); status != 404 {
		t.Errorf("a server without a source: %d; want 404", status)
	}
}
