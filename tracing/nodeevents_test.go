package tracing

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// flakyNode fails a look that includes a session's first, reports a session unfinished
// at its second look and finished from its third on; it counts the looks and the reads of
// each session's events.
type flakyNode struct {
	mu       sync.Mutex
	looks    map[[16]byte]int
	reads    map[[16]byte]int
	finished int // Finished calls
	batches  int // the most ids in one call
}

func (f *flakyNode) Finished(_ context.Context, ids [][16]byte) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished++
	f.batches = max(f.batches, len(ids))
	done := make([]bool, len(ids))
	var err error
	for i, id := range ids {
		f.looks[id]++
		if f.looks[id] == 1 {
			err = errors.New("node busy")
		}
		done[i] = f.looks[id] >= 3
	}
	if err != nil {
		return nil, err
	}
	return done, nil
}

func (f *flakyNode) Events(_ context.Context, ids [][16]byte) ([][]Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = max(f.batches, len(ids))
	evs := make([][]Event, len(ids))
	for i, id := range ids {
		f.reads[id]++
		evs[i] = []Event{{Activity: "a", SourceElapsedUS: 1}, {Activity: "b", SourceElapsedUS: 2}}
	}
	return evs, nil
}

func newFlakyNode() *flakyNode {
	return &flakyNode{looks: map[[16]byte]int{}, reads: map[[16]byte]int{}}
}

// mustFetchAll offers n sessions to a fetcher on node and returns them once all are
// recorded.
func mustFetchAll(tb testing.TB, node NodeEventSource, n int) (*fetcher, []*Session) {
	tb.Helper()
	var mu sync.Mutex
	var got []*Session
	done := make(chan struct{})
	f := newFetcher(node, n, func(s *Session) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, s)
		if len(got) == n {
			close(done)
		}
	}, nil, nopLogger())
	for i := range n {
		s := &Session{ID: fmt.Sprint(i), Events: []Event{{Activity: EventSentToNode, Source: SourceSidecar}}}
		if !f.offer(s, [16]byte{byte(i), byte(i >> 8)}) {
			tb.Fatalf("offer %d refused", i)
		}
	}
	<-done
	if err := f.stop(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return f, got
}

// TestFetcherRetries checks that sessions wait for the node to finish its trace, across
// errors and unfinished traces, that each session's events are read once, when the node
// has finished it, and that every session is recorded once.
func TestFetcherRetries(t *testing.T) {
	node := newFlakyNode()
	const n = 20
	f, got := mustFetchAll(t, node, n) // the third look at each comes after about 300 ms
	if len(got) != n {
		t.Errorf("%d sessions recorded; want %d", len(got), n)
	}
	for _, s := range got {
		if fmt.Sprint(activities(s.Events)) != "[sidecar:sent to node node:a node:b]" {
			t.Errorf("session %s events = %v; want the node's complete trace", s.ID, activities(s.Events))
		}
	}
	// Sessions offered together are looked at together, 3 times; one that straddles a
	// tick of the grid may share a failed look with later ones, and be looked at once more.
	for id, c := range node.looks {
		if c < 3 || node.reads[id] != 1 {
			t.Errorf("session %x looked at %d times, its events read %d times; want at least 3, and once", id[0], c, node.reads[id])
		}
	}
	if f.failed.Load() < n {
		t.Errorf("failed = %d; want at least %d, a failed look for each session", f.failed.Load(), n)
	}
}

// TestFetcherBatches checks that the fetcher asks the node about many sessions in one
// call, never more than MaxNodeEventBatch, rather than once per session: sessions offered
// together come due together.
func TestFetcherBatches(t *testing.T) {
	node := newFlakyNode()
	const n = 250
	mustFetchAll(t, node, n)
	if len(node.reads) != n {
		t.Errorf("events read for %d sessions; want %d", len(node.reads), n)
	}
	for id, c := range node.reads {
		if c != 1 {
			t.Errorf("session %x: events read %d times; want once", id, c)
		}
	}
	// 250 sessions, 3 looks each, 100 at a time: 9 calls when all 250 fall in one tick of
	// the grid. The bound leaves room for a test machine that stalls the offers across
	// ticks; a fetcher that asks once per session makes 750.
	if node.finished > n/10 {
		t.Errorf("%d Finished calls for %d sessions; want them asked about together", node.finished, n)
	}
	if node.batches > MaxNodeEventBatch {
		t.Errorf("a call asked about %d sessions; want at most %d", node.batches, MaxNodeEventBatch)
	}
}

