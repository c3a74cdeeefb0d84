package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// flakyNode fails, then reports the session incomplete, then complete, per session.
type flakyNode struct {
	mu    sync.Mutex
	calls map[[16]byte]int
}

func (f *flakyNode) Events(_ context.Context, id [16]byte) ([]Event, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id]++
	switch f.calls[id] {
	case 1:
		return nil, false, errors.New("node busy")
	case 2:
		return []Event{{Activity: "a", SourceElapsedUS: 1}}, false, nil
	}
	return []Event{{Activity: "a", SourceElapsedUS: 1}, {Activity: "b", SourceElapsedUS: 2}}, true, nil
}

// TestFetcherRetries checks that sessions wait for the node to finish its trace, across
// errors and partial reads, and are all recorded once.
func TestFetcherRetries(t *testing.T) {
	node := &flakyNode{calls: map[[16]byte]int{}}
	var mu sync.Mutex
	var got []*Session
	done := make(chan struct{})
	const n = 20
	f := newFetcher(node, 64, func(s *Session) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, s)
		if len(got) == n {
			close(done)
		}
	}, nopLogger())
	for i := range n {
		s := &Session{ID: fmt.Sprint(i), Events: []Event{{Activity: EventSentToNode, Source: SourceSidecar}}}
		if !f.offer(s, [16]byte{byte(i)}) {
			t.Fatalf("offer %d refused", i)
		}
	}
	<-done // the third attempt of each comes after about 70 ms
	if err := f.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if fmt.Sprint(activities(s.Events)) != "[sidecar:sent to node node:a node:b]" {
			t.Errorf("session %s events = %v; want the node's complete trace", s.ID, activities(s.Events))
		}
	}
	for id, c := range node.calls {
		if c != 3 {
			t.Errorf("session %x asked %d times; want 3", id[0], c)
		}
	}
	if f.failed.Load() != n {
		t.Errorf("failed = %d; want %d", f.failed.Load(), n)
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

func (b blockingNode) Events(ctx context.Context, _ [16]byte) ([]Event, bool, error) {
	select {
	case <-b:
	case <-ctx.Done():
	}
	return nil, true, nil
}

// TestFetcherStopOutOfTime checks that a stop whose context runs out while sessions still
// wait for the node's events records every one of them, without those events, and is not an
// error: node events are best effort, and a slow node must not fail a shutdown.
func TestFetcherStopOutOfTime(t *testing.T) {
	var mu sync.Mutex
	recorded := 0
	f := newFetcher(blockingNode(make(chan struct{})), 1000, func(*Session) { mu.Lock(); recorded++; mu.Unlock() }, zerolog.Nop())
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

// slowNode answers each Events call after delay, never complete: a node whose traces
// lag, as under heavy load.
type slowNode struct{ delay time.Duration }

func (s slowNode) Events(ctx context.Context, _ [16]byte) ([]Event, bool, error) {
	select {
	case <-time.After(s.delay):
		return nil, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
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

func (h hungNode) Events(context.Context, [16]byte) ([]Event, bool, error) {
	<-h.release
	return nil, false, errors.New("released")
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

// closeWithSampledSessions records n sampled sessions whose node events are to be fetched,
// then closes tr with 2 s to spare: Close must return no error, and every session must
// have reached sink.
func closeWithSampledSessions(t *testing.T, tr *Tracer, sink *memSink, n int) {
	t.Helper()
	c := newCaller(tr, testClient, testCoord)
	mustConfig(t, tr, Config{Probability: 1})
	for i := range n {
		st := int16(i)
		h, f := mustRequest(t, reqHeader(st, 0), cql.Query{Query: "SELECT 1"}, nil)
		c.OnRequest(h, f, nil)
		rh, rf := mustResponse(t, respHeader(st, cql.FlagTracing), cql.ResponsePrefix{HasTracingID: true, TracingID: nodeID}, cql.VoidResult{}, nil)
		c.OnResponse(rh, rf, nil)
		c.ResponseSent(st)
	}
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
