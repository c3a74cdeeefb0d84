package ctl_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/admin/ctl"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing/statements"
)

// mustTopSidecar serves an admin API with statement statistics, request metrics and one
// request in flight, as a sidecar's: what top reads.
func mustTopSidecar(tb testing.TB, inflight string) (string, *statements.Stats, *metrics.Metrics) {
	tb.Helper()
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	st := statements.New(statements.Options{})
	st.SetEnabled(true)
	m := metrics.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	q := func(time.Duration, int) []admin.Query {
		return []admin.Query{{Client: "127.0.0.1:5000", Opcode: "QUERY", ElapsedUS: 1500, Statement: inflight}}
	}
	s := admin.New(admin.Config{Loggers: reg, Statements: st, Metrics: m, Queries: q})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	tb.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), st, m
}

// readGate stands between top and one host's admin API, so that what top reads of the host
// is exact: the load is added only while no reading is in flight, and a host's two readings
// of a refresh (/metrics and the statements, which top sends at once) are read from the
// backend together, from the same state, and answered together, when both are read. Then
// the operations and the calls top sees between two refreshes are the same count, and the
// two readings' times (the midpoints top takes) differ only by the scheduling of two
// requests sent at once, not by how long the backend took to answer each.
type readGate struct {
	backend  string
	mu       sync.Mutex
	inflight int             // readings received and not yet answered
	arrived  []chan struct{} // the readings of the refresh waiting for their pair to arrive
	read     []chan struct{} // the readings of the refresh waiting for their pair to be read
	client   *http.Client
}

// meet makes the two readings of a refresh wait for each other on *waiting.
func (g *readGate) meet(waiting *[]chan struct{}) {
	g.mu.Lock()
	c := make(chan struct{})
	*waiting = append(*waiting, c)
	if len(*waiting) == 2 {
		for _, w := range *waiting {
			close(w)
		}
		*waiting = nil
	}
	g.mu.Unlock()
	select {
	case <-c:
	case <-time.After(10 * time.Second): // a reading whose pair never came
	}
}

func (g *readGate) paired(r *http.Request) bool {
	return r.URL.Path == adminapi.PathMetrics || r.URL.Path == "/tracecar/statements" && r.URL.Query().Get("histogram") == "true"
}

// apply adds load when no reading is in flight, and says whether it did.
func (g *readGate) apply(load func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight > 0 {
		return false
	}
	load()
	return true
}

func (g *readGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	paired := g.paired(r)
	if paired {
		g.mu.Lock()
		g.inflight++
		g.mu.Unlock()
		g.meet(&g.arrived)
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, g.backend+r.URL.RequestURI(), r.Body)
	resp, err := g.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if paired {
		g.meet(&g.read)
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// mustGate serves a readGate in front of the admin API at backend and returns its address.
func mustGate(tb testing.TB, backend string) (string, *readGate) {
	tb.Helper()
	g := &readGate{backend: "http://" + backend, client: &http.Client{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: g}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close(); g.client.CloseIdleConnections() })
	return ln.Addr().String(), g
}

// TestTopPlainLines runs top with stdout not a terminal against two live admin APIs that
// see load: it prints plain lines, one refresh after another, with both hosts, the
// statements by their share of the interval's time, op/s that agree with the statements'
// calls/s, and the requests in flight. The load is added between readings (readGate), so
// that the calls and the operations of an interval are the same count: the rates differ
// only by the two readings' times, which top takes at once; the test is not a race between
// the load and the readings.
func TestTopPlainLines(t *testing.T) {
	sideA, sa, ma := mustTopSidecar(t, "SELECT v FROM ks.slow WHERE k = ?")
	sideB, sb, mb := mustTopSidecar(t, "SELECT v FROM ks.slower WHERE k = ?")
	a, ga := mustGate(t, sideA)
	b, gb := mustGate(t, sideB)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			for _, h := range []struct {
				g  *readGate
				st *statements.Stats
				m  *metrics.Metrics
			}{{ga, sa, ma}, {gb, sb, mb}} {
				h.g.apply(func() {
					calls(h.st, "INSERT INTO ks.t (k) VALUES (?)", 20, 50, 0)
					calls(h.st, "SELECT v FROM ks.t WHERE k = ?", 5, 400, 0)
					for i := range 25 {
						h.m.Request(cql.OpQuery)
						h.m.Latency(cql.OpQuery, time.Duration(50+350*(i/20))*time.Microsecond)
					}
				})
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var out bytes.Buffer
	cfg := ctl.Config{Hosts: []string{"http://" + a, "http://" + b},
		Command: ctl.Command{Name: ctl.Top, Interval: 300 * time.Millisecond, Count: 2}}
	err := ctl.Run(context.Background(), cfg, &out)
	stop.Store(true)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("\n%s", text)
	if n := strings.Count(text, " cluster hosts=2/2 "); n != 2 {
		t.Fatalf("%d cluster lines; want one per refresh, 2", n)
	}
	for _, h := range []string{a, b} {
		if !strings.Contains(text, " host="+h+" ") {
			t.Errorf("no line for host %s", h)
		}
	}
	ops := floats(t, text, `cluster .* ops_per_s=([0-9.]+)`)
	callRates := floats(t, text, `statements active=\d+ calls_per_s=([0-9.]+)`)
	for i := range ops {
		if ops[i] <= 0 || callRates[i] < 0.9*ops[i] || callRates[i] > 1.1*ops[i] {
			t.Errorf("refresh %d: %v op/s against %v statement calls/s; want them within 10%%", i, ops[i], callRates[i])
		}
	}
	first := regexp.MustCompile(`statement share=.* text="([^"]*)"`).FindAllStringSubmatch(text, 2)
	// A round takes the SELECT 5 × 400 µs and the INSERT 20 × 50 µs: the SELECT first.
	if len(first) != 2 || first[0][1] != "SELECT v FROM ks.t WHERE k = ?" || first[1][1] != "INSERT INTO ks.t (k) VALUES (?)" {
		t.Errorf("statements of the first refresh %q; want the SELECT, then the INSERT", first)
	}
	if p50 := floats(t, text, `cluster .* p50=([0-9.]+)µs`); p50[0] <= 0 || p50[0] > 100 {
		t.Errorf("cluster p50 %vµs; want within the first bucket (at most 100µs)", p50[0])
	}
	if !strings.Contains(text, `inflight host=`+b+` elapsed=1.50ms opcode=QUERY`) {
		t.Errorf("no in-flight line for host %s", b)
	}
}

func floats(t *testing.T, text, re string) []float64 {
	t.Helper()
	var out []float64
	for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(text, -1) {
		f, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		t.Fatalf("no %s in\n%s", re, text)
	}
	return out
}
