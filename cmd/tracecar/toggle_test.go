package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
)

// Sizes of TestConcurrentTogglesUnderLoad. The load is bounded by a count of operations.
// The togglers run until the load is done, each at least minToggles times, and are paced
// by the load's progress rather than by a clock: a toggle per toggleEvery INSERT-SELECT
// pairs of a worker, so that they spread over the whole load without starving it of CPU.
const (
	toggleLoadWorkers = 8
	toggleLoadOps     = 3000 // per worker, an INSERT or a SELECT each
	toggleWriters     = 8
	toggleEvery       = 4
	minToggles        = 20
)

// toggleProbabilities are the values the probability toggler cycles through; it ends on
// finalProbability, which no other request sets. They are low enough that the sessions
// sampled during the whole load, which reach the ring only once the node's events are
// fetched, could not push the tail's out of a ring of 1000 even if all came in late.
var toggleProbabilities = []float64{0, 0.01, 0.02, 0.005}

const (
	finalProbability = 0.25
	finalSidecarLvl  = "debug"
)

// slowQuery is what writer i posts at its iteration j: enable, fast and a threshold that
// is a function of both, so that a mix of two POSTs shows, and a ttl that names the POST,
// so that a POST that comes back after a later one of the same writer (a lost update)
// shows too.
func slowQuery(i, j int) tracing.Config {
	enable, fast := (i+j)%2 == 0, (i+j)%3 == 0
	b := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	return tracing.Config{Enable: enable, Fast: fast, ThresholdMicros: 1000 * (1 + 2*b(enable) + b(fast)), TTLSeconds: int64(i+1)*ttlPerWriter + int64(j)}
}

// ttlPerWriter spaces the ttls of the writers: writer i's are (i+1)*ttlPerWriter + j.
const ttlPerWriter = 100000

// slowQueryChecker checks the slow_query settings that one reader sees, in order.
type slowQueryChecker struct {
	seen []int // by writer: the last iteration seen, or -1
}

func newSlowQueryChecker() *slowQueryChecker {
	c := &slowQueryChecker{seen: make([]int, toggleWriters)}
	for i := range c.seen {
		c.seen[i] = -1
	}
	return c
}

// check reports an error unless the settings are the initial defaults, or what the POST
// that their ttl names sets, and that POST is not older than one seen before from its
// writer. It also returns the writer and the iteration, -1 for the defaults.
func (c *slowQueryChecker) check(enable, fast bool, threshold, ttl int64) (i, j int, err error) {
	def := tracing.DefaultConfig()
	if enable == def.Enable && fast == def.Fast && threshold == def.ThresholdMicros && ttl == def.TTLSeconds {
		return -1, -1, nil // no POST yet
	}
	i, j = int(ttl/ttlPerWriter)-1, int(ttl%ttlPerWriter)
	if i < 0 || i >= toggleWriters {
		return 0, 0, fmt.Errorf("enable=%t fast=%t threshold=%d ttl=%d: no POST sets that ttl", enable, fast, threshold, ttl)
	}
	want := slowQuery(i, j)
	if enable != want.Enable || fast != want.Fast || threshold != want.ThresholdMicros {
		return 0, 0, fmt.Errorf("enable=%t fast=%t threshold=%d ttl=%d: no single POST sets that; writer %d's POST %d sets enable=%t fast=%t threshold=%d",
			enable, fast, threshold, ttl, i, j, want.Enable, want.Fast, want.ThresholdMicros)
	}
	if j < c.seen[i] {
		return 0, 0, fmt.Errorf("writer %d's POST %d is back after its POST %d was seen: an update was lost", i, j, c.seen[i])
	}
	c.seen[i] = j
	return i, j, nil
}

