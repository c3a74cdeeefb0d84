package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
)

func TestForwardPreservesStreamsAndBytes(t *testing.T) {
	node := mustFakeNode(t)
	node.seen = make(chan seenFrame, 16)
	// The node answers with the request's stream id and body echoed in a RESULT Rows-like
	// body, so the test sees that responses go back on their stream unchanged.
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		fc.send(frame(cql.ResponseBit|h.Version, h.Flags&cql.FlagTracing, h.Stream, cql.OpResult, body))
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	c := mustDial(t, p.addr)

	tests := []struct {
		name    string
		version byte
		flags   byte
		stream  int16
		op      cql.Opcode
		body    []byte
	}{
		{"options v4 stream 0", cql.V4, 0, 0, cql.OpOptions, nil},
		{"query v4", cql.V4, 0, 1, cql.OpQuery, queryBody("SELECT * FROM ks.t")},
		{"high stream", cql.V4, 0, 32767, cql.OpQuery, queryBody("SELECT k FROM ks.t")},
		{"tracing flag kept", cql.V4, cql.FlagTracing, 300, cql.OpQuery, queryBody("INSERT INTO ks.t (k) VALUES (1)")},
		{"v3 frame", cql.V3, 0, 7, cql.OpQuery, queryBody("SELECT * FROM ks.t")},
		{"register", cql.V4, 0, 12, cql.OpRegister, cql.Register{Events: []string{cql.EventTopologyChange}}.AppendBody(nil, cql.V4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := frame(tt.version, tt.flags, tt.stream, tt.op, tt.body)
			c.send(want)
			got := recvWithin(t, node.seen)
			if !bytes.Equal(got.frame, want) {
				t.Errorf("node got frame %x; want %x", got.frame, want)
			}
			h, body := c.recv()
			if h.Stream != tt.stream || h.Version != cql.ResponseBit|tt.version || h.Opcode != cql.OpResult {
				t.Errorf("client got header %+v; want stream %d, version 0x%02x, RESULT", h, tt.stream, cql.ResponseBit|tt.version)
			}
			if !bytes.Equal(body, tt.body) {
				t.Errorf("client got body %x; want %x", body, tt.body)
			}
		})
	}
	st := p.Stats()
	if got, want := st.TotalRequests(), uint64(len(tests)); got != want {
		t.Errorf("Stats().TotalRequests() = %d; want %d", got, want)
	}
	if got, want := st.Requests[cql.OpQuery], uint64(4); got != want {
		t.Errorf("Stats().Requests[QUERY] = %d; want %d", got, want)
	}
	if got, want := st.Responses, uint64(len(tests)); got != want {
		t.Errorf("Stats().Responses = %d; want %d", got, want)
	}
}

func TestForwardLargeFrames(t *testing.T) {
	node := mustFakeNode(t)
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		if h.Opcode == cql.OpStartup {
			fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpReady, nil))
			return
		}
		fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, body))
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	c := mustDial(t, p.addr)
	// Frames over 64 KiB are accepted once the handshake is done.
	c.send(frame(cql.V4, 0, 1, cql.OpStartup, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}.AppendBody(nil, cql.V4)))
	if h, _ := c.recv(); h.Opcode != cql.OpReady {
		t.Fatalf("STARTUP: got %s, want READY", h.Opcode)
	}
	for _, size := range []int{readBufferSize - cql.HeaderSize, readBufferSize, 3*readBufferSize + 17, 1 << 20} {
		body := bytes.Repeat([]byte{byte(size)}, size)
		// OPTIONS with a body is nonsense to a node, but the proxy does not read it, so
		// the frame is streamed through; QUERY is read whole.
		for _, op := range []cql.Opcode{cql.OpOptions, cql.OpQuery} {
			c.send(frame(cql.V4, 0, 5, op, body))
			h, got := c.recv()
			if h.Stream != 5 || !bytes.Equal(got, body) {
				t.Errorf("%s of %d bytes: got stream %d, %d bytes back; want stream 5 and the same body", op, size, h.Stream, len(got))
			}
		}
	}
}

