package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing/guardrail"
)

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// loadWorkers keeps every 1 s window of TestGuardrailEndToEnd above the guardrail's
// minimums (guardrail.MinCPURequests, MinLatencySamples) even on a busy machine under the
// race detector.
const loadWorkers = 16

// load runs gocql requests through the sidecar until stop is called.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ops    atomic.Int64
	err    atomic.Value
}

func startLoad(s *gocql.Session, workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	for w := range workers {
		l.wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				if err := s.Query("INSERT INTO guard.kv (k, v) VALUES (?, ?)", w*100000+n%100, "v").Exec(); err != nil {
					l.err.Store(err)
					return
				}
				l.ops.Add(1)
			}
		})
	}
	return l
}

func (l *load) stop(tb testing.TB) {
	tb.Helper()
	l.cancel()
	l.wg.Wait()
	if err, _ := l.err.Load().(error); err != nil {
		tb.Fatalf("load: %v", err)
	}
}

// observed is one look at what the admin API says is on.
type observed struct {
	level  string // from GET slow_query and trace_probability
	status guardrail.Status
}

func look(tb testing.TB, c *adminClient) observed {
	tb.Helper()
	var sq struct {
		Enable, Fast bool
	}
	var p float64
	var st struct {
		Guardrail guardrail.Status `json:"guardrail"`
	}
	// The status is read last, so that it is never older than the level read before it: a
	// step between the reads shows in both or in the status alone (a map's random order read
	// the status first at times, and a step between the reads then showed the new level
	// with the old status).
	for _, r := range []struct {
		path string
		v    any
	}{{"/storage_service/slow_query", &sq}, {"/storage_service/trace_probability", &p}, {"/tracecar/status", &st}} {
		if err := c.get(r.path, r.v); err != nil {
			tb.Fatal(err)
		}
	}
	level := "off"
	switch {
	case sq.Enable && sq.Fast:
		level = "fast"
	case sq.Enable:
		level = "full"
	case p > 0:
		level = "sampled"
	}
	if sq.Enable && p > 0 {
		level += "+sampled"
	}
	return observed{level, st.Guardrail}
}

// steps returns the sum of tracecar_guardrail_steps_total over the reasons of the steps
// from one level to another.
func steps(tb testing.TB, base, from, to string) float64 {
	tb.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var sum float64
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "tracecar_guardrail_steps_total{") ||
			!strings.Contains(line, `from="`+from+`"`) || !strings.Contains(line, `to="`+to+`"`) {
			continue
		}
		var v float64
		fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
		sum += v
	}
	return sum
}

