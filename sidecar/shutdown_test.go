package sidecar

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/testkit/tlstest"
)

// connPath is a way for a client connection through the proxy: the goroutine path
// (Config.NoEventLoop), the event loop, or TLS (always on the goroutine path). The tests of
// the end of a connection run on each, whatever TRACECAR_EVENT_LOOP says.
type connPath struct {
	name        string
	noEventLoop bool
	tls         bool
}

var connPaths = []connPath{
	{name: "goroutines", noEventLoop: true},
	{name: "event loop"},
	{name: "TLS", tls: true},
}

// proxy serves a proxy with cfg on the path, and returns it with a function that dials it.
func (cp connPath) proxy(t *testing.T, cfg Config) (*testProxy, func() *testClient) {
	t.Helper()
	cfg.NoEventLoop = cp.noEventLoop
	if !cp.tls {
		tp := mustProxy(t, cfg)
		return tp, func() *testClient { return mustDial(t, tp.addr) }
	}
	pki := tlstest.New(t)
	cfg.TLS = pki.ServerConfig(t, false)
	tp := mustProxy(t, cfg)
	return tp, func() *testClient {
		t.Helper()
		c, err := tls.Dial("tcp", tp.addr, pki.ClientConfig(t, false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(testTimeout))
		return &testClient{tb: t, c: c, r: bufio.NewReader(c)}
	}
}

// A node lost while the proxy drains still fails the request in flight with a Server
// error: draining does not hide the node's failure, and Serve returns once the connection
// closed.
func TestDrainWhileNodeLost(t *testing.T) {
	for _, path := range connPaths {
		t.Run(path.name, func(t *testing.T) {
			node := mustFakeNode(t)
			node.seen = make(chan seenFrame, 16)
			node.handle = func(*fakeConn, cql.Header, []byte) {} // holds every request
			p, dial := path.proxy(t, Config{NodeAddr: node.addr(), DrainTimeout: time.Hour})
			c := dial()
			c.send(frame(cql.V4, 0, 42, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
			recvWithin(t, node.seen)

			p.cancel()
			waitDraining(t, p.Proxy)
			node.killConns()

			h, body := c.recv()
			e, err := cql.DecodeError(body)
			if h.Opcode != cql.OpError || h.Stream != 42 || err != nil || e.Code != cql.ErrCodeServer {
				t.Fatalf("got %s on stream %d (%+v, %v); want a Server error on stream 42", h.Opcode, h.Stream, e, err)
			}
			if !strings.Contains(e.Message, "connection to node "+node.addr()+" lost") {
				t.Errorf("error message %q does not name the lost node", e.Message)
			}
			c.expectClosed()
			if err := recvWithin(t, p.done); err != nil {
				t.Errorf("Serve returned %v; want nil", err)
			}
			close(p.done)
			if got := p.Stats().NodeFailures; got != 1 {
				t.Errorf("Stats().NodeFailures = %d; want 1", got)
			}
		})
	}
}

// waitDraining waits until every connection of p has been told to drain.
func waitDraining(tb testing.TB, p *Proxy) {
	tb.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		p.mu.Lock()
		all := true
		for c := range p.conns {
			all = all && c.draining()
		}
		p.mu.Unlock()
		if all {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("connections not draining after %v", testTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// A malformed frame ends the connection with a ProtocolError on its stream, even with
// requests in flight at the node: the node connection closes as the connection ends, and
// that failure must not be taken for the cause (which would answer the requests in flight
// with Server errors instead). The answers already queued come first.
func TestMalformedFrameWithRequestsInFlight(t *testing.T) {
	for _, path := range connPaths {
		t.Run(path.name, func(t *testing.T) {
			node := mustFakeNode(t)
			node.seen = make(chan seenFrame, 16)
			node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
				if h.Stream == 1 {
					fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, voidBody()))
				}
			}
			_, dial := path.proxy(t, Config{NodeAddr: node.addr()})
			c := dial()
			q := queryBody("SELECT * FROM ks.t")
			for _, s := range []int16{2, 3, 4} {
				c.send(frame(cql.V4, 0, s, cql.OpQuery, q))
				recvWithin(t, node.seen)
			}
			// The answer to stream 1 and the malformed frame arrive together.
			c.send(frame(cql.V4, 0, 1, cql.OpQuery, q), frame(cql.ResponseBit|cql.V4, 0, 9, cql.OpQuery, nil))

			var got []string
			for {
				h, body, err := c.tryRecv()
				if err != nil {
					break
				}
				var code int32
				if h.Opcode == cql.OpError {
					e, _ := cql.DecodeError(body)
					code = e.Code
				}
				got = append(got, fmt.Sprintf("%s/%d/0x%04x", h.Opcode, h.Stream, code))
			}
			want := fmt.Sprintf("%s/9/0x%04x", cql.OpError, cql.ErrCodeProtocol)
			if len(got) == 0 || got[len(got)-1] != want {
				t.Fatalf("got %v before close; want the last frame to be %s", got, want)
			}
			for _, f := range got[:len(got)-1] {
				if f != fmt.Sprintf("%s/1/0x%04x", cql.OpResult, 0) {
					t.Errorf("got %s before the ProtocolError; want only the RESULT on stream 1", f)
				}
			}
		})
	}
}

// A drained connection with nothing in flight closes at once: Serve does not wait for the
// drain timeout.
func TestDrainIdleConnection(t *testing.T) {
	for _, path := range connPaths {
		t.Run(path.name, func(t *testing.T) {
			node := mustFakeNode(t)
			p, dial := path.proxy(t, Config{NodeAddr: node.addr(), DrainTimeout: time.Hour})
			c := dial()
			c.send(frame(cql.V4, 0, 1, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
			if h, _ := c.recv(); h.Stream != 1 || h.Opcode != cql.OpResult {
				t.Fatalf("got %s on stream %d; want RESULT on stream 1", h.Opcode, h.Stream)
			}
			p.cancel()
			if err := recvWithin(t, p.done); err != nil {
				t.Errorf("Serve returned %v; want nil", err)
			}
			close(p.done)
			c.expectClosed()
		})
	}
}

// A client that goes away with requests in flight ends its connection: the node connection
// is closed too, so that the response goroutine, waiting for answers that will never be
// forwarded, does not hold the connection open.
func TestClientGoneWithRequestsInFlight(t *testing.T) {
	for _, path := range connPaths {
		t.Run(path.name, func(t *testing.T) {
			node := mustFakeNode(t)
			node.seen = make(chan seenFrame, 16)
			node.handle = func(*fakeConn, cql.Header, []byte) {} // holds every request
			p, dial := path.proxy(t, Config{NodeAddr: node.addr()})
			c := dial()
			c.send(frame(cql.V4, 0, 7, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
			recvWithin(t, node.seen)
			c.c.Close()

			deadline := time.Now().Add(testTimeout)
			for p.Stats().Connections > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("connection still open %v after its client closed", testTimeout)
				}
				time.Sleep(time.Millisecond)
			}
			if got := p.Stats().NodeFailures; got != 0 {
				t.Errorf("Stats().NodeFailures = %d; want 0: the node did not fail", got)
			}
		})
	}
}