func TestCoalescing(t *testing.T) {
	const frames = 10
	node := mustFakeNode(t)
	var nodeConn atomic.Pointer[fakeConn]
	got := make(chan struct{}, frames)
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		nodeConn.Store(fc)
		got <- struct{}{}
	}
	var toNode, toClient atomic.Int64
	p := New(Config{NodeAddr: node.addr()}, nil)
	p.env.dial = func(ctx context.Context) (net.Conn, error) {
		c, err := net.Dial("tcp", node.addr())
		return countingConn{c, &toNode}, err
	}
	tp := mustProxyWith(t, p, func(ln net.Listener) net.Listener { return countingListener{ln, &toClient} })
	c := mustDial(t, tp.addr)

	var reqs [][]byte
	for i := range frames {
		reqs = append(reqs, frame(cql.V4, 0, int16(i), cql.OpQuery, queryBody("SELECT * FROM ks.t")))
	}
	c.send(reqs...) // one write
	for range frames {
		recvWithin(t, got)
	}
	if n := toNode.Load(); n >= frames {
		t.Errorf("proxy made %d writes to the node for %d frames that arrived together; want fewer", n, frames)
	}

	var resps [][]byte
	for i := range frames {
		resps = append(resps, frame(cql.ResponseBit|cql.V4, 0, int16(i), cql.OpResult, voidBody()))
	}
	if err := nodeConn.Load().send(resps...); err != nil {
		t.Fatal(err)
	}
	for i := range frames {
		h, _ := c.recv()
		if h.Stream != int16(i) {
			t.Errorf("response %d on stream %d; want %d", i, h.Stream, i)
		}
	}
	if n := toClient.Load(); n >= frames {
		t.Errorf("proxy made %d writes to the client for %d frames that arrived together; want fewer", n, frames)
	}
}

func TestVersionGate(t *testing.T) {
	node := mustFakeNode(t)
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	p4 := mustProxy(t, Config{NodeAddr: node.addr(), MaxProtocolVersion: 4})
	tests := []struct {
		name        string
		max         byte // Config.MaxProtocolVersion, 0 for the default
		version     byte
		stream      int16
		wantVersion byte // of the answer
	}{
		{"v5 with max 4", 4, 5, 3, 0x84},
		{"v6", 0, 6, 0, 0x84},
		{"v6 with max 4", 4, 6, 5, 0x84},
		{"dse v1", 0, 0x41, 1, 0x84},
		{"dse v2", 0, 0x42, 9, 0x84},
		{"v2", 0, 2, 4, 0x82},
		{"v1", 0, 1, 2, 0x81},
	}
	rejected := map[*testProxy]uint64{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, max := p, cql.V5
			if tt.max != 0 {
				tp, max = p4, tt.max
			}
			rejected[tp]++
			c := mustDial(t, tp.addr)
			startup := cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}.AppendBody(nil, cql.V4)
			var req []byte
			if tt.version <= 2 {
				req = append(req, tt.version, 0, byte(tt.stream), byte(cql.OpStartup))
				req = binary.BigEndian.AppendUint32(req, uint32(len(startup)))
				req = append(req, startup...)
			} else {
				req = frame(tt.version, 0, tt.stream, cql.OpStartup, startup)
			}
			c.send(req)

			var stream int16
			var op cql.Opcode
			var body []byte
			if tt.version <= 2 {
				var hb [8]byte
				if _, err := c.r.Read(hb[:1]); err != nil {
					t.Fatal(err)
				}
				if _, err := readAll(c, hb[1:]); err != nil {
					t.Fatal(err)
				}
				if hb[0] != tt.wantVersion {
					t.Errorf("answer version 0x%02x; want 0x%02x", hb[0], tt.wantVersion)
				}
				stream, op = int16(int8(hb[2])), cql.Opcode(hb[3])
				body = make([]byte, binary.BigEndian.Uint32(hb[4:]))
				if _, err := readAll(c, body); err != nil {
					t.Fatal(err)
				}
			} else {
				var h cql.Header
				h, body = c.recv()
				if h.Version != tt.wantVersion {
					t.Errorf("answer version 0x%02x; want 0x%02x", h.Version, tt.wantVersion)
				}
				stream, op = h.Stream, h.Opcode
			}
			if op != cql.OpError || stream != tt.stream {
				t.Fatalf("got %s on stream %d; want ERROR on stream %d", op, stream, tt.stream)
			}
			e, err := cql.DecodeError(body)
			if err != nil {
				t.Fatal(err)
			}
			if want := cql.UnsupportedVersionMessage(tt.version&^cql.ResponseBit, max); e.Code != cql.ErrCodeProtocol || e.Message != want {
				t.Errorf("got error 0x%04x %q; want 0x%04x %q", e.Code, e.Message, cql.ErrCodeProtocol, want)
			}

			// The driver steps down to v4 on the same connection.
			c.send(frame(cql.V4, 0, 1, cql.OpOptions, nil))
			h, _ := c.recv()
			if h.Version != cql.ResponseBit|cql.V4 || h.Stream != 1 || h.Opcode != cql.OpResult {
				t.Errorf("after stepping down got %+v; want the node's answer on stream 1", h)
			}
		})
	}
	for tp, want := range rejected {
		if got := tp.Stats().Rejected; got != want {
			t.Errorf("Stats().Rejected = %d; want %d", got, want)
		}
	}
}