// waitFor polls until cond holds, for up to 30 s, recording every distinct level and
// last action seen on the way.
func waitFor(tb testing.TB, c *adminClient, what string, cond func(observed) bool, levels, actions *[]string) observed {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o := look(tb, c)
		if levels != nil && (len(*levels) == 0 || (*levels)[len(*levels)-1] != o.level) {
			*levels = append(*levels, o.level)
		}
		if a := o.status.LastAction; actions != nil && a != nil {
			s := a.Kind + ":" + a.From + ">" + a.To
			if len(*actions) == 0 || (*actions)[len(*actions)-1] != s {
				*actions = append(*actions, s)
			}
		}
		if cond(o) {
			return o
		}
		if time.Now().After(deadline) {
			tb.Fatalf("waited 30s for %s; last seen %+v", what, o)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGuardrailEndToEnd runs gocql load through the sidecar in full mode with probability
// 0.5, threshold 0 (so that fast mode records sessions too: counted work, which the tiny
// CPU budget refuses, where a fast mode recording nothing costs no counted work and no
// garbage) and a tiny budget: the guardrail steps down to probability 0, then fast, then off,
// one step per window, in three windows; the slow_query GET, the status and the metrics
// show every step, and the tracing logger has one warning per step. Once the load stops,
// the user's mode comes back after the cooldown; a user POST made during a later cooldown
// is kept.
func TestGuardrailEndToEnd(t *testing.T) {
	logBuf := &lockedBuffer{}
	reg, err := logs.New(logs.Config{Format: "json", Writer: logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	budget := guardrail.Budget{AddedP99: time.Nanosecond, CPUPercent: 0.0001, Window: time.Second, Cooldown: 2 * time.Second, Restore: true}
	st, err := startStack(t.Context(), stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 1000, Guardrail: budget}, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	var posts atomic.Int64
	c := newAdminClient(st.Admin, &posts)
	defer c.close()
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE guard WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE guard.kv (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	l := startLoad(s, loadWorkers)
	for l.ops.Load() < 100 { // the load runs before tracing goes on
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.post("/storage_service/slow_query?enable=true&fast=false&threshold=0"); err != nil {
		t.Fatal(err)
	}
	if err := c.post("/storage_service/trace_probability?probability=0.5"); err != nil {
		t.Fatal(err)
	}
	var levels, actions []string
	o := waitFor(t, c, "tracing off", func(o observed) bool { return o.level == "off" }, &levels, &actions)
	l.stop(t)
	if got, want := strings.Join(levels, " "), "full+sampled full fast off"; got != want {
		t.Errorf("slow_query/trace_probability GETs showed %q; want %q", got, want)
	}
	if got, want := strings.Join(actions, " "), "step:full+sampled>full step:full>fast step:fast>off"; got != want {
		t.Errorf("status last_action went %q; want %q", got, want)
	}
	if o.status.State != "stepped_down" || o.status.UserLevel != "full+sampled" || o.status.RestoreDue == nil || o.status.Figures == nil {
		t.Errorf("status %+v; want stepped_down from full+sampled, with figures and a restore due", o.status)
	}
	if o.status.Windows != 3 {
		t.Errorf("off after %d windows; want 3 (one step per window)", o.status.Windows)
	}
	for _, step := range [][2]string{{"full+sampled", "full"}, {"full", "fast"}, {"fast", "off"}} {
		if n := steps(t, st.Admin, step[0], step[1]); n != 1 {
			t.Errorf("metrics: %v steps from %s to %s; want 1", n, step[0], step[1])
		}
	}
	var warnings []string
	for _, line := range strings.Split(logBuf.String(), "\n") {
		if strings.Contains(line, `"logger":"tracing"`) && strings.Contains(line, "stepped down") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 3 {
		t.Errorf("tracing logger has %d step warnings; want 3:\n%s", len(warnings), strings.Join(warnings, "\n"))
	} else if w := warnings[0]; !strings.Contains(w, `"level":"warn"`) || !strings.Contains(w, `"budget":"added_p99<=1ns cpu<=0.0001%"`) || !strings.Contains(w, `"cpu_pct":`) {
		t.Errorf("step warning %s; want a warning with the figures and the budget", w)
	}

	// The load has stopped: after the cooldown the user's mode comes back.
	o = waitFor(t, c, "the restore", func(o observed) bool { return o.level == "full+sampled" }, nil, nil)
	if a := o.status.LastAction; o.status.State != "ok" || a == nil || a.Kind != "restore" || a.Reason != "recovered" {
		t.Errorf("after the restore: status %+v; want ok with a restore", o.status)
	}
	if n := steps(t, st.Admin, "off", "full+sampled"); n != 1 {
		t.Errorf("metrics: %v restores; want 1", n)
	}

	// Load again until the first step, then a user's POST during the cooldown: it is kept.
	l = startLoad(s, loadWorkers)
	waitFor(t, c, "a step", func(o observed) bool { return o.status.State == "stepped_down" }, nil, nil)
	l.stop(t)
	if err := c.post("/storage_service/slow_query?enable=true&fast=true"); err != nil {
		t.Fatal(err)
	}
	if err := c.post("/storage_service/trace_probability?probability=0"); err != nil {
		t.Fatal(err)
	}
	o = look(t, c)
	if o.level != "fast" || o.status.State != "ok" || o.status.RestoreDue != nil {
		t.Fatalf("after the user's POST: %+v; want the user's fast, ok, no restore due", o)
	}
	// Wait past the cooldown and a few windows: the restore must not come back over it.
	waitFor(t, c, "windows past the cooldown", func(o observed) bool { return o.status.Windows >= 4 }, nil, nil)
	if o = look(t, c); o.level != "fast" || o.status.State != "ok" {
		t.Fatalf("past the cooldown: %+v; want the user's fast kept", o)
	}
	if n := steps(t, st.Admin, "off", "full+sampled") + steps(t, st.Admin, "full", "full+sampled"); n != 1 {
		t.Errorf("metrics: %v restores; want only the first", n)
	}
}

// TestNodeDebugThroughTheSidecar turns on the embedded node's per-request debug log with
// POST /system/logger/node:node on the sidecar.
func TestNodeDebugThroughTheSidecar(t *testing.T) {
	logBuf := &lockedBuffer{}
	reg, err := logs.New(logs.Config{Format: "json", Writer: logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	st, err := startStack(t.Context(), stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 100}, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	nodeRequests := func() int {
		n := 0
		for _, line := range strings.Split(logBuf.String(), "\n") {
			if strings.Contains(line, `"level":"debug","logger":"node"`) && strings.Contains(line, `"message":"request"`) {
				n++
			}
		}
		return n
	}
	query := func() {
		if err := s.Query("SELECT release_version FROM system.local").Exec(); err != nil {
			t.Fatal(err)
		}
	}
	query()
	if n := nodeRequests(); n != 0 {
		t.Fatalf("%d node request lines before the POST; want 0", n)
	}
	var posts atomic.Int64
	c := newAdminClient(st.Admin, &posts)
	defer c.close()
	var names []string
	if err := c.get("/system/logger", &names); err != nil || !strings.Contains(strings.Join(names, ","), "node:node") {
		t.Fatalf("GET /system/logger = %v, %v; want node:node listed", names, err)
	}
	if err := c.post("/system/logger/node:node?level=debug"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		query()
	}
	if n := nodeRequests(); n < 3 {
		t.Fatalf("%d node request lines after POST node:node?level=debug; want one per request:\n%s", n, logBuf.String())
	}
}
