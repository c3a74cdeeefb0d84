package sidecar

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// readyNode is a fake node that answers STARTUP with READY and echoes other requests' bodies
// in a RESULT.
func readyNode(tb testing.TB) *fakeNode {
	node := mustFakeNode(tb)
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		if h.Opcode == cql.OpStartup {
			fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpReady, nil))
			return
		}
		fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, body))
	}
	return node
}

func startupFrame(stream int16) []byte {
	return frame(cql.V4, 0, stream, cql.OpStartup, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}.AppendBody(nil, cql.V4))
}

// header builds the header of a frame claiming a body of n bytes, without the body.
func header(stream int16, op cql.Opcode, n uint32) []byte {
	return cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: stream, Opcode: op, Length: n})
}

// expectTooBig reads Cassandra's ProtocolError for an oversized frame on stream, then the close.
func expectTooBig(t *testing.T, c *testClient, stream int16, n uint32, limit int) {
	t.Helper()
	h, body := c.recv()
	e, err := cql.DecodeError(body)
	if err != nil || h.Opcode != cql.OpError || h.Stream != stream || e.Code != cql.ErrCodeProtocol {
		t.Fatalf("got %s on stream %d %+v; want a ProtocolError on stream %d", h.Opcode, h.Stream, e, stream)
	}
	if want := cql.FrameTooBigMessage(n, limit); e.Message != want {
		t.Fatalf("message %q, want %q", e.Message, want)
	}
	c.expectClosed()
}

func TestFrameSizeLimits(t *testing.T) {
	node := readyNode(t)
	p := mustProxy(t, Config{NodeAddr: node.addr(), MaxFrameSize: 1 << 20})
	good := mustDial(t, p.addr)
	good.send(startupFrame(1))
	good.recv()
	q := frame(cql.V4, 0, 2, cql.OpQuery, queryBody("SELECT * FROM ks.t"))

	t.Run("before STARTUP over 64 KiB", func(t *testing.T) {
		c := mustDial(t, p.addr)
		c.send(header(9, cql.OpStartup, 64<<10))
		expectTooBig(t, c, 9, 64<<10, cql.MaxStartupFrameSize)
	})
	t.Run("before READY over 64 KiB", func(t *testing.T) {
		c := mustDial(t, p.addr)
		c.send(header(3, cql.OpQuery, 200<<20))
		expectTooBig(t, c, 3, 200<<20, cql.MaxStartupFrameSize)
	})
	t.Run("after READY 64 KiB is accepted", func(t *testing.T) {
		c := mustDial(t, p.addr)
		c.send(startupFrame(1))
		c.recv()
		body := bytes.Repeat([]byte{'x'}, 64<<10)
		c.send(frame(cql.V4, 0, 4, cql.OpQuery, body))
		if h, got := c.recv(); h.Stream != 4 || !bytes.Equal(got, body) {
			t.Fatalf("got stream %d, %d bytes; want the 64 KiB body echoed on stream 4", h.Stream, len(got))
		}
	})
	t.Run("after READY over the limit", func(t *testing.T) {
		c := mustDial(t, p.addr)
		c.send(startupFrame(1))
		c.recv()
		c.send(header(77, cql.OpQuery, 1<<20-cql.HeaderSize+1))
		expectTooBig(t, c, 77, 1<<20-cql.HeaderSize+1, 1<<20)
	})
	good.send(q)
	if h, _ := good.recv(); h.Stream != 2 || h.Opcode != cql.OpResult {
		t.Fatalf("other client got %+v; want RESULT on stream 2", h)
	}
	if got := p.Stats().TooBig; got != 3 {
		t.Errorf("Stats().TooBig = %d, want 3", got)
	}
}

func TestConfigFrameSizeErrors(t *testing.T) {
	for _, n := range []int{-1, 5, cql.MaxBodySize + 1} {
		p := New(Config{NodeAddr: "127.0.0.1:1", MaxFrameSize: n}, nil)
		if p.cfgErr == nil || !strings.Contains(p.cfgErr.Error(), "max frame size") {
			t.Errorf("MaxFrameSize %d: error %v, want one naming the max frame size", n, p.cfgErr)
		}
	}
}

