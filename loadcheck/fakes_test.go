package loadcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/loadcheck/client"
)

// fakeAPI is an admin (or node) API with the Scylla-compatible endpoints that loadcheck
// reads and writes. It records every POST.
type fakeAPI struct {
	mu      sync.Mutex
	token   string
	enable  bool
	fast    bool
	thresh  int64
	ttl     int64
	prob    string
	follow  bool // follow_client_sampling
	loggers map[string]string
	posts   []string

	// The process behind the API, for /metrics: its CPU time and its added-latency
	// observations by bucket of fakeAddedBounds (the last one +Inf).
	cpuNS int64
	added [len(fakeAddedBounds) + 1]uint64
	// cpuPerOp is the CPU an operation through the sidecar costs in each tracing state
	// ("off", "fast", "full"); nil serves no /metrics (404).
	cpuPerOp map[string]time.Duration
}

// fakeAddedBounds are the buckets of the fake's added-latency histogram, in seconds.
var fakeAddedBounds = [...]float64{1e-6, 5e-6, 1e-5, 5e-5, 1e-4}

// tracing returns the tracing state: off, fast or full. Call with a.mu held.
func (a *fakeAPI) tracing() string {
	switch {
	case !a.enable:
		return "off"
	case a.fast:
		return "fast"
	}
	return "full"
}

// op charges one operation through the sidecar, plus extra, to the process behind the API:
// its CPU, and as much added latency.
func (a *fakeAPI) op(extra time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cpuPerOp == nil {
		return
	}
	d := a.cpuPerOp[a.tracing()] + extra
	a.cpuNS += int64(d)
	i := 0
	for i < len(fakeAddedBounds) && d.Seconds() > fakeAddedBounds[i] {
		i++
	}
	a.added[i]++
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{enable: true, thresh: 123456, ttl: 3600, prob: "0.25",
		loggers: map[string]string{"sidecar": "warn", "node": "info", "admin": "error", "node:node": "info"}}
}

// state renders the current state, for comparisons.
func (a *fakeAPI) state() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("enable=%t fast=%t threshold=%d ttl=%d probability=%s sidecar=%s node=%s admin=%s node:node=%s",
		a.enable, a.fast, a.thresh, a.ttl, a.prob, a.loggers["sidecar"], a.loggers["node"], a.loggers["admin"], a.loggers["node:node"])
}

func (a *fakeAPI) postLog() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.posts...)
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" && r.Header.Get("Authorization") != "Bearer "+a.token {
		http.Error(w, `{"message":"unauthorized","code":401}`, http.StatusUnauthorized)
		return
	}
	q := r.URL.Query()
	bad := func(msg string) { http.Error(w, `{"message":"`+msg+`","code":400}`, http.StatusBadRequest) }
	parseBool := func(s string) (bool, bool) {
		switch strings.ToLower(s) {
		case "true", "1":
			return true, true
		case "false", "0":
			return false, true
		}
		return false, false
	}
	if r.Method == http.MethodPost {
		a.posts = append(a.posts, r.URL.Path+"?"+r.URL.RawQuery)
	}
	switch {
	case r.URL.Path == "/metrics" && r.Method == http.MethodGet && a.cpuPerOp != nil:
		fmt.Fprintf(w, "# TYPE tracecar_process_cpu_seconds_total counter\ntracecar_process_cpu_seconds_total %g\n", float64(a.cpuNS)/1e9)
		fmt.Fprintf(w, "# TYPE tracecar_added_latency_seconds histogram\n")
		var cum uint64
		for i, b := range fakeAddedBounds {
			cum += a.added[i]
			fmt.Fprintf(w, "tracecar_added_latency_seconds_bucket{le=\"%g\"} %d\n", b, cum)
		}
		cum += a.added[len(fakeAddedBounds)]
		fmt.Fprintf(w, "tracecar_added_latency_seconds_bucket{le=\"+Inf\"} %d\ntracecar_added_latency_seconds_sum 0\ntracecar_added_latency_seconds_count %d\n", cum, cum)
	case r.URL.Path == pathSlowQuery && r.Method == http.MethodGet:
		json.NewEncoder(w).Encode(map[string]any{"enable": a.enable, "fast": a.fast, "threshold": a.thresh, "ttl": a.ttl})
	case r.URL.Path == pathSlowQuery && r.Method == http.MethodPost:
		if v := q.Get("enable"); v != "" {
			b, ok := parseBool(v)
			if !ok {
				bad("enable")
				return
			}
			a.enable = b
		}
		if v := q.Get("fast"); v != "" {
			b, ok := parseBool(v)
			if !ok {
				bad("fast")
				return
			}
			a.fast = b
		}
		if v := q.Get("threshold"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				bad("threshold")
				return
			}
			a.thresh = n
		}
		if v := q.Get("ttl"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				bad("ttl")
				return
			}
			a.ttl = n
		}
	case r.URL.Path == pathTraceContext && r.Method == http.MethodGet:
		json.NewEncoder(w).Encode(map[string]any{"follow_client_sampling": a.follow, "keys": []string{"traceparent"}})
	case r.URL.Path == pathTraceContext && r.Method == http.MethodPost:
		b, ok := parseBool(q.Get("follow_client_sampling"))
		if !ok {
			bad("follow_client_sampling")
			return
		}
		a.follow = b
	case r.URL.Path == pathProbability && r.Method == http.MethodGet:
		fmt.Fprint(w, a.prob)
	case r.URL.Path == pathProbability && r.Method == http.MethodPost:
		if _, err := strconv.ParseFloat(q.Get("probability"), 64); err != nil {
			bad("probability")
			return
		}
		a.prob = q.Get("probability")
	case r.URL.Path == pathLoggers && r.Method == http.MethodGet:
		names := []string{}
		for n := range a.loggers {
			names = append(names, n)
		}
		json.NewEncoder(w).Encode(names)
	case r.URL.Path == pathLoggers && r.Method == http.MethodPost:
		for n := range a.loggers {
			a.loggers[n] = q.Get("level")
		}
	case strings.HasPrefix(r.URL.Path, pathLoggers+"/"):
		name := strings.TrimPrefix(r.URL.Path, pathLoggers+"/")
		if _, ok := a.loggers[name]; !ok {
			http.Error(w, `{"message":"unknown logger","code":404}`, http.StatusNotFound)
			return
		}
		if r.Method == http.MethodGet {
			json.NewEncoder(w).Encode(a.loggers[name])
			return
		}
		a.loggers[name] = q.Get("level")
	default:
		http.NotFound(w, r)
	}
}

