//go:build linux

package sidecar

import (
	"runtime"
	"testing"
	"time"

	"github.com/tracecar/tracecar/sidecar/idlepark"

	"github.com/tracecar/tracecar/internal/cql"
)

// parkedSides counts the sides of p's connections that are parked.
func (p *Proxy) parkedSides() int {
	p.mu.Lock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	n := 0
	for _, c := range cs {
		c.mu.Lock()
		if ps, ok := c.carrier.(*parkState); ok {
			for _, t := range ps.token {
				if t != 0 {
					n++
				}
			}
		}
		c.mu.Unlock()
	}
	return n
}

// waitParked waits until want sides of p's connections are parked.
func waitParked(tb testing.TB, p *Proxy, want int, what string) {
	tb.Helper()
	deadline := time.Now().Add(testTimeout)
	for p.parkedSides() != want {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %d sides parked after %v; want %d", what, p.parkedSides(), testTimeout, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// handshakeNode is a fake node that answers OPTIONS with SUPPORTED, STARTUP with READY and
// every other request with RESULT Void.
func handshakeNode(tb testing.TB) *fakeNode {
	n := mustFakeNode(tb)
	n.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		rh := cql.Header{Version: cql.ResponseBit | h.Version, Stream: h.Stream}
		switch h.Opcode {
		case cql.OpOptions:
			fc.send(cql.AppendFrame(nil, rh, cql.Supported{}))
		case cql.OpStartup:
			fc.send(cql.AppendFrame(nil, rh, cql.Ready{}))
		default:
			fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, voidBody()))
		}
	}
	return n
}

// handshake takes a client through OPTIONS and STARTUP.
func (tc *testClient) handshake() {
	tc.tb.Helper()
	tc.send(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Options{}))
	if h, _ := tc.recv(); h.Opcode != cql.OpSupported {
		tc.tb.Fatalf("OPTIONS answered with %s", h.Opcode)
	}
	tc.send(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 2}, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}))
	if h, _ := tc.recv(); h.Opcode != cql.OpReady {
		tc.tb.Fatalf("STARTUP answered with %s", h.Opcode)
	}
}

// TestIdleSidesPark checks that an idle connection on the goroutine path keeps no
// goroutine, and that a parked connection works as a running one: its side parks after the
// handshake and after the parker's Idle without frames, and a request, a node's event, a frame sent
// in two halves around a parking, a lost node and a drain each find it as they would a
// running one. Without parking, no side parks and the goroutines stay, two per connection.
func TestIdleSidesPark(t *testing.T) {
	pk := idlepark.Process()
	old := pk.SetIdle(20 * time.Millisecond)
	t.Cleanup(func() { pk.SetIdle(old) })
	const conns = 30
	node := handshakeNode(t)
	tp := mustProxy(t, Config{NodeAddr: node.addr(), NoEventLoop: true})

	// The first connection starts the parker, for good.
	first := mustDial(t, tp.addr)
	first.handshake()
	waitParked(t, tp.Proxy, 2, "after the first handshake")
	g0 := runtime.NumGoroutine()
	clients := []*testClient{first}
	for range conns - 1 {
		tc := mustDial(t, tp.addr)
		tc.handshake()
		clients = append(clients, tc)
	}
	waitParked(t, tp.Proxy, 2*conns, "after the handshakes")
	// The fake node, in this process, has a goroutine per connection; the proxy none.
	if g := runtime.NumGoroutine() - (conns - 1); g > g0+2 {
		t.Errorf("%d idle connections: %d goroutines besides the fake node's, %d with one; want none per connection", conns, g, g0)
	}

	// A request wakes both sides; they park again once idle for parkIdle.
	for i, tc := range clients {
		tc.send(frame(cql.V4, 0, int16(10+i), cql.OpQuery, queryBody("SELECT * FROM ks.t")))
		if h, _ := tc.recv(); h.Opcode != cql.OpResult || h.Stream != int16(10+i) {
			t.Fatalf("client %d: got %s on stream %d; want RESULT on %d", i, h.Opcode, h.Stream, 10+i)
		}
	}
	waitParked(t, tp.Proxy, 2*conns, "once idle after a request")

	// An event from the node reaches a client whose sides are parked.
	ev := frame(cql.ResponseBit|cql.V4, 0, -1, cql.OpEvent, cql.Event{Type: cql.EventSchemaChange, Schema: cql.SchemaChange{ChangeType: "CREATED", Target: "KEYSPACE", Keyspace: "ks"}}.AppendBody(nil, cql.V4))
	for _, fc := range node.connections() {
		fc.send(ev)
	}
	for i, tc := range clients {
		if h, _ := tc.recv(); h.Opcode != cql.OpEvent {
			t.Fatalf("client %d: got %s; want the node's EVENT", i, h.Opcode)
		}
	}
	waitParked(t, tp.Proxy, 2*conns, "once idle after an event")

	// A frame cut in two, its first half read before the parker asks to park: the side
	// waits for the rest instead of parking or failing.
	q := frame(cql.V4, 0, 7, cql.OpQuery, queryBody("SELECT * FROM ks.t"))
	first.send(q[:5])
	time.Sleep(100 * time.Millisecond) // several of the parker's looks, none of which may end it
	first.send(q[5:])
	if h, _ := first.recv(); h.Opcode != cql.OpResult || h.Stream != 7 {
		t.Fatalf("a frame sent in two halves: got %s on stream %d; want RESULT on 7", h.Opcode, h.Stream)
	}
	waitParked(t, tp.Proxy, 2*conns, "after the cut frame")

	// A lost node closes its clients, parked or not.
	lost := node.connections()[0]
	lost.Close()
	lostClient := first // the node accepts in the order the clients connected
	lostClient.expectClosed()
	clients = clients[1:]

	// A drain closes idle parked connections at once, and Serve returns.
	if err := tp.stop(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for _, tc := range clients {
		tc.expectClosed()
	}
}