func TestMaxConnections(t *testing.T) {
	node := readyNode(t)
	var logBuf syncBuffer
	log := zerolog.New(&logBuf)
	p := mustProxy(t, Config{NodeAddr: node.addr(), MaxConnections: 2, Logger: &log})
	a, b := mustDial(t, p.addr), mustDial(t, p.addr)
	for _, c := range []*testClient{a, b} {
		c.send(startupFrame(1))
		c.recv()
	}
	refused := mustDial(t, p.addr)
	refused.expectClosed()
	if got := p.Stats().Refused; got != 1 {
		t.Errorf("Stats().Refused = %d, want 1", got)
	}
	if !strings.Contains(logBuf.String(), "connection limit reached (--max-connections)") {
		t.Errorf("log %q lacks the connection limit line", logBuf.String())
	}
	// Held connections keep working; once one ends, a new one is accepted.
	a.send(frame(cql.V4, 0, 2, cql.OpQuery, queryBody("SELECT 1")))
	if h, _ := a.recv(); h.Opcode != cql.OpResult {
		t.Fatalf("held connection got %s, want RESULT", h.Opcode)
	}
	b.c.Close()
	deadline := time.Now().Add(testTimeout)
	for p.Stats().Connections > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c := mustDial(t, p.addr)
	c.send(startupFrame(1))
	if h, _ := c.recv(); h.Opcode != cql.OpReady {
		t.Fatalf("new connection after one ended got %s, want READY", h.Opcode)
	}
}

func TestSupportedLosesShardAwarePorts(t *testing.T) {
	node := mustFakeNode(t)
	opts := map[string][]string{
		"CQL_VERSION":                 {"3.4.6"},
		"SCYLLA_SHARD":                {"0"},
		"SCYLLA_NR_SHARDS":            {"4"},
		"SCYLLA_SHARD_AWARE_PORT":     {"19042"},
		"SCYLLA_SHARD_AWARE_PORT_SSL": {"19142"},
	}
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		fc.send(cql.AppendFrame(nil, cql.Header{Version: cql.ResponseBit | h.Version, Stream: h.Stream}, cql.Supported{Options: opts}))
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	c := mustDial(t, p.addr)
	c.send(frame(cql.V4, 0, 3, cql.OpOptions, nil))
	h, body := c.recv()
	m, err := cql.DecodeSupported(body)
	if err != nil || h.Opcode != cql.OpSupported || h.Stream != 3 {
		t.Fatalf("got %s on stream %d (%v); want SUPPORTED on stream 3", h.Opcode, h.Stream, err)
	}
	for _, k := range []string{"SCYLLA_SHARD_AWARE_PORT", "SCYLLA_SHARD_AWARE_PORT_SSL"} {
		if v, ok := m.Options[k]; ok {
			t.Errorf("SUPPORTED carries %s=%v through the sidecar", k, v)
		}
	}
	for _, k := range []string{"CQL_VERSION", "SCYLLA_SHARD", "SCYLLA_NR_SHARDS"} {
		if _, ok := m.Options[k]; !ok {
			t.Errorf("SUPPORTED lost %s; only the shard-aware ports are removed", k)
		}
	}
}

