package cql

import (
	"bytes"
	"testing"
	"time"
)

// countingComp counts the decompressions of the compressor it wraps.
type countingComp struct {
	Compressor
	n int
}

func (c *countingComp) Decompress(dst, src []byte) ([]byte, error) {
	c.n++
	return c.Compressor.Decompress(dst, src)
}

func mustView(tb testing.TB, f *Frame, frame []byte, comp Compressor) *Frame {
	tb.Helper()
	h, err := ParseHeader(frame)
	if err != nil {
		tb.Fatal(err)
	}
	f.Reset(h, frame, comp)
	return f
}

func TestFrameDecompressesOnce(t *testing.T) {
	for _, comp := range []Compressor{LZ4{}, Snappy{}} {
		t.Run(comp.Name(), func(t *testing.T) {
			cc := &countingComp{Compressor: comp}
			payload := map[string][]byte{"traceparent": []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}
			raw, err := AppendRequestFrame(nil, Header{Version: V4, Flags: FlagCustomPayload, Stream: 3}, payload,
				Query{Query: "SELECT v FROM ks.t WHERE k = 1", Params: QueryParams{Consistency: LocalQuorum, Flags: QueryPageSize, PageSize: 100}}, comp)
			if err != nil {
				t.Fatal(err)
			}
			var f Frame
			mustView(t, &f, raw, cc)
			if f.Decompressed() {
				t.Error("Decompressed before any read")
			}
			st, ok := f.Statement()
			if !ok || string(st.Query) != "SELECT v FROM ks.t WHERE k = 1" || st.Consistency != LocalQuorum || st.Flags != QueryPageSize || st.Count != 1 {
				t.Errorf("Statement() = %+v, %v", st, ok)
			}
			if st.FlagsAt != -1 {
				t.Errorf("FlagsAt %d for a compressed frame; want -1", st.FlagsAt)
			}
			msg, err := f.Message()
			if err != nil {
				t.Fatal(err)
			}
			body, _ := f.Body()
			if v, ok := PayloadValue(f.CustomPayload(), "traceparent"); !ok || !bytes.Equal(v, payload["traceparent"]) {
				t.Errorf("traceparent %q, %v", v, ok)
			}
			if _, ok := PayloadValue(f.CustomPayload(), "tracestate"); ok {
				t.Error("a key that is not there was found")
			}
			if len(body)-len(msg) != len(AppendBytesMap(nil, payload)) {
				t.Errorf("message starts %d bytes into the body; want after the payload", len(body)-len(msg))
			}
			if got := f.Start(10); !bytes.Equal(got, body[:10]) {
				t.Errorf("Start(10) = % x; want the body's start % x", got, body[:10])
			}
			if cc.n != 1 || !f.Decompressed() {
				t.Errorf("%d decompressions (Decompressed %v); want 1", cc.n, f.Decompressed())
			}
			// The next frame is read afresh.
			mustView(t, &f, raw, cc)
			if f.Start(4) == nil || cc.n != 1 {
				t.Errorf("Start on a new frame: %d full decompressions; want none", cc.n-1)
			}
			if _, err := f.Body(); err != nil || cc.n != 2 {
				t.Errorf("Body after Reset: %v, %d decompressions; want 2", err, cc.n)
			}
		})
	}
}

func TestFrameStatement(t *testing.T) {
	params := QueryParams{Consistency: Quorum, Flags: QuerySkipMetadata}
	tests := []struct {
		name  string
		m     Message
		query string
		id    string
		count int
	}{
		{"query", Query{Query: "INSERT INTO t (k) VALUES (1)", Params: params}, "INSERT INTO t (k) VALUES (1)", "", 1},
		{"prepare", Prepare{Query: "SELECT * FROM t"}, "SELECT * FROM t", "", 1},
		{"execute", Execute{ID: []byte{1, 2, 3}, Params: params}, "", "\x01\x02\x03", 1},
		{"batch of a query first", Batch{Queries: []BatchQuery{{Query: "UPDATE t SET v = 1"}, {Prepared: true, ID: []byte{9}}}}, "UPDATE t SET v = 1", "", 2},
		{"batch of a prepared first", Batch{Queries: []BatchQuery{{Prepared: true, ID: []byte{9}}}}, "", "\x09", 1},
		{"options", Options{}, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := AppendFrame(nil, Header{Version: V4, Stream: 1}, tt.m)
			var f Frame
			st, ok := mustView(t, &f, raw, nil).Statement()
			if ok != (tt.count > 0) || string(st.Query) != tt.query || string(st.ID) != tt.id || st.Count != tt.count {
				t.Fatalf("Statement() = %+v, %v; want query %q id %q count %d", st, ok, tt.query, tt.id, tt.count)
			}
			if op := f.Header.Opcode; op == OpQuery || op == OpExecute {
				if st.Consistency != Quorum || st.Flags != QuerySkipMetadata || raw[st.FlagsAt] != QuerySkipMetadata {
					t.Errorf("params %v %#x at %d; want QUORUM, skip metadata", st.Consistency, st.Flags, st.FlagsAt)
				}
			}
			// A frame cut anywhere never reads past its end.
			for n := HeaderSize; n < len(raw); n++ {
				var g Frame
				h := f.Header
				h.Length = uint32(n - HeaderSize)
				g.Reset(h, raw[:n], nil)
				if st, ok := g.Statement(); ok && len(st.Query)+len(st.ID) > n {
					t.Errorf("cut at %d: %+v", n, st)
				}
			}
		})
	}
}

