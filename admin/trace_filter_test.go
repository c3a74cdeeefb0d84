package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
)

// TestTraceFilterEndpoint sets, reads and clears the trace filter of a real tracer; a bad
// CIDR, an unknown opcode, a bad prepared id or an unknown parameter is a 400 naming it
// that changes nothing.
func TestTraceFilterEndpoint(t *testing.T) {
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(context.Background()) })
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), TraceFilter: tr})

	if status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/trace_filter?table=t1&client=10.1.2.3/8&opcode=execute&user=alice"}); status != 200 {
		t.Fatalf("POST: %d %s", status, body)
	}
	status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/trace_filter"})
	if status != 200 || body != `{"table":"t1","user":"alice","client":"10.0.0.0/8","opcode":"EXECUTE"}` {
		t.Fatalf("GET: %d %s", status, body)
	}
	for _, tc := range []struct{ query, param string }{
		{"client=10.0.0.300/8", "client"},
		{"table=t2&opcode=OPTIONS", "opcode"},
		{"statement=0xzz", "statement"},
		{"table=t2&tables=t3", "tables"},
		{"", "no filter parameter"},
	} {
		status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/trace_filter?" + tc.query})
		e := apiError(t, status, body)
		if status != 400 || !strings.Contains(e.Message, tc.param) {
			t.Errorf("POST %s: %d %s; want a 400 naming %s", tc.query, status, body, tc.param)
		}
		if got := tr.Filter(); got.Table != "t1" || got.Opcode != "EXECUTE" {
			t.Fatalf("POST %s changed the filter to %+v", tc.query, got)
		}
	}
	if status, body := do(t, client, f.url, request{method: "DELETE", path: "/tracecar/trace_filter"}); status != 200 {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	if !tr.Filter().IsZero() {
		t.Errorf("DELETE left %+v", tr.Filter())
	}
	if status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/trace_filter"}); status != 200 || body != "{}" {
		t.Errorf("GET after DELETE: %d %s", status, body)
	}
}
