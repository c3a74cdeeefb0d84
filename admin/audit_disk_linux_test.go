package admin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/testkit/smalldisk"
)

// TestAuditFullDiskDrop: the file sink on a real full disk (a 64 KiB tmpfs) under drop:
// changes go on without waiting, every record lost is counted in the status and in
// /metrics, and /readyz answers 503 saying why; once space is freed it is ready again.
func TestAuditFullDiskDrop(t *testing.T) {
	mnt, filler := smalldisk.Full(t)
	fs, err := audit.NewFile(audit.FileConfig{Dir: filepath.Join(mnt, "audit")})
	if err != nil {
		t.Fatal(err)
	}
	l := audit.Open(audit.Config{Policy: audit.Drop, Queue: 2, Retry: 5 * time.Millisecond, Sinks: []audit.Sink{fs}})
	t.Cleanup(func() { l.Close(t.Context()) })
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Audit: l, Collectors: []prometheus.Collector{l.Collector()}})
	do(t, client, f.url, request{method: "POST", path: "/tracecar/audit?enable=true&categories=ADMIN"})
	// The writer tries the first record, and fails; while it retries, its queue (2) fills
	// and the changes that follow are dropped.
	deadline := time.Now().Add(10 * time.Second)
	for l.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	const n = 30
	for i := range n {
		if status, body := do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?threshold=" + strconv.Itoa(1000+i)}); status != 200 {
			t.Fatalf("change %d: %d %s", i, status, body)
		}
	}
	status, body := do(t, client, f.url, request{method: "GET", path: "/readyz"})
	if e := apiError(t, status, body); status != 503 || !strings.Contains(e.Message, "audit sink file failing") ||
		!strings.Contains(e.Message, "no space left on device") || !strings.Contains(e.Message, "policy drop") {
		t.Errorf("/readyz on a full disk: %d %q; want 503 saying the file sink fails for want of space", status, e.Message)
	}
	_, body = do(t, client, f.url, request{method: "GET", path: "/tracecar/status"})
	var st admin.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Audit == nil {
		t.Fatalf("status %s: %v", body, err)
	}
	if st.Audit.Dropped == 0 || st.Audit.Sinks[0].Dropped != st.Audit.Dropped || st.Audit.Sinks[0].State != "failing" {
		t.Errorf("status on a full disk: %+v; want drops counted and the sink failing", st.Audit)
	}
	_, metrics := do(t, client, f.url, request{method: "GET", path: "/metrics"})
	m := regexp.MustCompile(`tracecar_audit_dropped_total\{sink="file"\} (\d+)`).FindStringSubmatch(metrics)
	if m == nil || m[1] == "0" {
		t.Errorf("/metrics: tracecar_audit_dropped_total{sink=\"file\"} = %v; want more than 0", m)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for l.Err() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if status, body := do(t, client, f.url, request{method: "GET", path: "/readyz"}); status != 200 {
		t.Errorf("/readyz once space is freed: %d %s", status, body)
	}
}
