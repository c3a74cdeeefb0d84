package ctl_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
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
	s := admin.New(admin.Config{}, nil, reg, admin.WithStatements(st), admin.WithMetrics(m), admin.WithQueries(q))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	tb.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), st, m
}

// TestTopPlainLines runs top with stdout not a terminal against two live admin APIs that
// see load: it prints plain lines, one refresh after another, with both hosts, the
// statements by their share of the interval's time, op/s that agree with the statements'
// calls/s, and the requests in flight.
func TestTopPlainLines(t *testing.T) {
	a, sa, ma := mustTopSidecar(t, "SELECT v FROM ks.slow WHERE k = ?")
	b, sb, mb := mustTopSidecar(t, "SELECT v FROM ks.slower WHERE k = ?")
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			for _, h := range []struct {
				st *statements.Stats
				m  *metrics.Metrics
			}{{sa, ma}, {sb, mb}} {
				calls(h.st, "INSERT INTO ks.t (k) VALUES (?)", 20, 50, 0)
				calls(h.st, "SELECT v FROM ks.t WHERE k = ?", 5, 400, 0)
				for i := range 25 {
					h.m.Request(cql.OpQuery)
					h.m.Latency(cql.OpQuery, time.Duration(50+350*(i/20))*time.Microsecond)
				}
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
