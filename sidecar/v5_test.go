package sidecar

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/internal/testkit/rawcql"
	"github.com/tracecar/tracecar/tracing"
)

// bothPaths runs f once on the event loop and once on the goroutine path.
func bothPaths(t *testing.T, f func(t *testing.T, cfg Config)) {
	for _, path := range []struct {
		name   string
		noLoop bool
	}{{"loop", false}, {"goroutines", true}} {
		t.Run(path.name, func(t *testing.T) { f(t, Config{NoEventLoop: path.noLoop}) })
	}
}

// segNode is a v5 node that records the bytes it receives: it answers STARTUP with READY
// (unframed), then reads segments, keeps every one as it came, and answers each request
// with a RESULT Void, or with what reply returns, in one self-contained segment per read.
type segNode struct {
	ln    net.Listener
	lz4   bool
	reply func(h cql.Header, body []byte) [][]byte // the response frames to a request

	mu   sync.Mutex
	segs [][]byte // the segments received, as they came
	sent [][]byte // the segments sent
	wg   sync.WaitGroup
}

func mustSegNode(tb testing.TB, lz4 bool) *segNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	n := &segNode{ln: ln, lz4: lz4}
	n.reply = func(h cql.Header, body []byte) [][]byte {
		return [][]byte{frame(cql.ResponseBit|cql.V5, 0, h.Stream, cql.OpResult, voidBody())}
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				defer c.Close()
				n.serve(c)
			}()
		}
	}()
	tb.Cleanup(func() { ln.Close(); n.wg.Wait() })
	return n
}

func (n *segNode) serve(c net.Conn) {
	r := bufio.NewReader(c)
	h, _, _, err := cql.ReadFrame(r, nil)
	if err != nil || h.Opcode != cql.OpStartup {
		return
	}
	c.Write(frame(cql.ResponseBit|cql.V5, 0, h.Stream, cql.OpReady, nil))
	rd := cql.SegmentReader{LZ4: n.lz4}
	for {
		hb, err := r.Peek(rd.HeaderSize())
		if err != nil {
			return
		}
		size, err := rd.Peek(hb)
		if err != nil {
			return
		}
		seg := make([]byte, size)
		if _, err := io.ReadFull(r, seg); err != nil {
			return
		}
		n.mu.Lock()
		n.segs = append(n.segs, seg)
		n.mu.Unlock()
		_, _, frames, err := rd.Next(seg)
		if err != nil {
			return
		}
		var out []byte
		for len(frames) > 0 {
			h, _ := cql.ParseHeader(frames)
			f := frames[:cql.HeaderSize+int(h.Length)]
			frames = frames[len(f):]
			for _, resp := range n.reply(h, f[cql.HeaderSize:]) {
				out = append(out, resp...)
			}
		}
		if len(out) > 0 {
			seg := cql.AppendSegments(nil, out, n.lz4)
			n.mu.Lock()
			n.sent = append(n.sent, seg)
			n.mu.Unlock()
			c.Write(seg)
		}
	}
}

// last returns the last segment the node received.
func (n *segNode) last() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.segs) == 0 {
		return nil
	}
	return n.segs[len(n.segs)-1]
}

// lastSent returns the last segment the node sent.
func (n *segNode) lastSent() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.sent) == 0 {
		return nil
	}
	return n.sent[len(n.sent)-1]
}