// TestConcurrentTogglesUnderLoad runs gocql load through the sidecar while several clients
// of the admin API toggle slow_query, trace_probability and the sidecar's log level, and a
// reader checks that the tracer never shows half of a slow_query change.
func TestConcurrentTogglesUnderLoad(t *testing.T) {
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	st, err := startStack(t.Context(), stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 1000}, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	var posts atomic.Int64
	admin := func() *adminClient { return newAdminClient(st.Admin, &posts) }

	s := mustSession(t, st.Sidecar)
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE toggles WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE toggles.kv (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	loadDone := make(chan struct{})
	ticks := make(chan struct{}, toggleWriters+2)
	var load sync.WaitGroup
	for w := range toggleLoadWorkers {
		load.Go(func() {
			for n := range toggleLoadOps / 2 {
				k, v := w*1000+n%50, fmt.Sprintf("w%d-%d", w, n)
				if err := s.Query("INSERT INTO toggles.kv (k, v) VALUES (?, ?)", k, v).Exec(); err != nil {
					t.Errorf("worker %d: INSERT %d: %v", w, n, err)
					return
				}
				var got string
				if err := s.Query("SELECT v FROM toggles.kv WHERE k = ?", k).Scan(&got); err != nil {
					t.Errorf("worker %d: SELECT %d: %v", w, n, err)
					return
				}
				if got != v {
					t.Errorf("worker %d: SELECT %d: got %q; want %q, just written", w, n, got, v)
					return
				}
				if n%toggleEvery == 0 {
					select {
					case ticks <- struct{}{}:
					default: // the togglers are behind: they need no more
					}
				}
			}
		})
	}
	go func() { load.Wait(); close(loadDone) }()

	// until is the loop condition of the togglers: it waits for the load's next tick, and
	// is true for at least minToggles rounds, then as long as the load runs.
	until := func(j int) bool {
		select {
		case <-ticks:
			return true
		case <-loadDone:
			return j < minToggles
		}
	}
	var toggles sync.WaitGroup
	last := make([]int, toggleWriters) // each writer's last iteration
	for i := range toggleWriters {
		toggles.Go(func() {
			c := admin()
			defer c.close()
			for j := 0; until(j); j++ {
				q := slowQuery(i, j)
				if err := c.post(fmt.Sprintf("/storage_service/slow_query?enable=%t&fast=%t&threshold=%d&ttl=%d",
					q.Enable, q.Fast, q.ThresholdMicros, q.TTLSeconds)); err != nil {
					t.Error(err)
					return
				}
				last[i] = j
			}
		})
	}
	toggles.Go(func() {
		c := admin()
		defer c.close()
		for j := 0; until(j); j++ {
			p := toggleProbabilities[j%len(toggleProbabilities)]
			if err := c.post("/storage_service/trace_probability?probability=" + strconv.FormatFloat(p, 'g', -1, 64)); err != nil {
				t.Error(err)
				return
			}
		}
		if err := c.post("/storage_service/trace_probability?probability=" + strconv.FormatFloat(finalProbability, 'g', -1, 64)); err != nil {
			t.Error(err)
		}
	})
	toggles.Go(func() {
		c := admin()
		defer c.close()
		for j := 0; until(j); j++ {
			if err := c.post("/system/logger/sidecar?level=" + []string{"debug", "info"}[j%2]); err != nil {
				t.Error(err)
				return
			}
		}
		if err := c.post("/system/logger/sidecar?level=" + finalSidecarLvl); err != nil {
			t.Error(err)
		}
	})

	togglesDone := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		c := admin()
		defer c.close()
		probs := append([]float64{finalProbability}, toggleProbabilities...)
		sq := newSlowQueryChecker()
		for reads := 0; ; reads++ {
			select {
			case <-togglesDone:
				t.Logf("the reader checked %d configurations", reads)
				return
			default:
			}
			cfg := st.tracer.Config()
			if _, _, err := sq.check(cfg.Enable, cfg.Fast, cfg.ThresholdMicros, cfg.TTLSeconds); err != nil {
				t.Errorf("tracer.Config: %v", err)
				return
			}
			if !slices.Contains(probs, cfg.Probability) {
				t.Errorf("tracer.Config: probability %v; nobody set it", cfg.Probability)
				return
			}
			var got struct {
				Enable    bool  `json:"enable"`
				TTL       int64 `json:"ttl"`
				Threshold int64 `json:"threshold"`
				Fast      bool  `json:"fast"`
			}
			if err := c.get("/storage_service/slow_query", &got); err != nil {
				t.Error(err)
				return
			}
			if _, _, err := sq.check(got.Enable, got.Fast, got.Threshold, got.TTL); err != nil {
				t.Errorf("GET /storage_service/slow_query: %v", err)
				return
			}
			var lvl string
			if err := c.get("/system/logger/sidecar", &lvl); err != nil {
				t.Error(err)
				return
			}
			if lvl != "info" && lvl != "debug" {
				t.Errorf("GET /system/logger/sidecar: %q; want info or debug", lvl)
				return
			}
		}
	}()

	toggles.Wait()
	close(togglesDone)
	<-readerDone
	<-loadDone
	t.Logf("%d POSTs beside %d CQL requests", posts.Load(), toggleLoadWorkers*toggleLoadOps)
	if t.Failed() {
		return
	}

	// The last change wins, and none was lost: the probability is the toggler's last value
	// although slow_query changes ran beside it, and slow_query is some writer's last POST.
	cfg := st.tracer.Config()
	if cfg.Probability != finalProbability {
		t.Errorf("probability after the toggles: got %v; want %v, the last one set", cfg.Probability, finalProbability)
	}
	if i, j, err := newSlowQueryChecker().check(cfg.Enable, cfg.Fast, cfg.ThresholdMicros, cfg.TTLSeconds); err != nil {
		t.Errorf("slow_query after the toggles: %v", err)
	} else if i < 0 || j != last[i] {
		t.Errorf("slow_query after the toggles is writer %d's POST %d; want a writer's last POST, one of %v", i, j, last)
	}
	if lvl, err := reg.Level(logs.Sidecar); err != nil || lvl != finalSidecarLvl {
		t.Errorf("sidecar log level after the toggles: got %q, %v; want %q", lvl, err, finalSidecarLvl)
	}

	c := admin()
	defer c.close()
	// Whatever the toggles left, fast mode with threshold 0 and no sampling records every
	// request before its response is forwarded, so the tail's sessions are in the ring
	// when its last response is in (see toggleProbabilities for the sampled ones).
	for _, path := range []string{"/storage_service/trace_probability?probability=0", "/storage_service/slow_query?enable=true&fast=true&threshold=0"} {
		if err := c.post(path); err != nil {
			t.Fatal(err)
		}
	}
	const tail, tailQuery = 10, "SELECT k, v FROM toggles.kv WHERE k = ?"
	for n := range tail {
		var k int
		var v string
		if err := s.Query(tailQuery, n).Scan(&k, &v); err != nil {
			t.Fatalf("%s after the toggles: %v", tailQuery, err)
		}
	}
	var sessions []struct {
		ID         string            `json:"session_id"`
		Command    string            `json:"command"`
		Mode       string            `json:"mode"`
		Parameters map[string]string `json:"parameters"`
	}
	if err := c.get("/tracecar/slow_log?limit=1000", &sessions); err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	tailSessions := 0
	for _, ss := range sessions {
		modes[ss.Mode]++
		if ss.Mode == tracing.ModeFast && ss.Command == "EXECUTE" && ss.Parameters["query"] == tailQuery {
			tailSessions++
		}
		switch ss.Mode {
		case tracing.ModeFast, tracing.ModeFull, tracing.ModeSampled:
		default:
			t.Errorf("session %s (%s): mode %q; want fast, full or sampled", ss.ID, ss.Command, ss.Mode)
		}
	}
	if tailSessions < tail {
		t.Errorf("slow log has %d fast EXECUTE sessions of %q; want %d, one per request made in fast mode with threshold 0", tailSessions, tailQuery, tail)
	}
	t.Logf("slow log: %d sessions by mode %v; node %s", len(sessions), modes, st.Node)
}