func readAll(c *testClient, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestNodeDeathFailsInFlightRequests(t *testing.T) {
	node := mustFakeNode(t)
	node.seen = make(chan seenFrame, 16)
	// The node answers stream 1 only, then holds the rest.
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		if h.Stream == 1 {
			fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, voidBody()))
		}
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	c := mustDial(t, p.addr)
	q := queryBody("SELECT * FROM ks.t")
	c.send(frame(cql.V4, 0, 1, cql.OpQuery, q))
	recvWithin(t, node.seen)
	if h, _ := c.recv(); h.Stream != 1 {
		t.Fatalf("got stream %d; want 1", h.Stream)
	}
	inFlight := []int16{2, 9, 4000}
	for _, s := range inFlight {
		c.send(frame(cql.V4, 0, s, cql.OpQuery, q))
		recvWithin(t, node.seen)
	}
	node.killConns()

	got := map[int16]bool{}
	for range inFlight {
		h, body := c.recv()
		e, err := cql.DecodeError(body)
		if h.Opcode != cql.OpError || err != nil {
			t.Fatalf("got %s (%v); want ERROR", h.Opcode, err)
		}
		if e.Code != cql.ErrCodeServer || !strings.Contains(e.Message, "connection to node "+node.addr()+" lost") {
			t.Errorf("got error 0x%04x %q; want server error naming the lost node", e.Code, e.Message)
		}
		got[h.Stream] = true
	}
	for _, s := range inFlight {
		if !got[s] {
			t.Errorf("no error frame for in-flight stream %d", s)
		}
	}
	c.expectClosed()
	if got := p.Stats().NodeFailures; got != 1 {
		t.Errorf("Stats().NodeFailures = %d; want 1", got)
	}

	// A new connection dials the node again.
	c2 := mustDial(t, p.addr)
	c2.send(frame(cql.V4, 0, 1, cql.OpQuery, q))
	if h, _ := c2.recv(); h.Stream != 1 || h.Opcode != cql.OpResult {
		t.Errorf("new connection got %+v; want RESULT on stream 1", h)
	}
}

func TestNodeUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := mustProxy(t, Config{NodeAddr: addr})
	c := mustDial(t, p.addr)
	c.send(frame(cql.V4, 0, 6, cql.OpOptions, nil))
	h, body := c.recv()
	e, err := cql.DecodeError(body)
	if h.Opcode != cql.OpError || h.Stream != 6 || err != nil || e.Code != cql.ErrCodeOverloaded {
		t.Fatalf("got %s on stream %d, %+v; want Overloaded ERROR on stream 6", h.Opcode, h.Stream, e)
	}
	if !strings.Contains(e.Message, addr) {
		t.Errorf("error message %q does not name the node %s", e.Message, addr)
	}
	c.expectClosed()
}

