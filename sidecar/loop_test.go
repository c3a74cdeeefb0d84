//go:build linux

package sidecar

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracecar/tracecar/internal/cql"
)

// connsInLoop returns how many of p's connections an event loop carries.
func connsInLoop(p *Proxy) (inLoop, all int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.mu.Lock()
		if c.inLoop() {
			inLoop++
		}
		c.mu.Unlock()
		all++
	}
	return inLoop, all
}

// TestEventLoopCarriesPlaintext checks that a plaintext connection moves to the event
// loop by default, and stays on goroutines with NoEventLoop.
func TestEventLoopCarriesPlaintext(t *testing.T) {
	if eventLoopOff() {
		t.Skip("TRACECAR_EVENT_LOOP=off")
	}
	for _, noLoop := range []bool{false, true} {
		n := mustFakeNode(t)
		tp := mustProxy(t, Config{NodeAddr: n.addr(), NoEventLoop: noLoop})
		c := mustDial(t, tp.addr)
		c.send(frame(cql.V4, 0, 1, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
		if h, _ := c.recv(); h.Stream != 1 || h.Opcode != cql.OpResult {
			t.Fatalf("got %+v; want RESULT on stream 1", h)
		}
		in, all := connsInLoop(tp.Proxy)
		want := 1
		if noLoop {
			want = 0
		}
		if all != 1 || in != want {
			t.Errorf("NoEventLoop=%v: %d of %d connections in a loop; want %d of 1", noLoop, in, all, want)
		}
	}
}

// TestBackpressure sends many requests with large answers and does not read for a while,
// so the proxy's writes to the client fill the socket and the rest waits for EPOLLOUT
// (and the node side stops being read); then it reads every answer and checks its bytes.
// A request larger than the loop's read buffer goes through whole as well.
func TestBackpressure(t *testing.T) {
	const (
		requests = 300
		respSize = 64 << 10
	)
	n := mustFakeNode(t)
	n.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		if h.Opcode == cql.OpStartup {
			fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpReady, nil))
			return
		}
		// The answer's body repeats the stream id and carries the request's length.
		b := make([]byte, respSize)
		for i := range b {
			b[i] = byte(h.Stream)
		}
		binary.BigEndian.PutUint32(b, uint32(len(body)))
		fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, b))
	}
	tp := mustProxy(t, Config{NodeAddr: n.addr()})
	c := mustDial(t, tp.addr)
	// Frames over 64 KiB are accepted once the handshake is done.
	c.send(frame(cql.V4, 0, 1, cql.OpStartup, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}.AppendBody(nil, cql.V4)))
	if h, _ := c.recv(); h.Opcode != cql.OpReady {
		t.Fatalf("STARTUP: got %s, want READY", h.Opcode)
	}
	big := queryBody(string(bytes.Repeat([]byte("x"), 3*loopReadSize)))
	var reqs [][]byte
	for i := range requests {
		body := queryBody("SELECT * FROM ks.t")
		if i%100 == 7 {
			body = big
		}
		reqs = append(reqs, frame(cql.V4, 0, int16(i), cql.OpQuery, body))
	}
	go func() {
		for _, r := range reqs {
			if _, err := c.c.Write(r); err != nil {
				return
			}
		}
	}()
	// The answers (about 19 MiB) cannot all sit in socket buffers, the client's being
	// small, so while the client does not read the proxy holds some and waits to write
	// them. The pause only makes that likely; the test checks what arrives either way.
	time.Sleep(500 * time.Millisecond)
	seen := make(map[int16]bool)
	for i := range requests {
		h, body, err := c.tryRecv()
		if err != nil {
			t.Fatalf("answer %d of %d: %v", i, requests, err)
		}
		if h.Opcode != cql.OpResult || len(body) != respSize || seen[h.Stream] {
			t.Fatalf("got %v on stream %d with %d bytes (seen before: %v)", h.Opcode, h.Stream, len(body), seen[h.Stream])
		}
		seen[h.Stream] = true
		wantLen := len(queryBody("SELECT * FROM ks.t"))
		if h.Stream%100 == 7 {
			wantLen = len(big)
		}
		if got := int(binary.BigEndian.Uint32(body)); got != wantLen {
			t.Fatalf("stream %d: the node got a request body of %d bytes; want %d", h.Stream, got, wantLen)
		}
		if !bytes.Equal(body[4:], bytes.Repeat([]byte{byte(h.Stream)}, respSize-4)) {
			t.Fatalf("stream %d: answer bytes changed on the way", h.Stream)
		}
	}
	if st := tp.Stats(); st.Responses != requests+1 {
		t.Errorf("stats count %d responses; want %d (READY and the answers)", st.Responses, requests+1)
	}
}