func TestFrameResponsePrefix(t *testing.T) {
	id := NewTimeUUID(time.Unix(1700000000, 0))
	for _, comp := range []Compressor{nil, LZ4{}} {
		p := ResponsePrefix{TracingID: id, HasTracingID: true, Warnings: []string{"w1", "w2"}, CustomPayload: map[string][]byte{"k": []byte("v")}}
		raw, err := AppendResponseFrame(nil, Header{Version: V4 | ResponseBit, Flags: FlagTracing | FlagWarning | FlagCustomPayload, Stream: 2}, p, VoidResult{}, comp)
		if err != nil {
			t.Fatal(err)
		}
		var f Frame
		mustView(t, &f, raw, comp)
		got, ok := f.TracingID()
		if !ok || got != id {
			t.Errorf("TracingID %x, %v; want %x", got, ok, id)
		}
		if v, ok := PayloadValue(f.CustomPayload(), "k"); !ok || string(v) != "v" {
			t.Errorf("payload k = %q, %v", v, ok)
		}
		msg, err := f.Message()
		if err != nil || !bytes.Equal(msg, VoidResult{}.AppendBody(nil, V4)) {
			t.Errorf("Message() = % x, %v; want the VOID result", msg, err)
		}
		// Replace: the same response without its tracing id, as a sampled session strips it.
		body, _ := f.Body()
		out := AppendHeader(nil, Header{Version: V4 | ResponseBit, Flags: FlagWarning | FlagCustomPayload, Stream: 2, Length: uint32(len(body) - 16)})
		out = append(out, body[16:]...)
		f.Replace(out, body[16:])
		if _, ok := f.TracingID(); ok {
			t.Error("a tracing id after Replace with a frame that has none")
		}
		if m2, err := f.Message(); err != nil || !bytes.Equal(m2, msg) {
			t.Errorf("Message after Replace = % x, %v", m2, err)
		}
	}
}

func TestFrameStreamedThrough(t *testing.T) {
	var f Frame
	f.Reset(Header{Version: V4, Opcode: OpQuery, Length: 1 << 20}, nil, nil)
	if _, err := f.Body(); err != ErrNoBody {
		t.Errorf("Body() error %v; want ErrNoBody", err)
	}
	if _, ok := f.Statement(); ok || f.Start(4) != nil || f.CustomPayload() != nil {
		t.Error("a frame without bytes gave a statement, a start or a payload")
	}
}

// FuzzFrameView: a view of any frame never panics, and the statement it reads is the one the
// full decoder reads.
func FuzzFrameView(f *testing.F) {
	f.Add(byte(OpQuery), byte(0), Query{Query: "SELECT 1", Params: QueryParams{Consistency: One}}.AppendBody(nil, V4))
	f.Add(byte(OpExecute), byte(FlagCustomPayload), append(AppendBytesMap(nil, map[string][]byte{"a": {1}}), Execute{ID: []byte{7}}.AppendBody(nil, V4)...))
	f.Add(byte(OpBatch), byte(0), Batch{Queries: []BatchQuery{{Query: "x"}}}.AppendBody(nil, V4))
	f.Add(byte(OpResult), byte(FlagTracing|FlagWarning), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, op, flags byte, body []byte) {
		flags &^= FlagCompression
		h := Header{Version: V4, Flags: flags, Opcode: Opcode(op), Length: uint32(len(body))}
		if op == byte(OpResult) {
			h.Version |= ResponseBit
		}
		raw := append(AppendHeader(nil, h), body...)
		var v Frame
		v.Reset(h, raw, nil)
		st, ok := v.Statement()
		v.TracingID()
		v.CustomPayload()
		v.Start(StartSize)
		if !ok || Opcode(op) != OpQuery {
			return
		}
		_, rest, err := ParseRequestPrefix(flags, body)
		if err != nil {
			t.Fatalf("view read a statement from a body whose prefix is malformed: %v", err)
		}
		var d Decoder
		d.Reset(rest)
		if q := d.LongString(); d.Err() != nil || q != string(st.Query) {
			t.Fatalf("view's query %q; decoder's %q (%v)", st.Query, q, d.Err())
		}
	})
}