func TestMalformedFrameClosesOnlyThatClient(t *testing.T) {
	node := mustFakeNode(t)
	p := mustProxy(t, Config{NodeAddr: node.addr(), MaxFrameSize: 1 << 20})
	tests := []struct {
		name    string
		garbage []byte
	}{
		{"response bit", frame(cql.ResponseBit|cql.V4, 0, 3, cql.OpQuery, nil)},
		{"version change to 5", frame(5, 0, 3, cql.OpQuery, nil)},
		{"huge length", frame(cql.V4, 0, 3, cql.OpQuery, nil)[:5:5]},
		{"zero bytes", make([]byte, 64)},
	}
	tests[2].garbage = append(tests[2].garbage, 0x7f, 0xff, 0xff, 0xff)

	good := mustDial(t, p.addr)
	q := frame(cql.V4, 0, 1, cql.OpQuery, queryBody("SELECT * FROM ks.t"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := mustDial(t, p.addr)
			bad.send(q) // opens the connection with a good frame
			bad.recv()
			bad.send(tt.garbage)
			// A ProtocolError may come first; then the connection closes.
			if h, body, err := bad.tryRecv(); err == nil {
				if e, _ := cql.DecodeError(body); h.Opcode != cql.OpError || e.Code != cql.ErrCodeProtocol {
					t.Errorf("got %s %+v before close; want a ProtocolError or nothing", h.Opcode, e)
				}
				bad.expectClosed()
			}
			good.send(q)
			if h, _ := good.recv(); h.Stream != 1 || h.Opcode != cql.OpResult {
				t.Errorf("other client got %+v; want RESULT on stream 1", h)
			}
		})
	}
	// Garbage as the very first bytes closes the connection without dialling the node.
	bad := mustDial(t, p.addr)
	bad.send(make([]byte, 16))
	if _, _, err := bad.tryRecv(); err == nil {
		t.Errorf("got a frame after a zero version byte; want the connection closed")
	}
}