func mustFakeAPI(tb testing.TB) (*fakeAPI, string) {
	tb.Helper()
	a := newFakeAPI()
	srv := httptest.NewServer(a)
	tb.Cleanup(srv.Close)
	return a, srv.URL
}

// fakeDriver serves every target from memory. An operation on target addr advances the
// fake clock by costs[addr], plus jitter·k for the k-th session to that target, so that
// rounds differ a little. At one worker and a fixed operation count, a run's op rate is
// exactly 1/cost.
type fakeDriver struct {
	clk     *fakeClock
	costs   map[string]time.Duration
	jitter  time.Duration
	failOn  string // connecting to this target fails
	onConn  func(addr string)
	mu      sync.Mutex
	conns   map[string]int
	schemas int
	ctxs    map[string]bool // the trace contexts the workers' operations were built with
	// api, when set, is charged for every operation through fakeSidecar (see fakeAPI.op),
	// with cpuJitter·k more for the k-th session, so that rounds differ a little.
	api       *fakeAPI
	cpuJitter time.Duration
}

func (d *fakeDriver) connect(_ context.Context, _ *Config, addr string) (session, error) {
	if d.onConn != nil {
		d.onConn(addr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if addr == d.failOn {
		return nil, fmt.Errorf("connect to %s: refused", addr)
	}
	if d.conns == nil {
		d.conns = map[string]int{}
	}
	k := d.conns[addr]
	d.conns[addr]++
	cost, ok := d.costs[addr]
	if !ok {
		return nil, fmt.Errorf("no such target %s", addr)
	}
	fs := &fakeSession{d: d, cost: cost + time.Duration(k)*d.jitter}
	if addr == fakeSidecar && d.api != nil {
		fs.api, fs.extra = d.api, time.Duration(k%3)*d.cpuJitter
	}
	return fs, nil
}

type fakeSession struct {
	d     *fakeDriver
	cost  time.Duration
	api   *fakeAPI
	extra time.Duration
}

// Exec counts the schemas created.
func (s *fakeSession) Exec(_ context.Context, text string) error {
	if strings.HasPrefix(text, "CREATE KEYSPACE") {
		s.d.mu.Lock()
		s.d.schemas++
		s.d.mu.Unlock()
	}
	return nil
}

func (s *fakeSession) Client(_ int, tp []byte) client.Client {
	tc := TraceContextNone
	switch {
	case tp == nil:
	case bytes.HasSuffix(tp, []byte("-01")):
		tc = TraceContextSampled
	default:
		tc = TraceContextUnsampled
	}
	s.d.mu.Lock()
	if s.d.ctxs == nil {
		s.d.ctxs = map[string]bool{}
	}
	s.d.ctxs[tc] = true
	s.d.mu.Unlock()
	return fakeClient{s}
}

// fakeClient's every request costs its session's cost on the fake clock, and is charged
// to the fake API when the session is the sidecar's.
type fakeClient struct{ s *fakeSession }

func (c fakeClient) Prepare(context.Context, client.Stmt) (int, error) { return 0, nil }

func (c fakeClient) Query(context.Context, int, [][]byte) (int64, error) {
	c.op()
	return 1, nil
}

func (c fakeClient) Write(context.Context, int, [][]byte) error {
	c.op()
	return nil
}

func (c fakeClient) Batch(context.Context, byte, int, [][]byte, int, bool) error {
	c.op()
	return nil
}

func (c fakeClient) op() {
	c.s.d.clk.advance(c.s.cost)
	if c.s.api != nil {
		c.s.api.op(c.s.extra)
	}
}

func (s *fakeSession) Close() {}
