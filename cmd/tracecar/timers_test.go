package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
)

// postAnswer sends a POST and returns its status, its TimerHeader and its body.
func postAnswer(tb testing.TB, base, path string) (int, string, string) {
	tb.Helper()
	resp, err := http.Post(base+path, "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(admin.TimerHeader), string(b)
}

// toggles is what the toggles of TestToggleTimers set, as the admin API's GETs read it.
type toggles struct {
	sq     admin.SlowQuery
	prob   float64
	logger string // the sidecar logger's level
}

func readToggles(tb testing.TB, c *adminClient) toggles {
	tb.Helper()
	var t toggles
	for _, r := range []struct {
		path string
		v    any
	}{{"/storage_service/slow_query", &t.sq}, {"/storage_service/trace_probability", &t.prob}, {"/system/logger/sidecar", &t.logger}} {
		if err := c.get(r.path, r.v); err != nil {
			tb.Fatal(err)
		}
	}
	return t
}

// timersOf reads the timers of /tracecar/status.
func timersOf(tb testing.TB, c *adminClient) []admin.Timer {
	tb.Helper()
	var st admin.Status
	if err := c.get("/tracecar/status", &st); err != nil {
		tb.Fatal(err)
	}
	return st.Timers
}

// waitToggles polls until cond holds, for up to 20 s.
func waitToggles(tb testing.TB, c *adminClient, what string, cond func(toggles) bool) toggles {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		t := readToggles(tb, c)
		if cond(t) {
			return t
		}
		if time.Now().After(deadline) {
			tb.Fatalf("waited 20s for %s; last seen %+v", what, t)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestToggleTimers checks the toggles' for=DURATION on a sidecar with its admin API:
// slow_query, trace_probability and a logger set for 3 s, then a later change of the
// threshold: once the time is up the three are back as they were, the later threshold
// kept; each expiry is counted and logged. A bad for is a 400 that names it, and changes
// nothing. ctl slow-query --for reverts, and --toggle-max-duration gives a costly toggle
// sent without for a timer, saying so in the answer.
func TestToggleTimers(t *testing.T) {
	logBuf := &lockedBuffer{}
	reg, err := logs.New(logs.Config{Format: "json", Writer: logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	st, err := startStack(t.Context(), stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 100, ToggleMaxDuration: 2 * time.Second}, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	var posts atomic.Int64
	c := newAdminClient(st.Admin, &posts)
	defer c.close()
	before := readToggles(t, c)

	t.Run("a bad for", func(t *testing.T) {
		for _, p := range []string{
			"/storage_service/slow_query?enable=true&fast=false&for=abc",
			"/storage_service/slow_query?enable=true&for=-5s",
			"/storage_service/slow_query?threshold=0&for=0",
			"/storage_service/slow_query?enable=true&for=169h",
			"/storage_service/trace_probability?probability=0.5&for=abc",
			"/system/logger/sidecar?level=debug&for=-5s",
			"/system/logger?level=trace&for=0",
			"/tracecar/trace_filter?keyspace=ks&for=abc",
			"/tracecar/statement_stats?enable=false&for=0",
		} {
			code, timer, body := postAnswer(t, st.Admin, p)
			if code != http.StatusBadRequest || !strings.Contains(body, "bad for") || !strings.Contains(body, "168h") || timer != "" {
				t.Errorf("POST %s: %d %q (timer %q); want a 400 naming for and what it takes", p, code, body, timer)
			}
		}
		if got := readToggles(t, c); got != before {
			t.Errorf("after the refused toggles: %+v; want nothing changed from %+v", got, before)
		}
		if ts := timersOf(t, c); len(ts) != 0 {
			t.Errorf("timers %+v; want none", ts)
		}
	})

	t.Run("for=3s, and a later threshold", func(t *testing.T) {
		for _, p := range []string{
			"/storage_service/slow_query?enable=true&fast=false&threshold=0&for=3s",
			"/storage_service/trace_probability?probability=0.5&for=3s",
			"/system/logger/sidecar?level=debug&for=3s",
		} {
			code, timer, body := postAnswer(t, st.Admin, p)
			if code != http.StatusOK || !strings.Contains(timer, "(for=3s)") {
				t.Fatalf("POST %s: %d %s, timer %q; want 200 with a timer of 3s", p, code, body, timer)
			}
		}
		if err := c.post("/storage_service/slow_query?threshold=1000"); err != nil {
			t.Fatal(err)
		}
		on := readToggles(t, c)
		if !on.sq.Enable || on.sq.Fast || on.sq.Threshold != 1000 || on.prob != 0.5 || on.logger != "debug" {
			t.Fatalf("after the toggles: %+v; want full mode, threshold 1000, probability 0.5, debug", on)
		}
		ts := timersOf(t, c)
		var settings []string
		for _, tm := range ts {
			for _, s := range tm.Settings {
				settings = append(settings, s.Setting+"="+s.RevertTo)
			}
		}
		want := "slow_query.enable=false slow_query.fast=false trace_probability=0 logger sidecar=" + before.logger
		if got := strings.Join(settings, " "); len(ts) != 3 || got != want {
			t.Errorf("timers %+v: %q; want 3 timers putting back %q, the threshold's part dropped", ts, got, want)
		}
		after := waitToggles(t, c, "the timers' expiry", func(g toggles) bool {
			return !g.sq.Enable && g.prob == before.prob && g.logger == before.logger
		})
		if after.sq.Threshold != 1000 || after.sq.Fast != before.sq.Fast || after.sq.TTL != before.sq.TTL {
			t.Errorf("after the expiry: %+v; want as before %+v, with the later threshold 1000 kept", after, before)
		}
		if ts := timersOf(t, c); len(ts) != 0 {
			t.Errorf("timers after the expiry %+v; want none", ts)
		}
		if n := strings.Count(logBuf.String(), "toggle timer expired"); n != 3 {
			t.Errorf("%d expiry lines in the admin log; want 3", n)
		}
		if n := metricSum(t, st.Admin, "tracecar_toggle_expiries_total"); n != 3 {
			t.Errorf("tracecar_toggle_expiries_total %v; want 3", n)
		}
	})

	t.Run("trace_filter, statement_stats and every logger", func(t *testing.T) {
		var stats0 admin.StatementStats
		if err := c.get("/tracecar/statement_stats", &stats0); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{
			"/tracecar/trace_filter?keyspace=shop&for=1s",
			"/tracecar/statement_stats?enable=" + fmt.Sprint(!stats0.Enabled) + "&for=1s",
			"/system/logger?level=warn&for=1s",
		} {
			if code, timer, body := postAnswer(t, st.Admin, p); code != http.StatusOK || !strings.Contains(timer, "(for=1s)") {
				t.Fatalf("POST %s: %d %s, timer %q; want 200 with a timer of 1s", p, code, body, timer)
			}
		}
		if g := readToggles(t, c); g.logger != "warn" {
			t.Fatalf("after POST /system/logger?level=warn: %+v", g)
		}
		waitToggles(t, c, "every logger to revert", func(g toggles) bool { return g.logger == before.logger })
		deadline := time.Now().Add(20 * time.Second)
		for {
			var f map[string]string
			var stats admin.StatementStats
			if err := c.get("/tracecar/trace_filter", &f); err != nil {
				t.Fatal(err)
			}
			if err := c.get("/tracecar/statement_stats", &stats); err != nil {
				t.Fatal(err)
			}
			if len(f) == 0 && stats.Enabled == stats0.Enabled && len(timersOf(t, c)) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("20s on: trace filter %v, statement stats %+v; want none and %v", f, stats, stats0.Enabled)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("ctl slow-query --for 2s", func(t *testing.T) {
		var out, errb bytes.Buffer
		code := run(t.Context(), []string{"ctl", "--hosts", st.Admin, "slow-query", "--enable", "--full", "--for", "2s"}, &out, &errb)
		if g := readToggles(t, c); code != exitOK || !g.sq.Enable || g.sq.Fast || !strings.Contains(out.String(), "reverts in 2s") {
			t.Fatalf("ctl: exit %d\n%s%s\nslow_query %+v; want full mode on, reverting in 2s", code, out.String(), errb.String(), g.sq)
		}
		out.Reset()
		if code := run(t.Context(), []string{"ctl", "--hosts", st.Admin, "status"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), `timer=slow_query.enable→"false",slow_query.fast→"false"@`) {
			t.Errorf("ctl status: exit %d\n%s; want the timer", code, out.String())
		}
		waitToggles(t, c, "ctl's change to revert", func(g toggles) bool { return !g.sq.Enable })
	})

	t.Run("--toggle-max-duration 2s", func(t *testing.T) {
		code, timer, body := postAnswer(t, st.Admin, "/storage_service/slow_query?enable=true&fast=true")
		if code != http.StatusOK || timer != "" {
			t.Fatalf("fast mode without for: %d %s, timer %q; want 200 and no timer: not costly", code, body, timer)
		}
		code, timer, body = postAnswer(t, st.Admin, "/storage_service/slow_query?fast=false")
		if code != http.StatusOK || !strings.Contains(timer, "for=2s, set by --toggle-max-duration") {
			t.Fatalf("full mode without for: %d %s, timer %q; want 200 and the 2s timer, saying why", code, body, timer)
		}
		if ts := timersOf(t, c); len(ts) != 1 || !ts[0].Imposed {
			t.Errorf("timers %+v; want one, imposed", ts)
		}
		g := waitToggles(t, c, "full mode to revert", func(g toggles) bool { return g.sq.Fast })
		if !g.sq.Enable {
			t.Errorf("after the expiry: %+v; want fast mode back, as the user left it", g.sq)
		}
	})
}

// metricSum returns the sum of a metric's series at base's /metrics.
func metricSum(tb testing.TB, base, name string) float64 {
	tb.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
