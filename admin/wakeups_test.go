package admin_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
)

// TestServerStartsNoClockGoroutine checks that answering requests, well-formed or not,
// leaves no goroutine that wakes the process every second: fasthttp's Date header comes
// from one (fasthttp.updateServerDate), started by the first response that has the header
// and never stopped, which was an idle sidecar's most frequent wake-up.
func TestServerStartsNoClockGoroutine(t *testing.T) {
	f := mustServe(t, admin.Config{Tracer: newFakeTracer()})
	for _, path := range []string{"/healthz", "/no/such/path"} {
		resp, err := client.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if d := resp.Header.Get("Date"); d != "" {
			t.Fatalf("GET %s: Date %q; want none (the header that costs the goroutine)", path, d)
		}
	}
	r := request{method: "POST", path: "/storage_service/slow_query", body: "enable=maybe"}
	if status, _ := do(t, client, f.url, r); status != http.StatusBadRequest {
		t.Fatalf("%v: status %d; want 400", r, status)
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "fasthttp.updateServerDate") {
		t.Fatal("a goroutine runs fasthttp.updateServerDate: it wakes the process every second for its Date header")
	}
}
