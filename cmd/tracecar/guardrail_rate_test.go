package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/tracing/guardrail"
)

// pacedLoad sends gocql requests through the sidecar at a fixed rate, each at its
// scheduled time, from a few workers, until stop.
type pacedLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ops    atomic.Int64
	err    atomic.Value
}

func startPaced(s *gocql.Session, rate float64) *pacedLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &pacedLoad{cancel: cancel}
	start := time.Now()
	var next atomic.Int64
	for w := range 16 {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				k := next.Add(1) - 1
				if d := time.Until(start.Add(time.Duration(float64(k) / rate * float64(time.Second)))); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				if err := s.Query("INSERT INTO guard.kv (k, v) VALUES (?, ?)", w*100000+int(k%100), "v").Exec(); err != nil {
					l.err.Store(err)
					return
				}
				l.ops.Add(1)
			}
		})
	}
	return l
}

func (l *pacedLoad) stop(tb testing.TB) {
	tb.Helper()
	l.cancel()
	l.wg.Wait()
	if err, _ := l.err.Load().(error); err != nil {
		tb.Fatalf("load: %v", err)
	}
}

// guardStatus reads the guardrail's state from /tracecar/status.
func guardStatus(tb testing.TB, c *adminClient) guardrail.Status {
	tb.Helper()
	var st struct {
		Guardrail guardrail.Status `json:"guardrail"`
	}
	if err := c.get("/tracecar/status", &st); err != nil {
		tb.Fatal(err)
	}
	return st.Guardrail
}

// stepSince returns the guardrail's last action if it is a step taken after since.
func stepSince(st guardrail.Status, since time.Time) *guardrail.ActionJSON {
	if a := st.LastAction; a != nil && a.Kind == "step" && a.At.After(since) {
		return a
	}
	return nil
}