// TestV5ForwardsSegments: a segment whose frames the proxy does not change reaches the
// other side byte for byte, both ways, lz4 or not; a frame changed in place (the tracing
// flag of a sampled request) keeps its segment with a fresh CRC32; a response that the
// proxy changes (the tracing id of a sampled request stripped, as the client did not ask
// for it) is re-segmented, with fresh CRCs, and the client's reader takes it.
func TestV5ForwardsSegments(t *testing.T) {
	bothPaths(t, func(t *testing.T, cfg Config) {
		for _, lz4 := range []bool{false, true} {
			comp := ""
			if lz4 {
				comp = "lz4"
			}
			t.Run("compression "+comp, func(t *testing.T) {
				n := mustSegNode(t, lz4)
				var traced [16]byte
				traced[0] = 0x77
				n.reply = func(h cql.Header, body []byte) [][]byte {
					if h.Flags&cql.FlagTracing != 0 {
						b := cql.AppendUUID(nil, traced)
						return [][]byte{frame(cql.ResponseBit|cql.V5, cql.FlagTracing, h.Stream, cql.OpResult, append(b, voidBody()...))}
					}
					// Two frames, one of them an event, in one segment.
					return [][]byte{
						frame(cql.ResponseBit|cql.V5, 0, h.Stream, cql.OpResult, voidBody()),
						frame(cql.ResponseBit|cql.V5, 0, -1, cql.OpEvent, cql.Event{Type: cql.EventSchemaChange,
							Schema: cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetKeyspace, Keyspace: "ks"}}.AppendBody(nil, cql.V5)),
					}
				}
				tr := tracing.New(tracing.Options{})
				t.Cleanup(func() { tr.Close(t.Context()) })
				cfg.NodeAddr = n.ln.Addr().String()
				p := mustProxyWith(t, New(cfg, tr), nil)
				c := rawcql.Dial(t, p.addr, cql.V5, comp)

				// Unchanged both ways.
				req := c.Segments(c.Frame(cql.Query{Query: "SELECT v FROM ks.t WHERE k = 1", Params: cql.QueryParams{Consistency: cql.One}}, 0))
				if err := c.Write(req); err != nil {
					t.Fatal(err)
				}
				resp := readSegment(t, c, lz4)
				if got := n.last(); !bytes.Equal(got, req) {
					t.Errorf("the node got %x; want the client's segment as it was, %x", got, req)
				}
				if nodeSeg := n.lastSent(); !bytes.Equal(resp, nodeSeg) {
					t.Errorf("the client got %x; want the node's segment as it was, %x", resp, nodeSeg)
				}
				if st := p.Stats(); st.Segments != 2 || st.Resegmented != 0 {
					t.Errorf("Stats: %d segments, %d re-encoded; want 2, 0", st.Segments, st.Resegmented)
				}

				// Sampled: the tracing flag is set in the forwarded request, and the tracing
				// id stripped from the response.
				if err := tr.SetConfig(tracing.Config{Probability: 1, ThresholdMicros: 1e12, TTLSeconds: 60}); err != nil {
					t.Fatal(err)
				}
				req = c.Segments(c.Frame(cql.Query{Query: "SELECT v FROM ks.t WHERE k = 2", Params: cql.QueryParams{Consistency: cql.One}}, 0))
				if err := c.Write(req); err != nil {
					t.Fatal(err)
				}
				h, body, err := c.Recv()
				if err != nil || h.Flags&cql.FlagTracing != 0 || !bytes.Equal(body, voidBody()) {
					t.Fatalf("sampled response: %+v %x, %v; want a RESULT Void without the tracing id", h, body, err)
				}
				got := n.last()
				rd := cql.SegmentReader{LZ4: lz4}
				_, _, frames, err := rd.Next(got)
				if err != nil || len(frames) < 2 || frames[1]&cql.FlagTracing == 0 {
					t.Fatalf("the node got %x (%v); want a valid segment whose frame has the tracing flag", got, err)
				}
				if !lz4 && (len(got) != len(req) || !bytes.Equal(got[:cql.SegmentHeaderSize], req[:cql.SegmentHeaderSize])) {
					t.Errorf("the flag set in place re-encoded the segment: %x, from %x", got, req)
				}
				if st := p.Stats(); st.Segments != 4 || st.Resegmented != 2 {
					t.Errorf("Stats: %d segments, %d re-encoded; want 4, 2 (the request's flag, the response's tracing id)", st.Segments, st.Resegmented)
				}
			})
		}
	})
}

// readSegment reads one segment from c's socket, as it came.
func readSegment(t *testing.T, c *rawcql.Conn, lz4 bool) []byte {
	t.Helper()
	hs := cql.SegmentHeaderSize
	if lz4 {
		hs = cql.SegmentHeaderSizeLZ4
	}
	hb := make([]byte, hs)
	if _, err := io.ReadFull(c.Net(), hb); err != nil {
		t.Fatal(err)
	}
	h, err := cql.ParseSegmentHeader(hb, lz4)
	if err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, h.Length+cql.SegmentTrailerSize)
	if _, err := io.ReadFull(c.Net(), rest); err != nil {
		t.Fatal(err)
	}
	return append(hb, rest...)
}