// TestFetcherFull checks that a full fetch queue records the session at once, without node
// events, and counts it.
func TestFetcherFull(t *testing.T) {
	block := make(chan struct{})
	tr := New(Options{NodeEvents: blockingNode(block), QueueSize: 1})
	for i := range 5 {
		tr.submit(&Session{ID: fmt.Sprint(i)}, [16]byte{byte(i)}, true)
	}
	st := tr.Stats()
	if st.Dropped["node_events"] == 0 || st.SlowSessions == 0 {
		t.Errorf("dropped %d, recorded %d; want some recorded at once without node events", st.Dropped["node_events"], st.SlowSessions)
	}
	close(block)
	mustClose(t, tr)
	if got := tr.Stats().SlowSessions; got != 5 {
		t.Errorf("recorded %d; want all 5", got)
	}
}

type blockingNode chan struct{}

func (b blockingNode) Finished(ctx context.Context, ids [][16]byte) ([]bool, error) {
	select {
	case <-b:
	case <-ctx.Done():
	}
	done := make([]bool, len(ids))
	for i := range done {
		done[i] = true
	}
	return done, nil
}

func (b blockingNode) Events(ctx context.Context, ids [][16]byte) ([][]Event, error) {
	select {
	case <-b:
	case <-ctx.Done():
	}
	return make([][]Event, len(ids)), nil
}

