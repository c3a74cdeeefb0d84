package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/testkit/smalldisk"
)

// TestSidecarAuditFullDisk runs `tracecar sidecar --audit-dir` on a real full disk (a 64
// KiB tmpfs) under --audit-policy drop: admin changes go on, /readyz answers 503 saying
// that the file sink fails for want of space, /metrics counts the drops; once space is
// freed the sidecar is ready again, and at stop the file holds the records written since.
func TestSidecarAuditFullDisk(t *testing.T) {
	mnt, filler := smalldisk.Full(t)
	dir := filepath.Join(mnt, "audit")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "warn",
			"--audit-dir", dir, "--audit-policy", "drop", "--audit-queue", "1", "--audit-categories", "ADMIN"}, pw, io.Discard)
		pw.Close()
	}()
	m := awaitLine(t, pr, regexp.MustCompile(`admin API (\S+)`))
	if m == nil {
		cancel()
		t.Fatalf("no address line (exit %d)", <-done)
	}
	api := m[1]
	call := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, api+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := range 20 {
		if code, body := call("POST", "/storage_service/trace_probability?probability=0.00"+string(rune('1'+i%9))); code != 200 {
			t.Fatalf("change %d: %d %s", i, code, body)
		}
	}
	waitUntil(t, func() bool { code, _ := call("GET", "/readyz"); return code == 503 })
	code, body := call("GET", "/readyz")
	if code != 503 || !strings.Contains(body, "audit sink file failing") || !strings.Contains(body, "no space left on device") {
		t.Errorf("/readyz on a full disk: %d %s", code, body)
	}
	_, metrics := call("GET", "/metrics")
	if d := regexp.MustCompile(`tracecar_audit_dropped_total\{sink="file"\} (\d+)`).FindStringSubmatch(metrics); d == nil || d[1] == "0" {
		t.Errorf("tracecar_audit_dropped_total{sink=\"file\"}: %v; want drops counted", d)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { code, _ := call("GET", "/readyz"); return code == 200 })
	call("POST", "/storage_service/slow_query?enable=true&threshold=123000")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
	files, _ := audit.Files(dir)
	var all bytes.Buffer
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all.Write(b)
	}
	if !strings.Contains(all.String(), "POST /storage_service/slow_query?enable=true&threshold=123000") {
		t.Errorf("the file lacks the change made once space was freed:\n%s", all.String())
	}
}

// TestSidecarAuditFlags: bad --audit-* values are usage errors (exit 2) naming the flag; a
// directory that cannot be made is a runtime error (exit 1) naming it.
func TestSidecarAuditFlags(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--audit-policy", "maybe"}, exitUsage, "--audit-policy: \"maybe\": want block"},
		{[]string{"--audit-fsync", "0s"}, exitUsage, "--audit-fsync must be a positive duration"},
		{[]string{"--audit-max-files", "0"}, exitUsage, "--audit-max-files must be 1 or more"},
		{[]string{"--audit-categories", "DML,ALL"}, exitUsage, "--audit-categories \"DML,ALL\": want category names"},
		{[]string{"--audit-tables", "carts"}, exitUsage, "--audit-tables \"carts\": want keyspace.table"},
		{[]string{"--audit-exclude-users", "a,,b"}, exitUsage, "--audit-exclude-users"},
		{[]string{"--audit-max-file-size", "1KiB"}, exitUsage, "audit-max-file-size: 1KiB is out of range"},
		{[]string{"--audit-dir", filepath.Join(notDir, "sub")}, exitRuntime, "--audit-dir " + filepath.Join(notDir, "sub")},
	} {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		code := run(ctx, append([]string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, tt.args...), &out, &errb)
		cancel()
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}

// awaitLine returns the submatches of the first line of r that matches re, and copies the
// rest of r away.
func awaitLine(tb testing.TB, r io.Reader, re *regexp.Regexp) []string {
	tb.Helper()
	sc := bufio.NewScanner(r)
	var m []string
	for m == nil && sc.Scan() {
		m = re.FindStringSubmatch(sc.Text())
	}
	go io.Copy(io.Discard, r)
	return m
}

func waitUntil(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("condition not met within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSidecarAuditFullDiskBlock runs `tracecar sidecar --audit-dir` on a real full disk
// under --audit-policy block: once the writer holds one record and the queue (1) another, an
// admin change waits for room; freed space lets it resume, answered 200, and every record
// is in the file, none dropped.
func TestSidecarAuditFullDiskBlock(t *testing.T) {
	mnt, filler := smalldisk.Full(t)
	dir := filepath.Join(mnt, "audit")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "warn",
			"--audit-dir", dir, "--audit-queue", "1", "--audit-categories", "ADMIN"}, pw, io.Discard)
		pw.Close()
	}()
	m := awaitLine(t, pr, regexp.MustCompile(`admin API (\S+)`))
	if m == nil {
		cancel()
		t.Fatalf("no address line (exit %d)", <-done)
	}
	api := m[1]
	post := func(path string) int {
		resp, err := http.Post(api+path, "", nil)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	metric := func(series string) string {
		resp, err := http.Get(api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if m := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\d+)`).FindStringSubmatch(string(b)); m != nil {
			return m[1]
		}
		return ""
	}
	// The writer takes the first record and fails on it; the second fills the queue.
	post("/storage_service/trace_probability?probability=0.001")
	waitUntil(t, func() bool { return metric(`tracecar_audit_sink_up{sink="file"}`) == "0" })
	post("/storage_service/trace_probability?probability=0.002")
	waited := make(chan int, 1)
	go func() { waited <- post("/storage_service/trace_probability?probability=0.003") }()
	waitUntil(t, func() bool { return metric(`tracecar_audit_waits_total{sink="file"}`) == "1" })
	select {
	case code := <-waited:
		t.Fatalf("the change with the disk full and the queue full was answered (%d) before space was freed", code)
	default:
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if code := <-waited; code != 200 {
		t.Fatalf("the change that waited: %d; want 200", code)
	}
	waitUntil(t, func() bool { return metric(`tracecar_audit_written_total{sink="file"}`) == "3" })
	if d := metric(`tracecar_audit_dropped_total{sink="file"}`); d != "0" {
		t.Errorf("dropped %s under block; want 0", d)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
	files, _ := audit.Files(dir)
	var all bytes.Buffer
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all.Write(b)
	}
	for _, p := range []string{"0.001", "0.002", "0.003"} {
		if n := strings.Count(all.String(), "probability="+p+`"`); n != 1 {
			t.Errorf("the change to %s is in the file %d times; want once:\n%s", p, n, all.String())
		}
	}
}