// TestV5ThroughProxy runs the embedded node's v5 through the proxy on both paths: large
// frames over several segments each way, the system.local rewrite (a response the proxy
// changes, re-segmented), OPTIONS after the handshake, and the result metadata id.
func TestV5ThroughProxy(t *testing.T) {
	bothPaths(t, func(t *testing.T, cfg Config) {
		n := mustNode(t, node.Config{}, nodeAddr)
		tp := mustProxyApart(t, cfg, nil, n)
		for _, comp := range []string{"", "lz4"} {
			t.Run("compression "+comp, func(t *testing.T) {
				c := rawcql.Dial(t, tp.addr, cql.V5, comp)
				rows := c.Query(t, "SELECT rpc_address FROM system.local").(cql.RowsResult)
				if want := mustAddrPort(tp.addr).Addr().AsSlice(); len(rows.Rows) != 1 || !bytes.Equal(rows.Rows[0][0], want) {
					t.Errorf("system.local rpc_address %v; want the sidecar's %v", rows.Rows, want)
				}
				if sup := c.MustResult(t, cql.Options{}).(cql.Supported); len(sup.Options["PROTOCOL_VERSIONS"]) != 3 {
					t.Errorf("SUPPORTED after the handshake: %v", sup.Options)
				}
				ks := "v5p" + comp
				c.Query(t, "CREATE KEYSPACE IF NOT EXISTS "+ks+" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
				c.Query(t, "CREATE TABLE IF NOT EXISTS "+ks+".t (k int PRIMARY KEY, v blob)")
				big := bytes.Repeat([]byte("segment!"), 400000/8)
				c.MustResult(t, cql.Query{Query: "INSERT INTO " + ks + ".t (k, v) VALUES (1, ?)", Params: cql.QueryParams{
					Consistency: cql.One, Flags: cql.QueryValues, Values: []cql.Value{{Bytes: big}}}})
				pr := c.MustResult(t, cql.Prepare{Query: "SELECT * FROM " + ks + ".t WHERE k = ?"}).(cql.PreparedResult)
				exec := cql.Execute{ID: pr.ID, ResultMetadataID: pr.ResultMetadataID, Params: cql.QueryParams{
					Consistency: cql.One, Flags: cql.QueryValues | cql.QuerySkipMetadata, Values: []cql.Value{{Bytes: []byte{0, 0, 0, 1}}}}}
				// The first EXECUTE of an id is probed for a system table: the proxy clears
				// skip-metadata in place (in v5's [int] flags), so the metadata comes back.
				r := c.MustResult(t, exec).(cql.RowsResult)
				if len(r.Rows) != 1 || !bytes.Equal(r.Rows[0][1], big) || r.Metadata.Flags&cql.RowsNoMetadata != 0 {
					t.Errorf("the large value through the proxy, probed: %d rows, flags %#x; want the metadata", len(r.Rows), r.Metadata.Flags)
				}
				r = c.MustResult(t, exec).(cql.RowsResult)
				if len(r.Rows) != 1 || !bytes.Equal(r.Rows[0][1], big) || r.Metadata.Flags&cql.RowsNoMetadata == 0 {
					t.Errorf("the large value through the proxy, again: %d rows, flags %#x; want No_metadata", len(r.Rows), r.Metadata.Flags)
				}
			})
		}
	})
}

// TestV5BadSegmentClosesOnlyItsConnection: a client segment that fails its CRC, or whose
// frames do not line up with it, gets a ProtocolError in a segment on stream 0 and the
// close of its connection; one that claims a payload it never sends costs nothing and
// closes when the client goes; a v5 client and a v4 one on the same proxy go on.
func TestV5BadSegmentClosesOnlyItsConnection(t *testing.T) {
	bothPaths(t, func(t *testing.T, cfg Config) {
		n := mustNode(t, node.Config{}, nodeAddr)
		tp := mustProxyApart(t, cfg, nil, n)
		v5 := rawcql.Dial(t, tp.addr, cql.V5, "lz4")
		v4 := rawcql.Dial(t, tp.addr, cql.V4, "lz4")
		query := func(c *rawcql.Conn) []byte {
			return c.Frame(cql.Query{Query: "SELECT * FROM system.local", Params: cql.QueryParams{Consistency: cql.One}}, 0)
		}
		tests := []struct {
			name    string
			lz4     bool
			bytes   func(c *rawcql.Conn) []byte
			wantMsg string
		}{
			{"payload CRC", false, func(c *rawcql.Conn) []byte {
				s := c.Segments(query(c))
				s[cql.SegmentHeaderSize+2] ^= 4
				return s
			}, "Invalid segment: CRC mismatch"},
			{"header CRC, lz4", true, func(c *rawcql.Conn) []byte {
				s := c.Segments(query(c))
				s[0] ^= 1
				return s
			}, "Invalid segment: CRC mismatch"},
			{"frames that do not line up", false, func(c *rawcql.Conn) []byte {
				f := query(c)
				return cql.AppendSegment(nil, f[:len(f)-1], true, false)
			}, "Invalid segment: its frames do not line up with it"},
			{"a large frame over the limit", false, func(c *rawcql.Conn) []byte {
				f := cql.AppendHeader(nil, cql.Header{Version: cql.V5, Stream: 9, Opcode: cql.OpQuery, Length: 200 << 20})
				return cql.AppendSegment(nil, append(f, make([]byte, cql.MaxSegmentPayload-cql.HeaderSize)...), false, false)
			}, cql.FrameTooBigMessage(200<<20, cql.DefaultMaxFrameSize)},
			{"a lying length", false, func(c *rawcql.Conn) []byte {
				return append(cql.AppendSegmentHeader(nil, cql.SegmentHeader{Length: cql.MaxSegmentPayload, SelfContained: true}, false), 1, 2, 3)
			}, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				comp := ""
				if tt.lz4 {
					comp = "lz4"
				}
				c := rawcql.Dial(t, tp.addr, cql.V5, comp)
				if err := c.Write(tt.bytes(c)); err != nil {
					t.Fatal(err)
				}
				if tt.wantMsg == "" {
					c.Net().(*net.TCPConn).CloseWrite()
				}
				h, body, err := c.Recv()
				switch {
				case tt.wantMsg == "" && err == nil:
					t.Fatalf("got %s; want the connection closed", h.Opcode)
				case tt.wantMsg == "":
				case err != nil:
					t.Fatalf("got %v; want a ProtocolError", err)
				default:
					e, _ := cql.DecodeError(body)
					if h.Opcode != cql.OpError || e.Code != cql.ErrCodeProtocol || e.Message != tt.wantMsg {
						t.Fatalf("got %s %#x %q on stream %d; want ProtocolError %q", h.Opcode, e.Code, e.Message, h.Stream, tt.wantMsg)
					}
					if _, _, err := c.Recv(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
						t.Errorf("after the error: %v; want the connection closed", err)
					}
				}
				for _, other := range []*rawcql.Conn{v5, v4} {
					if rows := other.Query(t, "SELECT release_version FROM system.local").(cql.RowsResult); len(rows.Rows) != 1 {
						t.Errorf("v%d client after the bad segment: %v", other.Version(), rows.Rows)
					}
				}
			})
		}
	})
}

