package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// The real OpenTelemetry backends of the end-to-end tests are built from tools/ by .ci/run,
// which passes their paths in these variables. Without them the tests skip, unless
// TRACECAR_REQUIRE_DRIVERS is set (CI), where they fail.
const (
	jaegerEnv   = "TRACECAR_JAEGER"
	otelrecvEnv = "TRACECAR_OTELRECV"
)

// mustTool returns the binary named by the environment variable env, or skips or fails.
func mustTool(tb testing.TB, env, what string) string {
	tb.Helper()
	return drivertest.RequireEnvTool(tb, env, what+", which .ci/run builds from tools/ with scripts/build-tool.sh")
}

// freeAddrs returns n loopback addresses whose ports were free a moment ago: Jaeger binds
// its listeners from addresses in its configuration, not from listeners we could hand it.
func freeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	var lns []net.Listener
	var addrs []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// jaeger is a Jaeger v2 all-in-one with in-memory storage, on loopback only.
type jaeger struct {
	OTLPHTTP string // http://127.0.0.1:port, the OTLP base URL
	Query    string // http://127.0.0.1:port, the query API and UI
}

// jaegerConfig returns the path of tools/jaeger/config.yaml, which takes its listen
// addresses from the environment.
func jaegerConfig() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "tools", "jaeger", "config.yaml")
}

// mustJaeger starts Jaeger for the test and stops it after.
func mustJaeger(tb testing.TB) *jaeger {
	tb.Helper()
	bin := mustTool(tb, jaegerEnv, "Jaeger")
	var lastOut string
	for try := 0; try < 3; try++ {
		a := freeAddrs(tb, 3)
		out := &lockedBuffer{}
		cmd := exec.Command(bin, "--config", jaegerConfig())
		cmd.Env = append(os.Environ(), "JAEGER_QUERY_HTTP="+a[0], "JAEGER_QUERY_GRPC="+a[1], "JAEGER_OTLP_HTTP="+a[2], "JAEGER_UI_ASSETS=")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start Jaeger: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		j := &jaeger{OTLPHTTP: "http://" + a[2], Query: "http://" + a[0]}
		if waitReady(j, exited) {
			tb.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			return j
		}
		cmd.Process.Kill()
		<-exited
		lastOut = out.String()
	}
	tb.Fatalf("Jaeger did not start:\n%s", lastOut)
	return nil
}

// waitReady waits up to 60 s for Jaeger's query API and OTLP receiver.
func waitReady(j *jaeger, exited <-chan struct{}) bool {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(j.Query + "/api/services")
		if err != nil {
			continue
		}
		resp.Body.Close()
		c, err := net.Dial("tcp", strings.TrimPrefix(j.OTLPHTTP, "http://"))
		if resp.StatusCode == http.StatusOK && err == nil {
			c.Close()
			return true
		}
	}
	return false
}

// jaegerTrace is a trace as Jaeger's query API (/api/traces) returns it.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		OperationName string `json:"operationName"`
		StartTime     int64  `json:"startTime"` // µs
		Duration      int64  `json:"duration"`
		ProcessID     string `json:"processID"`
		Tags          []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
		Logs []struct {
			Timestamp int64 `json:"timestamp"`
			Fields    []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"fields"`
		} `json:"logs"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// tags returns span i's tags as strings.
func (t jaegerTrace) tags(i int) map[string]string {
	m := map[string]string{}
	for _, kv := range t.Spans[i].Tags {
		m[kv.Key] = fmt.Sprint(kv.Value)
	}
	return m
}

// traces asks Jaeger for the traces of service, filtered by q (operation, tags).
func (j *jaeger) traces(tb testing.TB, service string, q url.Values) []jaegerTrace {
	tb.Helper()
	if q == nil {
		q = url.Values{}
	}
	q.Set("service", service)
	q.Set("limit", "5000")
	q.Set("lookback", "1h")
	resp, err := http.Get(j.Query + "/api/traces?" + q.Encode())
	if err != nil {
		tb.Fatalf("Jaeger query API: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return nil // no such service yet
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("Jaeger /api/traces: %s: %s", resp.Status, body)
	}
	var out struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		tb.Fatalf("Jaeger /api/traces: %v: %s", err, body)
	}
	return out.Data
}

// waitTraces polls Jaeger for up to 60 s until it has at least n traces matching q.
func (j *jaeger) waitTraces(tb testing.TB, service string, q url.Values, n int) []jaegerTrace {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ts := j.traces(tb, service, q)
		if len(ts) >= n || time.Now().After(deadline) {
			return ts
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// otelrecv is the OpenTelemetry Collector's OTLP receiver (tools/otelrecv), gRPC only.
type otelrecv struct {
	Addr  string
	spans chan map[string]any
}

func mustOtelrecv(tb testing.TB) *otelrecv {
	tb.Helper()
	bin := mustTool(tb, otelrecvEnv, "otelrecv (the collector's OTLP receiver)")
	cmd := exec.Command(bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start otelrecv: %v", err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	r := &otelrecv{spans: make(chan map[string]any, 10000)}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	ready := make(chan string, 1)
	go func() {
		defer close(ready)
		defer close(r.spans)
		for lines.Scan() {
			l := lines.Text()
			if addr, ok := strings.CutPrefix(l, "listening "); ok {
				ready <- addr
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				r.spans <- m
			}
		}
	}()
	select {
	case r.Addr = <-ready:
	case <-time.After(60 * time.Second):
	}
	if r.Addr == "" {
		tb.Fatalf("otelrecv did not start: %s", stderr.String())
	}
	return r
}
