package admin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing/statements"
)

// TestStatementsEndpoints drives the statement statistics endpoints against real Stats:
// the toggle, the listing with its sort and limit, the histogram buckets, reset, and a 400
// naming the parameter for every bad request, which changes nothing.
func TestStatementsEndpoints(t *testing.T) {
	st := statements.New(statements.Options{Max: 50})
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Statements: st, Collectors: []prometheus.Collector{st}})

	run := func(q string, n int) {
		b := cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, cql.V4)
		for i := 0; i < n; i++ {
			tk := st.Request(cql.NewFrame(cql.Header{Version: cql.V4, Opcode: cql.OpQuery}, b), 1000)
			if tk.Active() {
				st.Response(tk, cql.NewFrame(cql.Header{Version: cql.V4 | cql.ResponseBit, Opcode: cql.OpResult}, cql.VoidResult{}.AppendBody(nil, cql.V4)), 1000+int64(i+1)*1000)
			}
		}
	}
	run("SELECT v FROM ks.a", 3) // off: not counted
	for _, tc := range []struct{ method, path, param string }{
		{"POST", "/tracecar/statement_stats", "enable"},
		{"POST", "/tracecar/statement_stats?enable=yes", "enable"},
		{"POST", "/tracecar/statement_stats?enable=true&on=1", "on"},
		{"GET", "/tracecar/statements?sort=slowest", "sort"},
		{"GET", "/tracecar/statements?limit=0", "limit"},
		{"GET", "/tracecar/statements?limit=51", "limit"},
		{"GET", "/tracecar/statements?histogram=maybe", "histogram"},
		{"GET", "/tracecar/statements?order=calls", "order"},
		{"POST", "/tracecar/statements/reset?all=true", "all"},
	} {
		status, body := do(t, client, f.url, request{method: tc.method, path: tc.path})
		e := apiError(t, status, body)
		if status != 400 || !strings.Contains(e.Message, tc.param) {
			t.Errorf("%s %s: %d %s; want a 400 naming %s", tc.method, tc.path, status, body, tc.param)
		}
	}
	if st.Enabled() {
		t.Fatal("a refused request turned statistics on")
	}
	if status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/statement_stats?enable=true"}); status != 200 || !strings.Contains(body, `"enabled":true`) {
		t.Fatalf("enable: %d %s", status, body)
	}
	run("SELECT v FROM ks.a", 3)
	run("SELECT v FROM ks.b", 5)
	get := func(path string) []statements.Statement {
		t.Helper()
		status, body := do(t, client, f.url, request{method: "GET", path: path})
		if status != 200 {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		var out []statements.Statement
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
		return out
	}
	l := get("/tracecar/statements?sort=calls&limit=1&histogram=true")
	if len(l) != 1 || l[0].Statement != "SELECT v FROM ks.b" || l[0].Calls != 5 || len(l[0].Histogram) == 0 {
		t.Errorf("sort=calls limit=1: %+v", l)
	}
	if l := get("/tracecar/statements?sort=total_time"); len(l) != 2 || l[0].Histogram != nil {
		t.Errorf("sort=total_time: %+v", l)
	}
	if status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/statements/reset"}); status != 200 {
		t.Fatalf("reset: %d %s", status, body)
	}
	if l := get("/tracecar/statements"); len(l) != 0 {
		t.Errorf("after reset: %+v", l)
	}
}