func TestByteBudget(t *testing.T) {
	var b byteBudget
	b.init(100)
	never := func() bool { return false }
	if !b.acquire(60, never) || !b.acquire(40, never) {
		t.Fatal("acquire within the budget failed")
	}
	got := make(chan bool)
	go func() { got <- b.acquire(50, never) }()
	select {
	case <-got:
		t.Fatal("acquire beyond the budget did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(60)
	if !recvWithin(t, got) {
		t.Fatal("acquire after a release failed")
	}
	var stop atomic.Bool
	go func() { got <- b.acquire(80, stop.Load) }()
	stop.Store(true)
	if recvWithin(t, got) {
		t.Fatal("acquire succeeded after stop; want false")
	}
	b.release(40)
	b.release(50)
	if !b.acquire(1000, never) {
		t.Fatal("a request larger than the budget must pass when nothing is held")
	}
}

// budgetProbe returns what b has in use, and a wait until that is want.
func budgetProbe(t *testing.T, b *byteBudget) (used func() int64, waitUsed func(want int64)) {
	used = func() int64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.used
	}
	waitUsed = func(want int64) {
		t.Helper()
		deadline := time.Now().Add(testTimeout)
		for used() != want {
			if time.Now().After(deadline) {
				t.Fatalf("budget in use %d; want %d", used(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return used, waitUsed
}

// TestLargeFramesShareTheBudget: on either data path, a frame larger than the read buffers
// is charged to the proxy-wide budget of frames held whole (MaxRequestDataInFlight) before
// its body is read, the budget never holds more than its size, and a connection whose
// frame did not fit is read once a frame ahead of it is forwarded; closing a connection
// with a frame half read gives its share back.
func TestLargeFramesShareTheBudget(t *testing.T) {
	const body = 4 << 20
	size := int64(body + cql.HeaderSize)
	node := readyNode(t)
	// The budget is raised to MaxFrameSize when smaller: the frame size is the limit.
	p := mustProxy(t, Config{NodeAddr: node.addr(), MaxFrameSize: int(size), MaxRequestDataInFlight: int(2 * size)})
	used, waitUsed := budgetProbe(t, &p.env.held)
	payload := bytes.Repeat([]byte{'q'}, body)
	var cs []*testClient
	for i := range 3 {
		c := mustDial(t, p.addr)
		c.send(startupFrame(1))
		c.recv()
		// The header and the first 64 KiB of the body: the frame is half read.
		c.send(append(header(2, cql.OpQuery, body), payload[:64<<10]...))
		cs = append(cs, c)
		if i < 2 {
			waitUsed(int64(i+1) * size)
		}
	}
	if got := used(); got != 2*size {
		t.Fatalf("budget in use %d with a third frame waiting; want %d", got, 2*size)
	}
	// The first frame completes and is forwarded: the third connection gets its share.
	cs[0].send(payload[64<<10:])
	if h, got := cs[0].recv(); h.Stream != 2 || len(got) != body {
		t.Fatalf("first frame: got stream %d with %d bytes; want its body echoed on stream 2", h.Stream, len(got))
	}
	cs[2].send(payload[64<<10:])
	if h, got := cs[2].recv(); h.Stream != 2 || len(got) != body {
		t.Fatalf("third frame: got stream %d with %d bytes; want its body echoed on stream 2", h.Stream, len(got))
	}
	waitUsed(size) // the second frame, still half read
	cs[1].c.Close()
	waitUsed(0)
}

// TestSupportedRewriteReused checks the rewrite kept for the node's next SUPPORTED
// (Proxy.supported): each connection's answer keeps its own stream id and its own values
// (ScyllaDB's SCYLLA_SHARD differs from one connection to the next), a SUPPORTED without
// the ports passes unchanged, and nothing goes through stale. The node encodes its options
// in one order, as a real one does, so that an answer like the last one is reused.
func TestSupportedRewriteReused(t *testing.T) {
	node := mustFakeNode(t)
	var mu sync.Mutex
	answers := 0
	node.handle = func(fc *fakeConn, h cql.Header, _ []byte) {
		mu.Lock()
		i := answers
		answers++
		mu.Unlock()
		opts := [][2]string{{"CQL_VERSION", "3.4.6"}, {"SCYLLA_SHARD", strconv.Itoa(i / 2 % 2)}}
		if i%3 != 2 {
			opts = append(opts, [2]string{"SCYLLA_SHARD_AWARE_PORT", "19042"})
		}
		body := binary.BigEndian.AppendUint16(nil, uint16(len(opts)))
		for _, kv := range opts {
			// [string] key, then a [string list] of one value
			body = appendString(binary.BigEndian.AppendUint16(appendString(body, kv[0]), 1), kv[1])
		}
		fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpSupported, body))
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	for i := range 12 {
		c := mustDial(t, p.addr)
		stream := int16(10 + i)
		c.send(frame(cql.V4, 0, stream, cql.OpOptions, nil))
		h, body := c.recv()
		m, err := cql.DecodeSupported(body)
		if err != nil || h.Opcode != cql.OpSupported || h.Stream != stream {
			t.Fatalf("connection %d: got %s on stream %d (%v); want SUPPORTED on stream %d", i, h.Opcode, h.Stream, err, stream)
		}
		if v, ok := m.Options["SCYLLA_SHARD_AWARE_PORT"]; ok {
			t.Errorf("connection %d: SUPPORTED carries SCYLLA_SHARD_AWARE_PORT=%v through the sidecar", i, v)
		}
		if got, want := m.Options["SCYLLA_SHARD"], strconv.Itoa(i/2%2); len(got) != 1 || got[0] != want {
			t.Errorf("connection %d: SCYLLA_SHARD = %v; want [%s] (the node's answer to this connection)", i, got, want)
		}
		c.c.Close()
	}
	// Of every three answers two had the ports removed.
	if got := p.Stats().Rewritten; got != 8 {
		t.Errorf("Stats().Rewritten = %d; want 8", got)
	}
}

// appendString appends a CQL [string].
func appendString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(s))), s...)
}