// TestV5PythonDriverEveryTracingMode is the acceptance case: the Python driver, at its
// defaults, reaches the embedded node through the sidecar at protocol v5, with no
// compression and with lz4, and passes its suite (schema, prepared statements, paging,
// batches, collections, get_query_trace) in every tracing mode.
func TestV5PythonDriverEveryTracingMode(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	drivertest.RequirePython(t)
	modes := []struct {
		name string
		cfg  tracing.Config
	}{
		{"off", tracing.DefaultConfig()},
		{"fast", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0, TTLSeconds: 60}},
		{"full", tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}},
		{"sampled", tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 60}},
	}
	for _, m := range modes {
		for _, comp := range []string{"none", "lz4"} {
			t.Run(m.name+"/"+comp, func(t *testing.T) {
				st := mustTracedStack(t, tracing.Options{}, m.cfg, nil)
				o := sidecarOptions(st.proxy, comp)
				o.Keyspace, o.Protocol = "py5_"+m.name+"_"+comp, 5
				drivertest.RunPython(t, o)
				checkNoBypass(t, st.node, st.proxy)
				// The suite traces one request itself (get_query_trace): that session is
				// recorded in every mode, as mode client; the mode's own are the others.
				own := 0
				for _, s := range st.tr.SlowLog(0) {
					if s.Mode != tracing.ModeClient {
						own++
					}
				}
				if (m.name != "off") != (own > 0) {
					t.Errorf("%d sessions of the mode's own recorded in mode %s", own, m.name)
				}
			})
		}
	}
}

