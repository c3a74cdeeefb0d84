package admin_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing/capture"
)

// TestCaptureEndpoints drives /tracecar/capture against a real Capture: a 400 naming the
// parameter for every bad request (which starts nothing), a start and its status, a 409
// for a second start, the values=keep warning in /tracecar/status, and a stop that
// returns the complete file.
func TestCaptureEndpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "captures")
	if err := capture.CheckDir(dir); err != nil {
		t.Fatal(err)
	}
	cp := capture.New(capture.Config{Dir: dir})
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Capture: cp})
	for _, tc := range []struct{ method, path, param string }{
		{"POST", "/tracecar/capture", "enable"},
		{"POST", "/tracecar/capture?enable=maybe", "enable"},
		{"POST", "/tracecar/capture?enable=true&duration=soon", "duration"},
		{"POST", "/tracecar/capture?enable=true&duration=-5s", "duration"},
		{"POST", "/tracecar/capture?enable=true&duration=100h", "duration"},
		{"POST", "/tracecar/capture?enable=true&max_bytes=1k", "max_bytes"},
		{"POST", "/tracecar/capture?enable=true&max_bytes=lots", "max_bytes"},
		{"POST", "/tracecar/capture?enable=true&values=all", "values"},
		{"POST", "/tracecar/capture?enable=false&values=keep", "values"},
		{"POST", "/tracecar/capture?enable=true&file=x", "file"},
		{"GET", "/tracecar/capture?state=1", "state"},
	} {
		status, body := do(t, client, f.url, request{method: tc.method, path: tc.path})
		e := apiError(t, status, body)
		if status != 400 || !strings.Contains(e.Message, tc.param) {
			t.Errorf("%s %s: %d %s; want a 400 naming %s", tc.method, tc.path, status, body, tc.param)
		}
	}
	if st := cp.Status(); st.State != "off" {
		t.Fatalf("a refused request started a capture: %+v", st)
	}
	get := func(path string) capture.Status {
		t.Helper()
		status, body := do(t, client, f.url, request{method: "GET", path: path})
		if status != 200 {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		var st capture.Status
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/capture?enable=true&duration=1m&max_bytes=1MiB&values=keep"})
	if status != 200 || !strings.Contains(body, `"state":"capturing"`) || !strings.Contains(body, capture.KeepWarning) {
		t.Fatalf("start: %d %s", status, body)
	}
	if st := get("/tracecar/capture"); st.State != "capturing" || st.MaxBytes != 1<<20 || st.DurationMS != 60000 || st.Values != "keep" {
		t.Errorf("status while capturing: %+v", st)
	}
	if status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/capture?enable=true"}); status != 409 {
		t.Errorf("second start: %d %s; want 409", status, body)
	}
	_, sbody := do(t, client, f.url, request{method: "GET", path: "/tracecar/status"})
	if !strings.Contains(sbody, `"capture":{"state":"capturing"`) || !strings.Contains(sbody, capture.KeepWarning) {
		t.Errorf("/tracecar/status lacks the capture and its warning: %s", sbody)
	}
	status, body = do(t, client, f.url, request{method: "POST", path: "/tracecar/capture?enable=false"})
	var st capture.Status
	if status != 200 || json.Unmarshal([]byte(body), &st) != nil || st.State != "off" || st.Last == nil || st.Last.Reason != "stopped" ||
		!strings.HasPrefix(st.Last.File, dir) {
		t.Fatalf("stop: %d %s", status, body)
	}

	none := mustServe(t, admin.Config{Tracer: newFakeTracer(), Capture: capture.New(capture.Config{})})
	if status, body := do(t, client, none.url, request{method: "POST", path: "/tracecar/capture?enable=true"}); status != 409 || !strings.Contains(body, "--capture-dir") {
		t.Errorf("start without a directory: %d %s; want 409 naming --capture-dir", status, body)
	}
}