// untilWindows polls the guardrail until it has judged n windows since its last change, or
// stepped down after since, and returns the figures of each window seen on the way.
func untilWindows(tb testing.TB, c *adminClient, n int, since time.Time) (guardrail.Status, []guardrail.Figures) {
	tb.Helper()
	var figs []guardrail.Figures
	last := -1
	deadline := time.Now().Add(time.Duration(n+3) * guardWindow * 2)
	for {
		st := guardStatus(tb, c)
		if st.Windows != last && st.Figures != nil {
			last = st.Windows
			figs = append(figs, *st.Figures)
			tb.Logf("window %d at %s: %d requests (%.0f op/s), cpu %.2f%% ± %.2f (%s: %s), %.1f µs per request; state %s",
				st.Windows, st.Level, st.Figures.Requests, st.Figures.RatePerSec, st.Figures.CPUPercent, st.Figures.CPUErrPercent,
				st.Figures.CPUMethod, st.Figures.CPUFrom, st.Figures.CPUPerRequestUS, st.State)
		}
		if st.Windows >= n || stepSince(st, since) != nil {
			return st, figs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("waited for %d guardrail windows; status %+v", n, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// guardWindow is the guardrail's window in TestGuardrailComparesLikeWithLike: long enough
// for 50 op/s to fill guardrail.MinCPURequests.
const guardWindow = 3 * time.Second

// TestGuardrailComparesLikeWithLike runs the two scenarios through a node and a
// sidecar started as processes, with gocql load at fixed rates and a 5% CPU budget in 3 s
// windows. First, tracing off at 50 op/s, where a request costs the sidecar about a
// millisecond of fixed costs spread thin, then full mode at threshold 0 with probability
// 0.1 at 1,000 op/s: against the off windows at 50 op/s tracing looked free (cpu_pct 0,
// state ok, full mode kept); now the guardrail compares with no window at another rate, and
// steps down within 3 windows. Then its mirror, on a budget set afresh: off at 1,000 op/s,
// then the same tracing at 50 op/s, where it is cheap: no step, on the difference of rate
// or otherwise.
func TestGuardrailComparesLikeWithLike(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	// A collection in a quiet window (50 op/s) weighs tens of % of its CPU, more under the
	// race detector, and makes the figure too uncertain: collect less often, for the
	// scenarios are about the rate.
	t.Setenv("GOGC", "400")
	n, why := defaultMemoryLimit() // loadcheck's default for its node
	st, err := startChildren(t.Context(), &memoryLimit{n: n, why: why}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop(false)
	var posts atomic.Int64
	c := newAdminClient(st.admin, &posts)
	defer c.close()
	s := mustSession(t, st.sidecar)
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS guard WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS guard.kv (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	budget := "/tracecar/guardrail?cpu=5&window=" + guardWindow.String() + "&cooldown=1h&restore=false"
	tracingOn := []string{"/storage_service/slow_query?enable=true&fast=false&threshold=0", "/storage_service/trace_probability?probability=0.1"}
	// Full mode at its default threshold records nothing under it: cheap.
	cheapTracing := []string{"/storage_service/slow_query?enable=true&fast=false&threshold=500000"}
	tracingOff := []string{"/storage_service/slow_query?enable=false&threshold=500000", "/storage_service/trace_probability?probability=0"}
	posts2 := func(paths ...string) {
		t.Helper()
		for _, p := range paths {
			if err := c.post(p); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("off at 50 op/s, then full at 1000", func(t *testing.T) {
		posts2(tracingOff...)
		l := startPaced(s, 50)
		posts2(budget) // the figures start afresh
		untilWindows(t, c, 2, time.Now())
		l.stop(t)
		l = startPaced(s, 1000)
		defer l.stop(t)
		on := time.Now()
		posts2(tracingOn...)
		o, _ := untilWindows(t, c, 3, on)
		if a := stepSince(o, on); a == nil || a.From != "full+sampled" || o.Windows > 3 {
			t.Fatalf("status %+v, last action %+v; want a step down from full+sampled within 3 windows", o, a)
		}
		if f := o.Figures; f.CPUMethod == "measured" {
			t.Errorf("stepped on a figure %+v measured against off windows at 50 op/s; want one from no window at another rate", f)
		}
	})

	t.Run("off at 1000 op/s, then full at 50", func(t *testing.T) {
		posts2(tracingOff...)
		l := startPaced(s, 1000)
		posts2(budget)
		untilWindows(t, c, 2, time.Now())
		l.stop(t)
		l = startPaced(s, 50)
		defer l.stop(t)
		on := time.Now()
		posts2(cheapTracing...)
		o, figs := untilWindows(t, c, 4, on)
		if stepSince(o, on) != nil || o.State != "ok" || o.Level != "full" {
			t.Fatalf("status %+v, last action %+v; want ok at full, never a step", o, o.LastAction)
		}
		for _, f := range figs {
			if f.CPUMethod == "measured" && f.CPUPercent > 0 && f.RatePerSec < 100 {
				t.Errorf("window %+v measured against off windows at 1,000 op/s", f)
			}
		}
	})

	// A budget smaller than the figure's error: the figure is unknown, and the guardrail
	// fails closed on it, saying so in its state.
	t.Run("an error larger than the budget", func(t *testing.T) {
		posts2(tracingOff...)
		l := startPaced(s, 1000)
		defer l.stop(t)
		posts2("/tracecar/guardrail?cpu=0.05&window=1s&cooldown=1h&restore=false")
		posts2(tracingOn...)
		deadline := time.Now().Add(30 * time.Second)
		for {
			o := guardStatus(t, c)
			if f := o.Figures; o.State == "fail_closed" {
				if !f.FailClosed || f.CPUPercent != -1 || f.CPUMethod != "unknown" || f.CPUErrPercent <= 0.05 ||
					!strings.HasPrefix(f.CPUFrom, "too uncertain") || !strings.Contains(o.Detail, "failing closed") {
					t.Errorf("fail_closed with figures %+v, detail %q; want an unknown figure whose error is over the budget", f, o.Detail)
				}
				t.Logf("fail_closed: %s", o.Detail)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no fail_closed state within 30s; last status %+v, figures %+v", o, o.Figures)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