// TestLastFramesTimeout has a client that stops reading with answers pending and then
// sends a malformed frame: its ProtocolError cannot be written, and the proxy closes the
// connection once its proxy's errWriteTimeout (connEnv.lastWrite) has passed rather than
// holding it.
func TestLastFramesTimeout(t *testing.T) {
	n := mustFakeNode(t)
	answered := make(chan struct{}, 1024)
	n.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, make([]byte, 1<<20)))
		answered <- struct{}{}
	}
	p := New(Config{NodeAddr: n.addr()}, nil)
	p.env.lastWrite = 200 * time.Millisecond
	tp := mustProxyWith(t, p, nil)
	c := mustDial(t, tp.addr)
	const requests = 64 // 64 MiB of answers: more than the sockets between hold
	var reqs [][]byte
	for i := range requests {
		reqs = append(reqs, frame(cql.V4, 0, int16(i), cql.OpQuery, queryBody("SELECT * FROM ks.t")))
	}
	c.send(reqs...)
	// Let the answers fill the sockets between, so that the proxy holds some: the pause
	// makes that likely, and the test checks the end of the connection either way.
	recvWithin(t, answered)
	time.Sleep(300 * time.Millisecond)
	c.send(frame(0x05, 0, 99, cql.OpQuery, queryBody("SELECT 1")))
	// The proxy gives up on the client after errWriteTimeout, without the client reading.
	deadline := time.Now().Add(testTimeout)
	for tp.Stats().Connections != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("connection still open %v after its last frames were due", testTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What the sockets held arrives, then the end.
	for {
		if _, _, err := c.tryRecv(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("no end of the connection: %v", err)
			}
			return
		}
	}
}

// TestGatherRoomFollowsBytes: a frame larger than the read buffer is gathered in a buffer
// that grows with the bytes received, never to the length the frame claims: a client that
// claims 16 MiB and sends 100 KiB makes the loop hold about 256 KiB at most.
func TestGatherRoomFollowsBytes(t *testing.T) {
	const need = 16 << 20
	pend := make([]byte, 0, loopReadSize)
	pend = append(pend, make([]byte, loopReadSize)...) // the first read: the header and more
	for len(pend) < need {
		pend = gatherRoom(pend, need)
		if len(pend) == cap(pend) {
			t.Fatalf("no room with %d of %d bytes", len(pend), need)
		}
		if limit := max(loopReadSize, 2*len(pend)); cap(pend) > limit {
			t.Fatalf("capacity %d with %d bytes received; want at most %d", cap(pend), len(pend), limit)
		}
		pend = pend[:min(cap(pend), len(pend)+loopReadSize)] // one read of loopReadSize
	}
	if cap(pend) != need {
		t.Errorf("capacity %d for a frame of %d bytes; want exactly its size", cap(pend), need)
	}
}

// loopGoroutineStates returns the scheduler states of the event loops' goroutines, from a
// dump of every goroutine ("running", "syscall", ...).
func loopGoroutineStates() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var states []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "sidecar.(*loop).run(") {
			continue
		}
		head, _, _ := strings.Cut(g, "\n")
		if _, st, ok := strings.Cut(head, "["); ok {
			st, _, _ = strings.Cut(st, "]")
			st, _, _ = strings.Cut(st, ",")
			states = append(states, st)
		}
	}
	return states
}