func TestSystemTableRewrite(t *testing.T) {
	nodeLocal := [][]byte{text("local"), text("datacenter1"), ip("10.9.9.9"), port(9042), ip("10.9.9.9")}
	peer := [][]byte{ip("10.0.0.2"), ip("10.0.0.2"), port(9042)}
	preparedID := []byte("0123456789abcdef")

	tests := []struct {
		name        string
		advertise   string
		compression string
		op          cql.Opcode
		query       string
		response    []byte
		wantRows    [][][]byte // nil: the response must come back byte for byte
	}{
		{
			name: "local", advertise: "192.0.2.1:9999", op: cql.OpQuery,
			query:    "SELECT * FROM system.local WHERE key='local'",
			response: rowsBody("local", localColumns(), false, nodeLocal),
			wantRows: [][][]byte{{text("local"), text("datacenter1"), ip("192.0.2.1"), port(9999), ip("192.0.2.1")}},
		},
		{
			name: "local lz4", advertise: "192.0.2.1:9999", compression: "lz4", op: cql.OpQuery,
			query:    "select rpc_address, rpc_port from SYSTEM.LOCAL",
			response: rowsBody("local", localColumns(), false, nodeLocal),
			wantRows: [][][]byte{{text("local"), text("datacenter1"), ip("192.0.2.1"), port(9999), ip("192.0.2.1")}},
		},
		{
			name: "local snappy quoted", advertise: "192.0.2.1", compression: "snappy", op: cql.OpQuery,
			query:    `SELECT * FROM "system"."local"`,
			response: rowsBody("local", localColumns(), false, nodeLocal),
			// Without a port in AdvertiseAddr the proxy's own port is used; checked below.
			wantRows: [][][]byte{{text("local"), text("datacenter1"), ip("192.0.2.1"), nil, ip("192.0.2.1")}},
		},
		{
			// The FROM lies beyond the start of the body that is decompressed first.
			name: "local lz4 long select", advertise: "192.0.2.1:9999", compression: "lz4", op: cql.OpQuery,
			query:    "SELECT " + strings.Repeat("rpc_address, ", 30) + "rpc_port FROM system.local",
			response: rowsBody("local", localColumns(), false, nodeLocal),
			wantRows: [][][]byte{{text("local"), text("datacenter1"), ip("192.0.2.1"), port(9999), ip("192.0.2.1")}},
		},
		{
			name: "local snappy after long comment", advertise: "192.0.2.1:9999", compression: "snappy", op: cql.OpQuery,
			query:    "/* " + strings.Repeat("topology ", 20) + "*/ SELECT " + strings.Repeat("rpc_address, ", 30) + "rpc_port FROM system.local",
			response: rowsBody("local", localColumns(), false, nodeLocal),
			wantRows: [][][]byte{{text("local"), text("datacenter1"), ip("192.0.2.1"), port(9999), ip("192.0.2.1")}},
		},
		{
			// Not a SELECT: read from the start of its body alone, and left alone.
			name: "insert snappy untouched", advertise: "192.0.2.1:9999", compression: "snappy", op: cql.OpQuery,
			query:    "INSERT INTO system.local (key) VALUES ('x')",
			response: rowsBody("local", localColumns(), false, nodeLocal),
		},
		{
			name: "peers_v2 port", advertise: "192.0.2.1:9999", op: cql.OpQuery,
			query:    "SELECT * FROM system.peers_v2",
			response: rowsBody("peers_v2", peersV2Columns(), false, peer, peer),
			wantRows: [][][]byte{{ip("10.0.0.2"), ip("10.0.0.2"), port(7777)}, {ip("10.0.0.2"), ip("10.0.0.2"), port(7777)}},
		},
		{
			name: "prepared local without metadata", advertise: "192.0.2.1:9999", op: cql.OpExecute,
			query:    "SELECT * FROM system.local WHERE key=?",
			response: rowsBody("local", localColumns(), true, nodeLocal),
			wantRows: [][][]byte{{text("local"), text("datacenter1"), ip("192.0.2.1"), port(9999), ip("192.0.2.1")}},
		},
		{
			name: "user table untouched", advertise: "192.0.2.1:9999", op: cql.OpQuery,
			query:    "SELECT * FROM ks.system_local",
			response: rowsBody("local", localColumns(), false, nodeLocal),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comp := cql.CompressorByName(tt.compression)
			var flags byte
			if comp != nil {
				flags = cql.FlagCompression
			}
			node := mustFakeNode(t)
			node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
				var resp []byte
				switch h.Opcode {
				case cql.OpStartup:
					resp = frame(cql.ResponseBit|cql.V4, 0, h.Stream, cql.OpReady, nil)
				case cql.OpPrepare:
					res := cql.PreparedResult{ID: preparedID, ResultMetadata: cql.RowsMetadata{Columns: localColumns()}}
					resp, _ = cql.AppendResponseFrame(nil, cql.Header{Version: cql.ResponseBit | cql.V4, Flags: flags, Stream: h.Stream}, cql.ResponsePrefix{}, res, comp)
				default:
					resp = cql.AppendHeader(nil, cql.Header{Version: cql.ResponseBit | cql.V4, Flags: flags, Stream: h.Stream, Opcode: cql.OpResult})
					if comp != nil {
						resp, _ = comp.Compress(resp, tt.response)
					} else {
						resp = append(resp, tt.response...)
					}
					cql.SetBodyLength(resp, len(resp)-cql.HeaderSize)
				}
				fc.send(resp)
			}
			p := mustProxy(t, Config{NodeAddr: node.addr(), AdvertiseAddr: tt.advertise, PeerPort: 7777})
			c := mustDial(t, p.addr)
			opts := map[string]string{"CQL_VERSION": "3.0.0"}
			if tt.compression != "" {
				opts["COMPRESSION"] = tt.compression
			}
			c.send(frame(cql.V4, 0, 0, cql.OpStartup, cql.Startup{Options: opts}.AppendBody(nil, cql.V4)))
			if h, _ := c.recv(); h.Opcode != cql.OpReady {
				t.Fatalf("got %s; want READY", h.Opcode)
			}
			send := func(stream int16, m cql.Message) {
				t.Helper()
				f, err := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: stream}, m, comp)
				if err != nil {
					t.Fatal(err)
				}
				c.send(f)
			}
			if tt.op == cql.OpExecute {
				send(1, cql.Prepare{Query: tt.query})
				if h, _ := c.recv(); h.Opcode != cql.OpResult {
					t.Fatalf("PREPARE got %s; want RESULT", h.Opcode)
				}
				send(2, cql.Execute{ID: preparedID, Params: cql.QueryParams{Consistency: cql.One, Flags: cql.QuerySkipMetadata}})
			} else {
				send(2, cql.Query{Query: tt.query, Params: cql.QueryParams{Consistency: cql.One}})
			}
			h, body := c.recv()
			if h.Stream != 2 || h.Opcode != cql.OpResult {
				t.Fatalf("got %s on stream %d; want RESULT on stream 2", h.Opcode, h.Stream)
			}
			if (h.Flags&cql.FlagCompression != 0) != (comp != nil) {
				t.Errorf("response flags 0x%02x; want compression %v", h.Flags, comp != nil)
			}
			if comp != nil {
				var err error
				if body, err = comp.Decompress(nil, body); err != nil {
					t.Fatal(err)
				}
			}
			if tt.wantRows == nil {
				if !bytes.Equal(body, tt.response) {
					t.Errorf("response was changed; want it forwarded as is")
				}
				return
			}
			msg, err := cql.DecodeResult(body, cql.V4)
			if err != nil {
				t.Fatal(err)
			}
			rows := msg.(cql.RowsResult).Rows
			want := tt.wantRows
			if tt.advertise == "192.0.2.1" {
				want[0][3] = port(int(netip.MustParseAddrPort(p.addr).Port()))
			}
			if len(rows) != len(want) {
				t.Fatalf("got %d rows; want %d", len(rows), len(want))
			}
			for i := range want {
				for j := range want[i] {
					if !bytes.Equal(rows[i][j], want[i][j]) {
						t.Errorf("row %d column %d = %x; want %x", i, j, rows[i][j], want[i][j])
					}
				}
			}
			if got := p.Stats().Rewritten; got != 1 {
				t.Errorf("Stats().Rewritten = %d; want 1", got)
			}
		})
	}
}