// TestFetcherStopOutOfTime checks that a stop whose context runs out while sessions still
// wait for the node's events records every one of them, without those events, and is not an
// error: node events are best effort, and a slow node must not fail a shutdown.
func TestFetcherStopOutOfTime(t *testing.T) {
	var mu sync.Mutex
	recorded := 0
	f := newFetcher(blockingNode(make(chan struct{})), 1000, func(*Session) { mu.Lock(); recorded++; mu.Unlock() }, nil, zerolog.Nop())
	for i := range 500 {
		if !f.offer(&Session{ID: fmt.Sprint(i)}, [16]byte{byte(i), byte(i >> 8)}) {
			t.Fatalf("offer %d refused; want room for 500", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.stop(ctx); err != nil {
		t.Errorf("stop: %v; want nil once every session is recorded", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if recorded != 500 {
		t.Errorf("recorded %d sessions; want all 500", recorded)
	}
}

// slowNode answers each call after delay, never finished: a node whose traces lag, as
// under heavy load.
type slowNode struct{ delay time.Duration }

func (s slowNode) Finished(ctx context.Context, ids [][16]byte) ([]bool, error) {
	select {
	case <-time.After(s.delay):
		return make([]bool, len(ids)), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s slowNode) Events(ctx context.Context, ids [][16]byte) ([][]Event, error) {
	select {
	case <-time.After(s.delay):
		return make([][]Event, len(ids)), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestCloseLeavesTimeForSinks checks that Close does not give the whole of its context to
// the node-event fetcher's last looks: with many sampled sessions waiting on a slow node,
// every session still reaches the sinks, and Close returns no error (it used to fail with
// "drain sink ...: context deadline exceeded" after a load with sampling).
func TestCloseLeavesTimeForSinks(t *testing.T) {
	sink := &memSink{name: "mem"}
	tr := New(Options{NodeEvents: slowNode{delay: 50 * time.Millisecond}, Sinks: []Sink{sink}})
	closeWithSampledSessions(t, tr, sink, 200)
}

// hungNode never answers, and ignores its context: a driver stuck in a write.
type hungNode struct{ release chan struct{} }

func (h hungNode) Finished(context.Context, [][16]byte) ([]bool, error) {
	<-h.release
	return nil, errors.New("released")
}

func (h hungNode) Events(context.Context, [][16]byte) ([][]Event, error) {
	<-h.release
	return nil, errors.New("released")
}

// TestCloseWithHungNode checks that a node-event source that ignores its context holds
// neither the sessions waiting for it nor Close: they are recorded without node events,
// and Close returns no error (the guardrail's end-to-end test failed with "stop node-event
// fetcher: context deadline exceeded" when gocql hung in a write).
func TestCloseWithHungNode(t *testing.T) {
	node := hungNode{release: make(chan struct{})}
	defer close(node.release)
	sink := &memSink{name: "mem"}
	tr := New(Options{NodeEvents: node, Sinks: []Sink{sink}})
	closeWithSampledSessions(t, tr, sink, 20)
}

// sampledRequests passes n sampled requests through c, each answered by the node with
// its trace's session id, so that their node events are to be fetched.
func sampledRequests(t *testing.T, c *caller, n int) {
	t.Helper()
	for i := range n {
		st := int16(i)
		h, f := mustRequest(t, reqHeader(st, 0), cql.Query{Query: "SELECT 1"}, nil)
		c.OnRequest(h, f, nil)
		rh, rf := mustResponse(t, respHeader(st, cql.FlagTracing), cql.ResponsePrefix{HasTracingID: true, TracingID: nodeID}, cql.VoidResult{}, nil)
		c.OnResponse(rh, rf, nil)
		c.ResponseSent(st)
	}
}

// closeWithSampledSessions records n sampled sessions whose node events are to be fetched,
// then closes tr with 2 s to spare: Close must return no error, and every session must
// have reached sink.
func closeWithSampledSessions(t *testing.T, tr *Tracer, sink *memSink, n int) {
	t.Helper()
	c := newCaller(tr, testClient, testCoord)
	mustConfig(t, tr, Config{Probability: 1})
	sampledRequests(t, c, n)
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := len(sink.sessions()); got != n {
		t.Errorf("sink got %d sessions; want %d", got, n)
	}
}

// callerMeter is a WorkMeter that records the functions that begin pieces of work.
type callerMeter struct {
	mu     sync.Mutex
	begins map[string]int
	open   int
}

func (m *callerMeter) Begin() int64 {
	pc := make([]uintptr, 8)
	n := runtime.Callers(2, pc)
	frames := runtime.CallersFrames(pc[:n])
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		f, more := frames.Next()
		if i := strings.LastIndex(f.Function, "/"); i >= 0 {
			m.begins[f.Function[i+1:]]++
		}
		if !more {
			break
		}
	}
	m.open++
	return 0
}

func (m *callerMeter) End(int64) {
	m.mu.Lock()
	m.open--
	m.mu.Unlock()
}

// TestWorkMetered checks that the work a sampled session adds is counted where it happens:
// building the session, the node-event fetch, the fetcher's merging and recording of what
// it fetched, and the sink's write, each piece ended as it was begun.
func TestWorkMetered(t *testing.T) {
	m := &callerMeter{begins: map[string]int{}}
	sink := &memSink{name: "mem"}
	tr := New(Options{NodeEvents: &fakeNode{}, Sinks: []Sink{sink}, Work: m})
	defer mustClose(t, tr)
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	mustConfig(t, tr, Config{Probability: 1})
	const n = 10
	sampledRequests(t, c, n)
	// The fetcher looks at the node on its grid, and then the sink writes.
	for deadline := time.Now().Add(5 * time.Second); len(sink.sessions()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sink got %d sessions; want %d", len(sink.sessions()), n)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, fn := range []string{"tracing.(*Conn).finish", "tracing.meteredEvents.Finished", "tracing.meteredEvents.Events",
		"tracing.(*fetcher).read", "tracing.meteredSink.Write"} {
		if m.begins[fn] == 0 {
			t.Errorf("no piece of work begun in %s; begun in %v", fn, m.begins)
		}
	}
	if m.open != 0 {
		t.Errorf("%d pieces begun and not ended", m.open)
	}
}
