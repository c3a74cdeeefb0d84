//go:build linux

package sidecar

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/sidecar/handover"
	"github.com/tracecar/tracecar/tracing"
)

// handoverPair is an old proxy serving, and the way to hand it over to a new one in the
// same process, as two sidecar processes do over their control socket.
type handoverPair struct {
	node   string // the node's address
	addr   string
	ln     *Listener
	old    *testProxy
	ctlLn  *net.UnixListener
	ctlDir string
}

func mustHandoverPair(tb testing.TB, cfg Config, nodeAddr string) *handoverPair {
	tb.Helper()
	cfg.NodeAddr = nodeAddr
	raw := listenApart(tb, "127.0.0.1", nodeAddr)
	hp := &handoverPair{node: nodeAddr, addr: raw.Addr().String(), ln: NewListener(raw), ctlDir: tb.TempDir()}
	hp.old = serveProxy(tb, New(cfg, tracing.New(tracing.Options{})), hp.ln, hp.addr)
	var err error
	if hp.ctlLn, err = ListenControl(filepath.Join(hp.ctlDir, "ctl.sock")); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { hp.ctlLn.Close() })
	return hp
}

// handover runs a whole handover from the old proxy to a new one made with cfg, and returns
// the new one, serving, with both sides' results.
func (hp *handoverPair) handover(tb testing.TB, cfg Config) (nw *testProxy, oldRes, newRes HandoffResult) {
	tb.Helper()
	cfg.NodeAddr = hp.node
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type result struct {
		res HandoffResult
		err error
	}
	oldDone := make(chan result, 1)
	go func() {
		s, err := AcceptSuccessor(hp.ctlLn)
		if err != nil {
			oldDone <- result{err: err}
			return
		}
		defer s.Close()
		f, err := hp.ln.Pause()
		if err != nil {
			oldDone <- result{err: err}
			return
		}
		if err := s.Offer(ctx, []ListenerFile{{Name: "cql", File: f}}, []byte("state")); err != nil {
			oldDone <- result{err: err}
			return
		}
		res, err := hp.old.Handoff(ctx, s, nil)
		oldDone <- result{res, err}
	}()
	pred, err := DialPredecessor(ctx, filepath.Join(hp.ctlDir, "ctl.sock"))
	if err != nil {
		tb.Fatal(err)
	}
	defer pred.Close()
	files, state, err := pred.Receive(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if string(state) != "state" {
		tb.Errorf("state %q; want %q", state, "state")
	}
	ln, err := net.FileListener(files["cql"])
	files["cql"].Close()
	if err != nil {
		tb.Fatal(err)
	}
	nl := NewListener(ln)
	nw = serveProxy(tb, New(cfg, tracing.New(tracing.Options{})), nl, hp.addr)
	if err := pred.Ready(); err != nil {
		tb.Fatal(err)
	}
	newRes, err = nw.Adopt(ctx, pred)
	if err != nil {
		tb.Fatalf("Adopt: %v", err)
	}
	r := recvWithin(tb, oldDone)
	if r.err != nil {
		tb.Fatalf("Handoff: %v", r.err)
	}
	hp.old.stop(tb)
	hp.old, hp.ln = nw, nl
	return nw, r.res, newRes
}

// load runs prepared writes and reads on s from workers goroutines until stop is closed,
// counting requests and failures.
type load struct {
	ok, failed atomic.Int64
	lastErr    atomic.Value
	wg         sync.WaitGroup
	stop       chan struct{}
	once       sync.Once
}

func startLoad(s *gocql.Session, workers int) *load {
	l := &load{stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				k := w*1_000_000 + i
				err := s.Query("INSERT INTO ho.kv (k, v) VALUES (?, ?)", k, "v").Exec()
				if err == nil {
					var v string
					err = s.Query("SELECT v FROM ho.kv WHERE k = ?", k).Scan(&v)
				}
				if err != nil {
					l.failed.Add(1)
					l.lastErr.Store(err.Error())
				} else {
					l.ok.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) end() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *load) waitMore(tb testing.TB, n int64) {
	tb.Helper()
	want := l.ok.Load() + n
	waitFor(tb, "requests to succeed", func() bool { return l.ok.Load() >= want })
}

func mustSchema(tb testing.TB, s *gocql.Session) {
	tb.Helper()
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS ho WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS ho.kv (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// TestHandoverMovesConnections hands a proxy over three times under a gocql load (with and
// without lz4): no request fails, the node sees no new connection, and every connection is
// adopted by the new proxy, none accepted anew.
func TestHandoverMovesConnections(t *testing.T) {
	if eventLoopOff() {
		t.Skip("TRACECAR_EVENT_LOOP=off: connections on the goroutine path do not move (TestHandoverGoroutinePathDrains)")
	}
	for _, comp := range []string{"none", "lz4"} {
		t.Run(comp, func(t *testing.T) {
			n := mustNode(t, node.Config{}, nodeAddr)
			hp := mustHandoverPair(t, Config{}, n.addr)
			ap := mustAddrPort(hp.addr)
			o := drivertest.Options{Host: ap.Addr().String(), Port: int(ap.Port()), Compression: comp}
			s, err := drivertest.Cluster(o).CreateSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			mustSchema(t, s)
			l := startLoad(s, 4)
			defer l.end()
			l.waitMore(t, 200)
			nodeConns := n.accepts.Load()
			clientConns := hp.old.Stats().Connections
			for i := range 3 {
				nw, oldRes, newRes := hp.handover(t, Config{})
				if oldRes.Moved != clientConns || newRes.Moved != clientConns || oldRes.Closed != 0 {
					t.Errorf("handover %d: old moved %d, closed %d; new adopted %d; want %d moved, 0 closed", i+1, oldRes.Moved, oldRes.Closed, newRes.Moved, clientConns)
				}
				l.waitMore(t, 200)
				if got := nw.Stats().Connections; got != clientConns {
					t.Errorf("handover %d: new proxy has %d connections; want %d", i+1, got, clientConns)
				}
				if got := nw.Accepted(); got != 0 {
					t.Errorf("handover %d: new proxy accepted %d connections; want 0 (all adopted)", i+1, got)
				}
			}
			l.end()
			if f := l.failed.Load(); f != 0 {
				t.Errorf("%d requests failed (last: %v); want 0", f, l.lastErr.Load())
			}
			if got := n.accepts.Load(); got != nodeConns {
				t.Errorf("node accepted %d connections in all, %d before the handovers; want no new one", got, nodeConns)
			}
			t.Logf("%d requests, %d client connections moved 3 times", l.ok.Load(), clientConns)
		})
	}
}

// TestHandoverCarriesPendingBytes moves a connection whose client has sent half a frame and
// whose node has sent half an event: the new proxy forwards each once its rest arrives.
func TestHandoverCarriesPendingBytes(t *testing.T) {
	if eventLoopOff() {
		t.Skip("TRACECAR_EVENT_LOOP=off: connections on the goroutine path do not move (TestHandoverGoroutinePathDrains)")
	}
	fn := mustFakeNode(t)
	hp := mustHandoverPair(t, Config{}, fn.addr())
	tc := mustDial(t, hp.addr)
	tc.send(frame(cql.V4, 0, 1, cql.OpQuery, queryBody("SELECT v FROM ks.t")))
	if h, _ := tc.recv(); h.Stream != 1 || h.Opcode != cql.OpResult {
		t.Fatalf("got %v on stream %d; want the RESULT on stream 1", h.Opcode, h.Stream)
	}
	waitFor(t, "the node connection", func() bool { return len(fn.connections()) == 1 })
	nc := fn.connections()[0]
	query := frame(cql.V4, 0, 2, cql.OpQuery, queryBody("SELECT v FROM ks.t WHERE k = 2"))
	event := frame(cql.ResponseBit|cql.V4, 0, -1, cql.OpEvent, cql.Event{Type: cql.EventSchemaChange,
		Schema: cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetTable, Keyspace: "ks", Name: "t2"}}.AppendBody(nil, cql.V4))
	half := func(f []byte) int { return cql.HeaderSize + 3 }
	tc.send(query[:half(query)])
	nc.send(event[:half(event)])
	// Let the old proxy's loop read both halves; if it has not, they move in the sockets
	// instead, and the test passes without testing the pending bytes.
	time.Sleep(50 * time.Millisecond)
	nw, oldRes, newRes := hp.handover(t, Config{})
	if oldRes.Moved != 1 || newRes.Moved != 1 {
		t.Fatalf("moved %d, adopted %d; want 1 each", oldRes.Moved, newRes.Moved)
	}
	// The event's rest first: the node's answer to the query must not land inside it.
	nc.send(event[half(event):])
	tc.send(query[half(query):])
	got := map[int16]cql.Opcode{}
	for range 2 {
		h, body := tc.recv()
		got[h.Stream] = h.Opcode
		if h.Opcode == cql.OpError {
			t.Logf("error on stream %d: %q", h.Stream, body)
		}
	}
	if got[2] != cql.OpResult || got[-1] != cql.OpEvent {
		t.Errorf("got %v; want a RESULT on stream 2 and the EVENT on stream -1", got)
	}
	if st := nw.Stats(); st.TotalRequests() != 1 || st.Responses != 2 {
		t.Errorf("new proxy forwarded %d requests and %d responses; want 1 and 2 (the halves it finished)", st.TotalRequests(), st.Responses)
	}
}

// expect reads a frame and fails unless it has opcode op on stream.
func (tc *testClient) expect(stream int16, op cql.Opcode) {
	tc.tb.Helper()
	if h, body := tc.recv(); h.Stream != stream || h.Opcode != op {
		tc.tb.Fatalf("got %v on stream %d (%q); want %v on stream %d", h.Opcode, h.Stream, body, op, stream)
	}
}

// TestHandoverGoroutinePathDrains: a connection on the goroutine path (as TLS ones are)
// does not move: the old proxy drains it and closes it, and counts it as closed.
func TestHandoverGoroutinePathDrains(t *testing.T) {
	n := mustNode(t, node.Config{}, nodeAddr)
	hp := mustHandoverPair(t, Config{NoEventLoop: true}, n.addr)
	tc := mustDial(t, hp.addr)
	tc.send(frame(cql.V4, 0, 0, cql.OpOptions, nil))
	tc.expect(0, cql.OpSupported)
	_, oldRes, newRes := hp.handover(t, Config{})
	if oldRes.Moved != 0 || oldRes.Closed != 1 || newRes.Moved != 0 || newRes.Closed != 1 {
		t.Errorf("old %+v, new %+v; want 0 moved and 1 closed on both sides", oldRes, newRes)
	}
	tc.expectClosed()
}

// TestHandoverSuccessorGone: a successor that goes away (here, before acknowledging the
// connection it received) leaves the connection with the old proxy, which serves it on.
func TestHandoverSuccessorGone(t *testing.T) {
	if eventLoopOff() {
		t.Skip("TRACECAR_EVENT_LOOP=off: connections on the goroutine path do not move")
	}
	n := mustNode(t, node.Config{}, nodeAddr)
	hp := mustHandoverPair(t, Config{}, n.addr)
	tc := mustDial(t, hp.addr)
	tc.send(startupFrame(0))
	tc.expect(0, cql.OpReady)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		s, err := AcceptSuccessor(hp.ctlLn)
		if err != nil {
			errc <- err
			return
		}
		f, _ := hp.ln.Pause()
		if err := s.Offer(ctx, []ListenerFile{{Name: "cql", File: f}}, nil); err != nil {
			errc <- err
			return
		}
		_, err = hp.old.Handoff(ctx, s, nil)
		errc <- err
	}()
	pred, err := DialPredecessor(ctx, filepath.Join(hp.ctlDir, "ctl.sock"))
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := pred.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files["cql"].Close()
	pred.Ready()
	// The connection arrives; this successor dies before it acknowledges it.
	dying := &dyingSink{pred: pred}
	if _, err := handover.Adopt(ctx, dying, pred); err == nil {
		t.Fatal("Adopt succeeded; want the successor's going away")
	}
	if dying.got != 1 {
		t.Fatalf("the successor received %d connections; want 1", dying.got)
	}
	if err := recvWithin(t, errc); err == nil {
		t.Fatal("Handoff succeeded; want the successor's going away")
	}
	if err := hp.ln.Resume(); err != nil {
		t.Fatal(err)
	}
	tc.send(frame(cql.V4, 0, 1, cql.OpQuery, queryBody("SELECT release_version FROM system.local")))
	tc.expect(1, cql.OpResult)
	if got := hp.old.Stats().Connections; got != 1 {
		t.Errorf("old proxy has %d connections; want the one it kept", got)
	}
	// The listener serves again.
	tc2 := mustDial(t, hp.addr)
	tc2.send(frame(cql.V4, 0, 0, cql.OpOptions, nil))
	tc2.expect(0, cql.OpSupported)
}

// dyingSink is a successor that goes away when its first connection arrives, before it
// acknowledges it: its Import closes the control connection.
type dyingSink struct {
	pred *Predecessor
	got  int
}

func (d *dyingSink) Serving() bool        { return true }
func (d *dyingSink) StartLoops()          {}
func (d *dyingSink) Log() *zerolog.Logger { return &nopLogger }

func (d *dyingSink) Import(handover.State, int, int) (func(), error) {
	d.got++
	d.pred.Close()
	return nil, errors.New("the successor dies")
}