func TestDefaultAdvertiseIsClientsLocalAddress(t *testing.T) {
	node := mustFakeNode(t)
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		fc.send(frame(cql.ResponseBit|cql.V4, 0, h.Stream, cql.OpResult,
			rowsBody("local", localColumns(), false, [][]byte{text("local"), text("dc"), ip("10.9.9.9"), port(9042), ip("10.9.9.9")})))
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	c := mustDial(t, p.addr)
	c.send(frame(cql.V4, 0, 1, cql.OpQuery, queryBody("SELECT * FROM system.local")))
	_, body := c.recv()
	msg, err := cql.DecodeResult(body, cql.V4)
	if err != nil {
		t.Fatal(err)
	}
	row := msg.(cql.RowsResult).Rows[0]
	want := netip.MustParseAddrPort(c.c.RemoteAddr().String())
	gotAddr, _ := netip.AddrFromSlice(row[2])
	gotPort := binary.BigEndian.Uint32(row[3])
	if gotAddr != want.Addr() || gotPort != uint32(want.Port()) {
		t.Errorf("rpc_address %s port %d; want %s", gotAddr, gotPort, want)
	}
}

func TestEventRewrite(t *testing.T) {
	node := mustFakeNode(t)
	registered := make(chan *fakeConn, 1)
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		fc.send(frame(cql.ResponseBit|cql.V4, 0, h.Stream, cql.OpReady, nil))
		registered <- fc
	}
	p := mustProxy(t, Config{NodeAddr: node.addr(), AdvertiseAddr: "192.0.2.1:9999", PeerPort: 7777})
	c := mustDial(t, p.addr)
	c.send(frame(cql.V4, 0, 1, cql.OpRegister, cql.Register{Events: []string{cql.EventTopologyChange, cql.EventStatusChange}}.AppendBody(nil, cql.V4)))
	fc := recvWithin(t, registered)
	c.recv()
	nodeAddr := netip.MustParseAddrPort(node.addr())

	tests := []struct {
		name string
		ev   cql.Event
		want cql.Event
	}{
		{
			name: "the node itself",
			ev:   cql.Event{Type: cql.EventStatusChange, Change: "UP", Addr: nodeAddr},
			want: cql.Event{Type: cql.EventStatusChange, Change: "UP", Addr: netip.MustParseAddrPort("192.0.2.1:9999")},
		},
		{
			name: "a peer",
			ev:   cql.Event{Type: cql.EventTopologyChange, Change: "NEW_NODE", Addr: netip.MustParseAddrPort("10.0.0.7:9042")},
			want: cql.Event{Type: cql.EventTopologyChange, Change: "NEW_NODE", Addr: netip.MustParseAddrPort("10.0.0.7:7777")},
		},
		{
			name: "schema change untouched",
			ev:   cql.Event{Type: cql.EventSchemaChange, Schema: cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetKeyspace, Keyspace: "ks"}},
			want: cql.Event{Type: cql.EventSchemaChange, Schema: cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetKeyspace, Keyspace: "ks"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc.send(cql.AppendFrame(nil, cql.Header{Version: cql.ResponseBit | cql.V4, Stream: -1}, tt.ev))
			h, body := c.recv()
			if h.Stream != -1 || h.Opcode != cql.OpEvent {
				t.Fatalf("got %s on stream %d; want EVENT on stream -1", h.Opcode, h.Stream)
			}
			got, err := cql.DecodeEvent(body)
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tt.want.Type || got.Change != tt.want.Change || got.Addr != tt.want.Addr || got.Schema.Keyspace != tt.want.Schema.Keyspace {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestDrainAnswersInFlightRequests(t *testing.T) {
	node := mustFakeNode(t)
	held := make(chan func(), 1)
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		held <- func() { fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, voidBody())) }
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	c := mustDial(t, p.addr)
	c.send(frame(cql.V4, 0, 42, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
	answer := recvWithin(t, held)

	p.cancel()
	// Serve stops accepting at once.
	for {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			break
		}
		nc.Close()
	}
	select {
	case err := <-p.done:
		t.Fatalf("Serve returned %v with a request in flight", err)
	default:
	}
	answer()
	if h, _ := c.recv(); h.Stream != 42 || h.Opcode != cql.OpResult {
		t.Errorf("got %s on stream %d; want RESULT on stream 42", h.Opcode, h.Stream)
	}
	if err := recvWithin(t, p.done); err != nil {
		t.Errorf("Serve returned %v; want nil", err)
	}
	close(p.done)
	c.expectClosed()
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no node", Config{}, "no node address"},
		{"bad advertise", Config{NodeAddr: "127.0.0.1:9042", AdvertiseAddr: "localhost"}, `advertise address "localhost"`},
		{"bad peer port", Config{NodeAddr: "127.0.0.1:9042", PeerPort: 70000}, "peer port 70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			err = New(tt.cfg, nil).Serve(context.Background(), ln)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Serve() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the proxy's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogsAndMetrics(t *testing.T) {
	node := mustFakeNode(t)
	tests := []struct {
		name      string
		level     zerolog.Level
		wantLines []string
		dontWant  []string
	}{
		{"info", zerolog.InfoLevel, nil, []string{`"message":"request"`, `"message":"frame from client"`}},
		{"debug", zerolog.DebugLevel, []string{`"message":"request"`, `"op":"QUERY"`, `"stream":3`}, []string{`"message":"frame from client"`}},
		{"trace", zerolog.TraceLevel, []string{`"message":"request"`, `"message":"frame from client"`, `"message":"frame from node"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf syncBuffer
			lg := zerolog.New(&buf).Level(tt.level)
			m := &nopMetrics{}
			p := mustProxy(t, Config{NodeAddr: node.addr(), Logger: &lg, Metrics: m})
			c := mustDial(t, p.addr)
			const n = 5
			for range n {
				c.send(frame(cql.V4, 0, 3, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
				c.recv()
			}
			if got := m.requests()[cql.OpQuery]; got != n {
				t.Errorf("the metrics' request source counts %d QUERY; want %d", got, n)
			}
			if got := m.latencies.Load(); got != n {
				t.Errorf("Metrics.Latency called %d times; want %d", got, n)
			}
			if got := m.added.Load(); got != n {
				t.Errorf("Metrics.AddedLatency called %d times; want %d", got, n)
			}
			out := buf.String()
			for _, w := range tt.wantLines {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %s:\n%s", w, out)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(out, w) {
					t.Errorf("log has %s at level %s:\n%s", w, tt.level, out)
				}
			}
		})
	}
}

func TestSlowClientGetsEverything(t *testing.T) {
	const (
		requests = 256
		size     = 64 << 10 // larger than the proxy's buffers: streamed through
	)
	node := mustFakeNode(t)
	node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		b := bytes.Repeat([]byte{byte(h.Stream)}, size)
		go fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, b)) // the node does not wait for the client
	}
	p := mustProxy(t, Config{NodeAddr: node.addr()})
	c := mustDial(t, p.addr)
	var reqs [][]byte
	for i := range requests {
		reqs = append(reqs, frame(cql.V4, 0, int16(i), cql.OpQuery, queryBody("SELECT * FROM ks.t")))
	}
	c.send(reqs...)
	// Read slowly, a little at a time: the proxy must hold back rather than drop.
	c.r = bufio.NewReaderSize(smallReads{c.c}, 16)
	seen := map[int16]bool{}
	for range requests {
		h, body := c.recv()
		if len(body) != size || body[0] != byte(h.Stream) || body[size-1] != byte(h.Stream) || seen[h.Stream] {
			t.Fatalf("stream %d: got %d bytes starting %d (seen before: %v); want %d bytes of %d", h.Stream, len(body), body[0], seen[h.Stream], size, byte(h.Stream))
		}
		seen[h.Stream] = true
	}
}

// smallReads reads at most 4 KiB at a time.
type smallReads struct{ r io.Reader }

func (s smallReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 4096)]) }

// TestGateAnswerThenLoopOrFallback sends a frame of a refused version and, at once, a
// small v4 frame: the version gate queues its ProtocolError without flushing (a whole frame
// follows), so the move to the event loop, and the fall back to the goroutine path of a
// connection bound for a loop (a plaintext client gets the small gate buffers) whose node
// connection is not plain TCP, must write it out first. Frames of every size then go
// through whole.
func TestGateAnswerThenLoopOrFallback(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(map[bool]string{false: "event loop", true: "fallback"}[fallback], func(t *testing.T) {
			node := mustFakeNode(t)
			node.handle = func(fc *fakeConn, h cql.Header, body []byte) {
				fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, body))
			}
			p := New(Config{NodeAddr: node.addr()}, nil)
			if fallback {
				p.env.dial = func(ctx context.Context) (net.Conn, error) {
					c, err := net.Dial("tcp", node.addr())
					return struct{ net.Conn }{c}, err // not a *net.TCPConn: no event loop
				}
			}
			tp := mustProxyWith(t, p, nil)
			c := mustDial(t, tp.addr)
			c.send(frame(6, 0, 1, cql.OpOptions, nil), frame(cql.V4, 0, 2, cql.OpQuery, queryBody("SELECT 1")))
			if h, _ := c.recv(); h.Opcode != cql.OpError || h.Stream != 1 {
				t.Fatalf("v6 frame: got %s on stream %d; want the ProtocolError on stream 1", h.Opcode, h.Stream)
			}
			if h, _ := c.recv(); h.Stream != 2 || h.Opcode != cql.OpResult {
				t.Fatalf("v4 frame: got %s on stream %d; want its RESULT on stream 2", h.Opcode, h.Stream)
			}
			for _, size := range []int{10, gateBufferSize, 3 * gateBufferSize, readBufferSize - cql.HeaderSize, readBufferSize, 3*readBufferSize + 17} {
				body := bytes.Repeat([]byte{byte(size)}, size)
				c.send(frame(cql.V4, 0, 5, cql.OpQuery, body))
				if h, got := c.recv(); h.Stream != 5 || !bytes.Equal(got, body) {
					t.Errorf("QUERY of %d bytes: stream %d, %d bytes back; want stream 5 and the same body", size, h.Stream, len(got))
				}
			}
		})
	}
}

// TestLogGateFollowsTheRegistry checks the log gate (Config.LogGate) against a registry's
// logger whose level changes while one connection is open, as the REST API changes it: a
// gate that went stale, or that let nothing through, fails it.
func TestLogGateFollowsTheRegistry(t *testing.T) {
	node := mustFakeNode(t)
	var buf syncBuffer
	reg, err := logs.New(logs.Config{Format: "json", Writer: &buf})
	if err != nil {
		t.Fatal(err)
	}
	p := mustProxy(t, Config{NodeAddr: node.addr(), Logger: reg.Logger(logs.Sidecar), LogGate: reg.Gate(logs.Sidecar)})
	c := mustDial(t, p.addr)
	stream := int16(0)
	lines := func(level string) string {
		if err := reg.SetLevel(logs.Sidecar, level); err != nil {
			t.Fatal(err)
		}
		from := len(buf.String())
		for range 3 {
			stream++
			c.send(frame(cql.V4, 0, stream, cql.OpQuery, queryBody("SELECT * FROM ks.t")))
			c.recv()
		}
		return buf.String()[from:]
	}
	for _, step := range []struct {
		level      string
		want, dont []string
	}{
		{"info", nil, []string{`"message":"request"`, `"message":"frame from client"`}},
		{"trace", []string{`"message":"request"`, `"message":"frame from client"`, `"message":"frame from node"`}, nil},
		{"debug", []string{`"message":"request"`}, []string{`"message":"frame from client"`}},
		{"info", nil, []string{`"message":"request"`, `"message":"frame from node"`}},
	} {
		out := lines(step.level)
		for _, w := range step.want {
			if !strings.Contains(out, w) {
				t.Errorf("at %s the log lacks %s:\n%s", step.level, w, out)
			}
		}
		for _, w := range step.dont {
			if strings.Contains(out, w) {
				t.Errorf("at %s the log has %s:\n%s", step.level, w, out)
			}
		}
	}
}