// TestV5AndV4ClientsShareASidecar: the Python driver at v5, gocql at v4 and the Node.js
// driver at v4 run their suites at once through one sidecar.
func TestV5AndV4ClientsShareASidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	n := mustNode(t, node.Config{}, nodeAddr)
	tp := mustProxyApart(t, Config{}, nil, n)
	t.Run("python v5", func(t *testing.T) {
		t.Parallel()
		o := sidecarOptions(tp, "lz4")
		o.Keyspace, o.Protocol = "py_shared", 5
		drivertest.RunPython(t, o)
	})
	t.Run("gocql v4", func(t *testing.T) {
		t.Parallel()
		drivertest.RunGocql(t, sidecarOptions(tp, "lz4"))
	})
	t.Run("gocql v3", func(t *testing.T) {
		t.Parallel()
		cl := drivertest.Cluster(sidecarOptions(tp, "snappy"))
		cl.ProtoVersion = 3
		s, err := cl.CreateSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var v string
		if err := s.Query("SELECT release_version FROM system.local").Consistency(gocql.One).Scan(&v); err != nil || v != "4.1.0" {
			t.Errorf("gocql v3: %q, %v", v, err)
		}
	})
	t.Run("nodejs v4", func(t *testing.T) {
		t.Parallel()
		drivertest.RunNodeJS(t, sidecarOptions(tp, "none"))
	})
}

// TestV5MaxProtocolVersion4: with MaxProtocolVersion 4 the proxy answers a v5 client as a
// v4 node does, and the Python driver steps down to v4 through it.
func TestV5MaxProtocolVersion4(t *testing.T) {
	n := mustNode(t, node.Config{}, nodeAddr)
	tp := mustProxyApart(t, Config{MaxProtocolVersion: 4}, nil, n)
	c := rawcql.DialOnly(t, tp.addr, cql.V5)
	h, body, err := c.Do(cql.Options{})
	e, _ := cql.DecodeError(body)
	if err != nil || h.Version != cql.ResponseBit|cql.V4 || !strings.Contains(e.Message, "greatest is 4") {
		t.Fatalf("v5 OPTIONS: %+v %q, %v; want a v4 ProtocolError saying the greatest is 4", h, e.Message, err)
	}
	if testing.Short() {
		return
	}
	o := sidecarOptions(tp, "lz4")
	o.Keyspace, o.Protocol = "py_max4", 4
	drivertest.RunPython(t, o)
}

// TestAlterTableResultMetadataThroughProxy is CASSANDRA-10786 with the Python driver
// through the sidecar, with lz4 (see node.TestAlterTableResultMetadata): the rows carry the
// new column after the table's columns changed.
func TestAlterTableResultMetadataThroughProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	n := mustNode(t, node.Config{}, nodeAddr)
	tp := mustProxyApart(t, Config{}, nil, n)
	drivertest.RunPythonResultMetadataCases(t, sidecarOptions(tp, "lz4"))
}