// mustSession connects gocql, in its default configuration, to the CQL address addr.
func mustSession(tb testing.TB, addr string) *gocql.Session {
	tb.Helper()
	host, port, _ := strings.Cut(addr, ":")
	c := gocql.NewCluster(host)
	c.Port = atoi(tb, port)
	s, err := c.CreateSession()
	if err != nil {
		tb.Fatalf("gocql through the sidecar %s: %v", addr, err)
	}
	return s
}

// adminClient is one goroutine's client of the admin API. Its single connection is dialled
// by the request that needs it and then reused, so that no connection ever sits unused:
// the admin server answers a connection that sends nothing within its read timeout with
// an unsolicited 400, which a request sent at that moment would take for its response.
type adminClient struct {
	base  string
	hc    *http.Client
	posts *atomic.Int64
}

func newAdminClient(base string, posts *atomic.Int64) *adminClient {
	return &adminClient{base: base, hc: &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}, posts: posts}
}

func (c *adminClient) close() { c.hc.CloseIdleConnections() }

// post sends a POST without a body and fails unless the answer is 200.
func (c *adminClient) post(path string) error {
	c.posts.Add(1)
	resp, err := c.hc.Post(c.base+path, "", nil)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: got %s (%s); want 200", path, resp.Status, body)
	}
	return nil
}

// get decodes the JSON answer to a GET into v, and fails unless it is a 200.
func (c *adminClient) get(path string, v any) error {
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: got %s (%s); want 200", path, resp.Status, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
