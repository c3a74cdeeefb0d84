package pipeline

import (
	"net/netip"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// fuzzConn is a conn with no sockets, for the parsing code.
func fuzzConn(comp int32) *Conn {
	c := new(Conn)
	sh := NewShared(Settings{Log: &nopLogger, MaxFrame: cql.DefaultMaxFrameSize, Advertise: netip.MustParseAddrPort("192.0.2.1:9042")})
	c.Init(sh, netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:9042"), false)
	c.NodeAddr = netip.MustParseAddrPort("127.0.0.1:9042")
	c.Views = new(Views)
	c.comp.Store(comp % int32(len(compressors)))
	return c
}

// FuzzInspect feeds arbitrary request frames to the code that reads requests: it must
// never panic, whatever a client sends.
func FuzzInspect(f *testing.F) {
	f.Add(byte(cql.OpQuery), byte(0), int32(0), queryBody("SELECT * FROM system.local"))
	f.Add(byte(cql.OpPrepare), byte(0), int32(0), cql.Prepare{Query: "SELECT * FROM system.peers_v2"}.AppendBody(nil, cql.V4))
	f.Add(byte(cql.OpExecute), byte(cql.FlagCustomPayload), int32(0), []byte{0, 1, 0, 0})
	f.Add(byte(cql.OpStartup), byte(0), int32(0), cql.Startup{Options: map[string]string{"COMPRESSION": "lz4"}}.AppendBody(nil, cql.V4))
	lz, _ := cql.LZ4{}.Compress(nil, queryBody("SELECT * FROM system.local"))
	f.Add(byte(cql.OpQuery), cql.FlagCompression, int32(1), lz)
	sn, _ := cql.Snappy{}.Compress(nil, queryBody("/* c */ INSERT INTO ks.t (k) VALUES (1)"))
	f.Add(byte(cql.OpQuery), cql.FlagCompression, int32(2), sn)
	f.Fuzz(func(t *testing.T, op, flags byte, comp int32, body []byte) {
		c := fuzzConn(comp & 3)
		c.sh.rememberStmt([]byte{0, 0}, kindLocal, nil)
		h := cql.Header{Version: cql.V4, Flags: flags, Opcode: cql.Opcode(op), Length: uint32(len(body))}
		c.inspectFrame(h, append(cql.AppendHeader(nil, h), body...))
	})
}

// FuzzRewrite feeds arbitrary node responses to the rewriting code, for each kind of system
// table request and for events: it must never panic and must return a whole frame.
func FuzzRewrite(f *testing.F) {
	f.Add(byte(kindLocal), byte(cql.OpResult), byte(0), rowsBody("local", localColumns(), false,
		[][]byte{text("local"), text("dc"), ip("10.0.0.1"), port(9042), ip("10.0.0.1")}))
	f.Add(byte(kindLocal|kindPrepare), byte(cql.OpResult), byte(0),
		cql.PreparedResult{ID: []byte{1}, ResultMetadata: cql.RowsMetadata{Columns: localColumns()}}.AppendBody(nil, cql.V4))
	f.Add(byte(0), byte(cql.OpEvent), byte(0),
		cql.Event{Type: cql.EventStatusChange, Change: "UP", Addr: netip.MustParseAddrPort("127.0.0.1:9042")}.AppendBody(nil, cql.V4))
	f.Fuzz(func(t *testing.T, kind, op, flags byte, body []byte) {
		c := fuzzConn(int32(flags >> 4))
		h := cql.Header{Version: cql.ResponseBit | cql.V4, Flags: flags & 0x0f, Opcode: cql.Opcode(op), Length: uint32(len(body))}
		fr := append(cql.AppendHeader(nil, h), body...)
		var out []byte
		if kind == 0 {
			h.Stream = -1
			out = c.rewriteEvent(c.respView(fr))
		} else {
			out = c.rewriteResult(c.respView(fr), Inflight{kind: rewriteKind(kind), stmt: &tracing.Statement{System: uint8(kindLocal), Columns: localColumns()}})
		}
		if got, err := cql.ParseHeader(out); err != nil || int(got.Length) != len(out)-cql.HeaderSize {
			t.Fatalf("rewrite returned a frame with header %+v (%v) and %d bytes", got, err, len(out))
		}
	})
}