// TestV5ResultMetadataThroughProxy is the metadata id on the raw protocol through the
// proxy, with two clients of one prepared statement: after ALTER TABLE … ADD the first
// gets Unprepared and prepares again (as from Cassandra); the second's EXECUTE, with the id
// from before the columns changed, gets Metadata_changed, the new id and the new column.
func TestV5ResultMetadataThroughProxy(t *testing.T) {
	n := mustNode(t, node.Config{}, nodeAddr)
	tp := mustProxyApart(t, Config{}, nil, n)
	first := rawcql.Dial(t, tp.addr, cql.V5, "")
	c := rawcql.Dial(t, tp.addr, cql.V5, "")
	c.Query(t, "CREATE KEYSPACE pmeta WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	c.Query(t, "CREATE TABLE pmeta.t (k int PRIMARY KEY, v int)")
	star := cql.Prepare{Query: "SELECT * FROM pmeta.t WHERE k = 1"}
	pr := c.MustResult(t, star).(cql.PreparedResult)
	c.Query(t, "ALTER TABLE pmeta.t ADD c int")
	c.Query(t, "INSERT INTO pmeta.t (k, v, c) VALUES (1, 2, 3)")
	execute := cql.Execute{ID: pr.ID, ResultMetadataID: pr.ResultMetadataID, Params: cql.QueryParams{
		Consistency: cql.One, Flags: cql.QuerySkipMetadata}}
	var e cql.Error
	if _, err := first.Result(execute); !errors.As(err, &e) || e.Code != cql.ErrCodeUnprepared {
		t.Fatalf("the first EXECUTE after ALTER TABLE: %v; want Unprepared", err)
	}
	first.MustResult(t, star)
	r := c.MustResult(t, execute).(cql.RowsResult)
	if r.Metadata.Flags&cql.RowsMetadataChanged == 0 || len(r.Metadata.Columns) != 3 || len(r.Rows) != 1 || len(r.Rows[0]) != 3 {
		t.Fatalf("got flags %#x, columns %v, rows %v; want Metadata_changed and the three columns", r.Metadata.Flags, r.Metadata.Columns, r.Rows)
	}
	var c3 uint32
	for i, col := range r.Metadata.Columns {
		if col.Name == "c" {
			c3 = binary.BigEndian.Uint32(r.Rows[0][i])
		}
	}
	if c3 != 3 {
		t.Errorf("c = %d; want 3", c3)
	}
}

// TestLargeV5FramesShareTheBudget is TestLargeFramesShareTheBudget at v5: a client frame
// larger than a segment is charged to the proxy-wide budget of frames held whole from its
// first segment, before it is gathered, the budget never holds more than its size, a
// connection whose frame does not fit is read again once a frame ahead of it is forwarded,
// and closing a connection with a frame half sent gives its share back.
func TestLargeV5FramesShareTheBudget(t *testing.T) {
	n := mustNode(t, node.Config{}, nodeAddr)
	query := cql.Query{Query: "SELECT " + strings.Repeat("x", 1<<20), Params: cql.QueryParams{Consistency: cql.One}}
	size := int64(len(cql.AppendFrame(nil, cql.Header{Version: cql.V5}, query)))
	tp := mustProxyApart(t, Config{MaxFrameSize: int(size), MaxRequestDataInFlight: int(2 * size)}, nil, n)
	used, waitUsed := budgetProbe(t, &tp.env.held)
	var cs []*rawcql.Conn
	var rests [][]byte
	for i := range 3 {
		c := rawcql.Dial(t, tp.addr, cql.V5, "")
		segs := c.Segments(c.Frame(query, 0))
		var rd cql.SegmentReader
		first, err := rd.Peek(segs)
		if err != nil || first == 0 || first >= len(segs) {
			t.Fatalf("first segment of %d bytes in %d: %v", first, len(segs), err)
		}
		// The first segment: the frame's header is in, and the frame is to be gathered.
		if err := c.Write(segs[:first]); err != nil {
			t.Fatal(err)
		}
		cs, rests = append(cs, c), append(rests, segs[first:])
		if i < 2 {
			waitUsed(int64(i+1) * size)
		}
	}
	time.Sleep(50 * time.Millisecond) // the third has had its chance to take a share
	if got := used(); got != 2*size {
		t.Fatalf("budget in use %d with a third frame waiting; want %d", got, 2*size)
	}
	answered := func(i int) {
		t.Helper()
		if err := cs[i].Write(rests[i]); err != nil {
			t.Fatal(err)
		}
		if h, body, err := cs[i].Recv(); err != nil || h.Opcode != cql.OpError {
			t.Fatalf("frame %d: %+v %q, %v; want the node's answer (a syntax error)", i+1, h, body, err)
		}
	}
	// The first frame completes and is forwarded: the third connection gets its share.
	answered(0)
	answered(2)
	waitUsed(size) // the second frame, still half sent
	cs[1].Net().Close()
	waitUsed(0)
}
