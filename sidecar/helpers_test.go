package sidecar

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/frames"
	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/tracecar/tracecar/internal/cql"
)

// testTimeout bounds every blocking step of a test, so that a bug fails the test instead
// of hanging it. Nothing is asserted about time.
const testTimeout = 20 * time.Second

// The frames and bodies the tests send and answer with.
var (
	frame          = frames.Frame
	queryBody      = frames.QueryBody
	voidBody       = frames.VoidBody
	executeFrame   = frames.ExecuteFrame
	rowsBody       = frames.RowsBody
	localColumns   = frames.LocalColumns
	peersV2Columns = frames.PeersV2Columns
	ip             = frames.IP
	port           = frames.Port
	text           = frames.Text
)

// fakeNode is a goroutine speaking frames: by default it answers every request with a
// RESULT Void on the request's stream. Tests replace handle to answer otherwise.
type fakeNode struct {
	ln     net.Listener
	handle func(fc *fakeConn, h cql.Header, body []byte)

	mu    sync.Mutex
	conns []*fakeConn
	seen  chan seenFrame // every request, when not nil
	wg    sync.WaitGroup
}

// seenFrame is a request as the node received it.
type seenFrame struct {
	h     cql.Header
	frame []byte
}

type fakeConn struct {
	net.Conn
	wmu sync.Mutex
}

// send writes frames in one write.
func (fc *fakeConn) send(frames ...[]byte) error {
	var b []byte
	for _, f := range frames {
		b = append(b, f...)
	}
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_, err := fc.Write(b)
	return err
}

func mustFakeNode(tb testing.TB) *fakeNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	n := &fakeNode{ln: ln}
	n.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, voidBody()))
	}
	n.wg.Add(1)
	go n.accept()
	tb.Cleanup(n.close)
	return n
}

func (n *fakeNode) addr() string { return n.ln.Addr().String() }

func (n *fakeNode) accept() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		fc := &fakeConn{Conn: c}
		n.mu.Lock()
		n.conns = append(n.conns, fc)
		n.mu.Unlock()
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer c.Close()
			r := bufio.NewReader(c)
			var buf []byte
			for {
				h, body, b, err := cql.ReadFrame(r, buf)
				if err != nil {
					return
				}
				buf = b
				if n.seen != nil {
					n.seen <- seenFrame{h, append([]byte(nil), b...)}
				}
				n.handle(fc, h, body)
			}
		}()
	}
}

// connections returns the node's connections so far.
func (n *fakeNode) connections() []*fakeConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*fakeConn(nil), n.conns...)
}

// killConns closes every connection the node accepted.
func (n *fakeNode) killConns() {
	for _, c := range n.connections() {
		c.Close()
	}
}

func (n *fakeNode) close() {
	n.ln.Close()
	n.killConns()
	n.wg.Wait()
}

// testProxy is a Proxy serving on 127.0.0.1:0.
type testProxy struct {
	*Proxy
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func mustProxy(tb testing.TB, cfg Config) *testProxy {
	tb.Helper()
	return mustProxyWith(tb, New(cfg, nil), nil)
}

// mustProxyWith serves p; wrap, when not nil, wraps the listener.
func mustProxyWith(tb testing.TB, p *Proxy, wrap func(net.Listener) net.Listener) *testProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	return serveProxy(tb, p, ln, addr)
}

// serveProxy serves p on ln, whose address is addr, until the test ends.
func serveProxy(tb testing.TB, p *Proxy, ln net.Listener, addr string) *testProxy {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tp := &testProxy{Proxy: p, addr: addr, cancel: cancel, done: make(chan error, 1)}
	go func() { tp.done <- p.Serve(ctx, ln) }()
	tb.Cleanup(func() { tp.stop(tb) })
	return tp
}

// stop cancels Serve and returns its result, once.
func (tp *testProxy) stop(tb testing.TB) error {
	tb.Helper()
	tp.cancel()
	select {
	case err, ok := <-tp.done:
		if ok {
			close(tp.done)
		}
		return err
	case <-time.After(testTimeout):
		tb.Fatal("Serve did not return after its context was cancelled")
		return nil
	}
}

// testClient speaks frames to the proxy.
type testClient struct {
	tb  testing.TB
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

func mustDial(tb testing.TB, addr string) *testClient {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testTimeout))
	return &testClient{tb: tb, c: c, r: bufio.NewReader(c)}
}

// send writes frames in one write.
func (tc *testClient) send(frames ...[]byte) {
	tc.tb.Helper()
	var b []byte
	for _, f := range frames {
		b = append(b, f...)
	}
	if _, err := tc.c.Write(b); err != nil {
		tc.tb.Fatalf("write to proxy: %v", err)
	}
}

// recv reads one v3/v4 frame; the body is valid until the next call.
func (tc *testClient) recv() (cql.Header, []byte) {
	tc.tb.Helper()
	h, body, err := tc.tryRecv()
	if err != nil {
		tc.tb.Fatalf("read from proxy: %v", err)
	}
	return h, body
}

func (tc *testClient) tryRecv() (cql.Header, []byte, error) {
	h, body, b, err := cql.ReadFrame(tc.r, tc.buf)
	tc.buf = b
	return h, body, err
}

// expectClosed reads until the proxy closes the connection, and fails on any frame.
func (tc *testClient) expectClosed() {
	tc.tb.Helper()
	var b [1]byte
	_, err := io.ReadFull(tc.r, b[:])
	if err == nil {
		tc.tb.Fatalf("got more data from the proxy; want the connection closed")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		tc.tb.Fatalf("proxy connection still open after %v", testTimeout)
	}
}

// countingConn counts the Write calls on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// countingListener wraps every accepted connection in a countingConn.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

func recvWithin[T any](tb testing.TB, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		tb.Fatalf("nothing received in %v", testTimeout)
		var zero T
		return zero
	}
}

// socketlessConn is a connection of p at protocol version v without sockets, for driving
// the per-frame work that both transports run.
func socketlessConn(p *Proxy, v byte) *conn {
	c := &conn{p: &p.env}
	ap := netip.MustParseAddrPort("127.0.0.1:1")
	c.pipe.Init(p.env.sh, ap, ap, false)
	c.pipe.Version, c.pipe.NodeAddr = v, ap
	c.pipe.Views = new(pipeline.Views)
	return c
}
