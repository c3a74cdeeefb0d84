package admin_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tracecar/tracecar/admin"
)

// TestNodeUpMetric checks that each scrape runs the readiness check: tracecar_node_up is 1
// while the node answers and 0 once it does not, and a server without a check has none.
func TestNodeUpMetric(t *testing.T) {
	var down atomic.Bool
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Ready: func(ctx context.Context) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}})
	scrape := func(base string) string {
		t.Helper()
		status, body := do(t, client, base, request{method: "GET", path: "/metrics"})
		if status != 200 {
			t.Fatalf("GET /metrics: %d", status)
		}
		return body
	}
	if body := scrape(f.url); !strings.Contains(body, "\ntracecar_node_up 1\n") {
		t.Errorf("node answering: no tracecar_node_up 1 in\n%s", body)
	}
	down.Store(true)
	if body := scrape(f.url); !strings.Contains(body, "\ntracecar_node_up 0\n") {
		t.Errorf("node refusing: no tracecar_node_up 0 in\n%s", body)
	}
	bare := mustServe(t, admin.Config{Tracer: newFakeTracer()})
	if body := scrape(bare.url); strings.Contains(body, "tracecar_node_up") {
		t.Error("a server without a readiness check reports tracecar_node_up")
	}
}