// TestIdleLoopWaitsInTheRuntime: a loop with nothing to do for a few milliseconds parks on
// the runtime's poller (the goroutine dump says "IO wait"), so that its P goes back at once
// and neither sysmon nor the preemption signal wakes an idle sidecar; a raw wait shows as
// "running", an ordinary blocking wait as "syscall". The next request is answered as before.
func TestIdleLoopWaitsInTheRuntime(t *testing.T) {
	if eventLoopOff() {
		t.Skip("TRACECAR_EVENT_LOOP=off")
	}
	n := mustFakeNode(t)
	tp := mustProxy(t, Config{NodeAddr: n.addr()})
	c := mustDial(t, tp.addr)
	for stream := int16(1); stream <= 3; stream++ {
		c.send(frame(cql.V4, 0, stream, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
		if h, _ := c.recv(); h.Stream != stream || h.Opcode != cql.OpResult {
			t.Fatalf("got %+v; want RESULT on stream %d", h, stream)
		}
		if in, _ := connsInLoop(tp.Proxy); in != 1 {
			t.Fatalf("%d connections in a loop; want 1", in)
		}
		deadline := time.Now().Add(20 * time.Second) // the loops are the process's: other tests may keep them busy
		for {
			states := loopGoroutineStates()
			if len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return s != "IO wait" }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after a request, the loops' goroutines are %q 20 s later; want all parked on the runtime's poller (IO wait)", states)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestLoopWaitFailure: an epoll_wait error other than EINTR (injected through the loop's
// waitFn) closes the connections of that loop, is counted, and the loop goes on with a new
// epoll set: the process does not die, and a new connection is served by the same loop.
func TestLoopWaitFailure(t *testing.T) {
	if eventLoopOff() {
		t.Skip("TRACECAR_EVENT_LOOP=off")
	}
	l, err := newLoop()
	if err != nil {
		t.Fatal(err)
	}
	var failNext atomic.Bool
	wait := l.waitFn
	l.waitFn = func() (int, error) {
		if failNext.CompareAndSwap(true, false) {
			return 0, unix.EBADF
		}
		return wait()
	}
	g := &loopGroup{loops: []*loop{l}}
	g.once.Do(func() {}) // the group is started: its one loop runs below
	go l.run()

	n := mustFakeNode(t)
	p := New(Config{NodeAddr: n.addr()}, nil)
	p.loops = g
	tp := mustProxyWith(t, p, nil)
	query := func(c *testClient, stream int16) {
		t.Helper()
		c.send(frame(cql.V4, 0, stream, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
		if h, _ := c.recv(); h.Stream != stream || h.Opcode != cql.OpResult {
			t.Fatalf("got %+v; want RESULT on stream %d", h, stream)
		}
	}
	before := LoopFailures()
	c1, c2 := mustDial(t, tp.addr), mustDial(t, tp.addr)
	query(c1, 1)
	query(c2, 1)
	if in, all := connsInLoop(tp.Proxy); in != 2 || all != 2 {
		t.Fatalf("%d of %d connections in the loop; want 2 of 2", in, all)
	}
	failNext.Store(true)
	unix.Write(l.wakefd, []byte{1, 0, 0, 0, 0, 0, 0, 0}) // wakes the loop: its next wait fails
	c1.expectClosed()
	c2.expectClosed()
	if got := LoopFailures() - before; got != 1 {
		t.Errorf("LoopFailures went up by %d; want 1", got)
	}
	c3 := mustDial(t, tp.addr)
	query(c3, 7)
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		in, all := connsInLoop(tp.Proxy)
		if in == 1 && all == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections in the loop after its failure; want the new one only", in, all)
		}
	}
}
