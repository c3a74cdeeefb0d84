package tracing

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// encloseMeter is a WorkMeter that checks each piece of work happens inside a metered
// region of its own goroutine: the fakes ask it (inside) when they are called, and End
// notes how many sessions the Tracer recorded while the region was open.
type encloseMeter struct {
	tr *Tracer

	mu       sync.Mutex
	open     map[int64][]region // goroutine → open regions, innermost last
	recorded map[string]uint64  // caller → sessions recorded inside its regions
	outside  []string           // work done with no region open on its goroutine
}

type region struct {
	caller string
	slow   uint64
}

func newEncloseMeter() *encloseMeter {
	return &encloseMeter{open: map[int64][]region{}, recorded: map[string]uint64{}}
}

// goid returns the calling goroutine's id, from its stack's first line.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// meteredCaller names the function that called Begin, as TestWorkMetered does.
func meteredCaller() string {
	pc := make([]uintptr, 1)
	runtime.Callers(3, pc)
	f, _ := runtime.CallersFrames(pc).Next()
	return f.Function[strings.LastIndex(f.Function, "/")+1:]
}

func (m *encloseMeter) Begin() int64 {
	caller := meteredCaller()
	slow := m.tr.slow.Load()
	id := goid()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open[id] = append(m.open[id], region{caller: caller, slow: slow})
	return 0
}

func (m *encloseMeter) End(int64) {
	slow := m.tr.slow.Load()
	id := goid()
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.open[id]
	r := rs[len(rs)-1]
	m.open[id] = rs[:len(rs)-1]
	m.recorded[r.caller] += slow - r.slow
}

// inside notes work done on the calling goroutine, and whether a region was open for it.
func (m *encloseMeter) inside(work string) {
	id := goid()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.open[id]) == 0 {
		m.outside = append(m.outside, work)
	}
}

// enclosedSink is a sink whose writes must be metered.
type enclosedSink struct {
	*memSink
	m *encloseMeter
}

func (s enclosedSink) Write(ctx context.Context, sess *Session) error {
	s.m.inside("sink write")
	return s.memSink.Write(ctx, sess)
}

// enclosedNode is a node whose looks and reads must be metered.
type enclosedNode struct {
	*fakeNode
	m *encloseMeter
}

func (n enclosedNode) Finished(ctx context.Context, ids [][16]byte) ([]bool, error) {
	n.m.inside("node Finished")
	return n.fakeNode.Finished(ctx, ids)
}

func (n enclosedNode) Events(ctx context.Context, ids [][16]byte) ([][]Event, error) {
	n.m.inside("node Events")
	return n.fakeNode.Events(ctx, ids)
}

// TestWorkEnclosed checks that each piece of work the runtime guardrail attributes to
// tracing happens inside the region its meter counts, not merely that a region is begun
// nearby (TestWorkMetered): the sinks' writes and the node's looks and reads run with a
// region open on their goroutine, and the sessions are recorded inside the region of the
// request's finish (no node events to fetch) or of the fetcher's read (node events). A
// region ended before its work, or a piece no longer metered, fails it; the guardrail's
// attributed figure is the sum of these regions (TestAttributedCountsGC adds the
// collector's), so each piece counts in it.
func TestWorkEnclosed(t *testing.T) {
	const n = 10
	for _, withNode := range []bool{false, true} {
		name, recorder := "no node events", "tracing.(*Conn).finish"
		if withNode {
			name, recorder = "node events", "tracing.(*fetcher).read"
		}
		t.Run(name, func(t *testing.T) {
			m := newEncloseMeter()
			sink := enclosedSink{&memSink{name: "mem"}, m}
			opts := Options{Sinks: []Sink{sink}, Work: m}
			if withNode {
				opts.NodeEvents = enclosedNode{&fakeNode{}, m}
			}
			tr := New(opts)
			m.tr = tr
			defer mustClose(t, tr)
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			mustConfig(t, tr, Config{Probability: 1})
			sampledRequests(t, c, n)
			for deadline := time.Now().Add(5 * time.Second); len(sink.sessions()) < n; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("sink got %d sessions; want %d", len(sink.sessions()), n)
				}
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(m.outside) > 0 {
				t.Errorf("work done outside any metered region: %v", m.outside)
			}
			if got := m.recorded[recorder]; got != n {
				t.Errorf("%d of %d sessions recorded inside %s's metered region (recorded inside: %v)", got, n, recorder, m.recorded)
			}
		})
	}
}
