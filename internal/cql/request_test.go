package cql

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// requestCases are requests with every optional part, encoded by the package's own
// encoders at each version and read back by Request.
func requestCases(version byte) []struct {
	name string
	m    Message
} {
	full := QueryParams{
		Consistency: LocalQuorum, Flags: QueryValues | QueryPageSize | QueryPagingState | QuerySerialConsistency | QueryDefaultTimestamp,
		Values:   []Value{{Bytes: []byte("k1")}, {Bytes: nil}, {Bytes: []byte{}}, {Unset: version >= V4}},
		PageSize: 5000, PagingState: []byte("state"), SerialConsistency: LocalSerial, Timestamp: 1700000000000000,
	}
	named := QueryParams{Consistency: One, Flags: QueryValues | QueryNamedValues,
		Values: []Value{{Bytes: []byte("a")}, {Bytes: []byte("bb")}}, Names: []string{"k", "v"}}
	cases := []struct {
		name string
		m    Message
	}{
		{"query bare", Query{Query: "SELECT * FROM ks.t", Params: QueryParams{Consistency: One}}},
		{"query full", Query{Query: "SELECT * FROM ks.t WHERE k = ?", Params: full}},
		{"query named", Query{Query: "INSERT INTO ks.t (k, v) VALUES (:k, :v)", Params: named}},
		{"prepare", Prepare{Query: "SELECT * FROM ks.t WHERE k = ?"}},
		{"execute", Execute{ID: []byte("0123456789abcdef"), Params: full}},
		{"batch", Batch{Type: BatchUnlogged, Consistency: Quorum, Flags: QuerySerialConsistency | QueryDefaultTimestamp,
			SerialConsistency: Serial, Timestamp: 42, Queries: []BatchQuery{
				{Query: "INSERT INTO ks.t (k) VALUES (?)", Values: []Value{{Bytes: []byte("x")}}},
				{Prepared: true, ID: []byte("prep-id"), Values: []Value{{Bytes: []byte("y")}, {Bytes: nil}}},
				{Query: "DELETE FROM ks.t WHERE k = 1"},
			}}},
		{"batch named", Batch{Type: BatchLogged, Consistency: One, Flags: QueryNamedValues, Queries: []BatchQuery{
			{Query: "INSERT INTO ks.t (k) VALUES (:k)", Values: []Value{{Bytes: []byte("x")}}, Names: []string{"k"}},
			{Prepared: true, ID: []byte("p"), Values: []Value{{Bytes: []byte("yy")}, {Bytes: []byte("z")}}, Names: []string{"a", "b"}},
		}}},
	}
	if version >= V5 {
		v5 := full
		v5.Flags |= QueryWithKeyspace
		v5.ExtFlags, v5.Keyspace, v5.NowInSeconds = QueryNowInSeconds, "ks5", 1234567
		cases = append(cases,
			struct {
				name string
				m    Message
			}{"query v5", Query{Query: "SELECT * FROM t", Params: v5}},
			struct {
				name string
				m    Message
			}{"execute v5", Execute{ID: []byte("id"), ResultMetadataID: []byte("result-md-id"), Params: v5}},
			struct {
				name string
				m    Message
			}{"prepare v5 keyspace", Prepare{Query: "SELECT * FROM t", Keyspace: "ks5"}},
			struct {
				name string
				m    Message
			}{"batch v5", Batch{Type: BatchCounter, Consistency: One, Flags: QueryWithKeyspace, ExtFlags: QueryNowInSeconds,
				Keyspace: "ks5", NowInSeconds: 99, Queries: []BatchQuery{{Query: "UPDATE t SET c = c + 1 WHERE k = ?", Values: []Value{{Bytes: []byte("k")}}}}}},
		)
	}
	return cases
}

// fromRequest turns r back into the message it was parsed from, for comparison with the
// encoder's input.
func fromRequest(r *Request) Message {
	params := func(p Params, values bool) QueryParams {
		q := QueryParams{Consistency: p.Consistency, Flags: p.Flags, ExtFlags: p.ExtFlags,
			PageSize: p.PageSize, PagingState: p.PagingState, SerialConsistency: p.SerialConsistency,
			Timestamp: p.Timestamp, Keyspace: string(p.Keyspace), NowInSeconds: p.NowInSeconds}
		if values {
			q.Values = p.Values
			for _, n := range p.Names {
				q.Names = append(q.Names, string(n))
			}
		}
		return q
	}
	switch r.Opcode {
	case OpQuery:
		return Query{Query: string(r.Query), Params: params(r.Params, true)}
	case OpPrepare:
		return Prepare{Query: string(r.Query), Keyspace: string(r.Params.Keyspace)}
	case OpExecute:
		return Execute{ID: r.ID, ResultMetadataID: r.ResultMetadataID, Params: params(r.Params, true)}
	}
	p := params(r.Params, false)
	b := Batch{Type: r.BatchType, Consistency: p.Consistency, Flags: p.Flags, ExtFlags: p.ExtFlags,
		SerialConsistency: p.SerialConsistency, Timestamp: p.Timestamp, Keyspace: p.Keyspace, NowInSeconds: p.NowInSeconds}
	for _, s := range r.Batch {
		q := BatchQuery{Prepared: s.Prepared, Query: string(s.Query), ID: s.ID, Values: s.Values}
		for _, n := range s.Names {
			q.Names = append(q.Names, string(n))
		}
		b.Queries = append(b.Queries, q)
	}
	return b
}

// sameMessage compares two messages by their encoding, which is what a reader sees.
func sameMessage(t *testing.T, got, want Message, version byte) {
	t.Helper()
	g, w := got.AppendBody(nil, version), want.AppendBody(nil, version)
	if !bytes.Equal(g, w) {
		t.Errorf("read back as\n%#v\nwant\n%#v", got, want)
	}
}

func TestRequestEveryVersion(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		for _, c := range requestCases(v) {
			t.Run(fmt.Sprintf("v%d/%s", v, c.name), func(t *testing.T) {
				f := NewFrame(Header{Version: v, Stream: 1, Opcode: c.m.Opcode()}, c.m.AppendBody(nil, v))
				r, ok := f.Request()
				if !ok || r.Err != nil {
					t.Fatalf("Request: ok %v, err %v", ok, r.Err)
				}
				if r.Version != v || r.Opcode != c.m.Opcode() {
					t.Errorf("version %d opcode %v; want %d %v", r.Version, r.Opcode, v, c.m.Opcode())
				}
				sameMessage(t, fromRequest(r), c.m, v)

				// A copy reads the same, and owns its bytes.
				var cp Request
				buf := r.CopyTo(&cp, nil)
				raw := f.Raw()
				for i := HeaderSize; i < len(raw); i++ {
					raw[i] = 0xee
				}
				if len(buf) == 0 {
					t.Fatal("copy is empty")
				}
				sameMessage(t, fromRequest(&cp), c.m, v)
			})
		}
	}
}

// TestRequestVersionsDiffer: the same bytes read at the wrong version do not give the
// request back. v5's flags are an [int] and its EXECUTE carries a result metadata id: a
// reader that takes the flags as a byte reads garbage (the capture's defect in issue 40).
func TestRequestVersionsDiffer(t *testing.T) {
	m := Execute{ID: []byte("id"), ResultMetadataID: []byte("md"), Params: QueryParams{Consistency: Quorum, Flags: QueryValues | QueryPageSize,
		Values: []Value{{Bytes: []byte("key")}}, PageSize: 100}}
	body := m.AppendBody(nil, V5)
	f := NewFrame(Header{Version: V4, Opcode: OpExecute}, body)
	if r, ok := f.Request(); ok && r.Err == nil && reflect.DeepEqual(fromRequest(r), Message(m)) {
		t.Fatal("a v5 EXECUTE read at v4 gave the request back")
	}
	f = NewFrame(Header{Version: V5, Opcode: OpExecute}, body)
	r, ok := f.Request()
	if !ok || r.Err != nil || r.Params.PageSize != 100 || len(r.Params.Values) != 1 || string(r.ResultMetadataID) != "md" {
		t.Fatalf("v5 EXECUTE: %+v", r)
	}
}

// TestRequestCut: a request cut short keeps what was read before the cut, and says so.
func TestRequestCut(t *testing.T) {
	m := Query{Query: "INSERT INTO ks.t (k, v) VALUES (?, ?)", Params: QueryParams{Consistency: One, Flags: QueryValues | QueryPageSize,
		Values: []Value{{Bytes: []byte("key")}, {Bytes: bytes.Repeat([]byte("v"), 100)}}, PageSize: 10}}
	body := m.AppendBody(nil, V4)
	var r Request
	r.Parse(OpQuery, V4, body[:len(body)-60])
	if r.Err == nil || !r.Parsed() || !r.HasParams {
		t.Fatalf("cut: err %v parsed %v params %v", r.Err, r.Parsed(), r.HasParams)
	}
	if string(r.Query) != m.Query || r.Params.Consistency != One {
		t.Errorf("cut: query %q consistency %v", r.Query, r.Params.Consistency)
	}
	if len(r.Params.Values) != 1 || string(r.Params.Values[0].Bytes) != "key" {
		t.Errorf("cut: values %v; want the first", r.Params.Values)
	}
	r.Parse(OpQuery, V4, body[:3])
	if r.Parsed() || r.Err == nil {
		t.Errorf("3 bytes: parsed %v err %v", r.Parsed(), r.Err)
	}
	r.Parse(OpBatch, V4, []byte{0, 0, 1})
	if r.Parsed() || r.Err == nil {
		t.Errorf("batch of 3 bytes: parsed %v err %v", r.Parsed(), r.Err)
	}
}

// TestRequestAllocs: parsing into a Request that has grown, and copying it, allocate
// nothing: the fast and full modes do both on the data path.
func TestRequestAllocs(t *testing.T) {
	for _, c := range requestCases(V5) {
		body := c.m.AppendBody(nil, V5)
		var r, cp Request
		var buf []byte
		r.Parse(c.m.Opcode(), V5, body)
		buf = r.CopyTo(&cp, buf)
		if n := testing.AllocsPerRun(100, func() {
			r.Parse(c.m.Opcode(), V5, body)
			buf = r.CopyTo(&cp, buf)
		}); n != 0 {
			t.Errorf("%s: %v allocs per parse and copy; want 0", c.name, n)
		}
	}
}

// TestCountWork: the counter hears each parse and each whole decompression, with their
// bytes, wherever they are asked for, and a Frame parses its request once for every reader.
func TestCountWork(t *testing.T) {
	var parses, decomps int
	stop := CountWork(func(w Work, b []byte) {
		switch w {
		case WorkParse:
			parses++
		case WorkDecompress:
			decomps++
		}
	})
	defer stop()
	m := Query{Query: "SELECT * FROM ks.t", Params: QueryParams{Consistency: One}}
	frame, err := AppendFrameCompressed(nil, Header{Version: V4}, m, LZ4{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(frame)
	var f Frame
	f.Reset(h, frame, LZ4{})
	for range 3 {
		if _, ok := f.Request(); !ok {
			t.Fatal("not parsed")
		}
	}
	if parses != 1 || decomps != 1 {
		t.Errorf("three readers of one frame: %d parses, %d decompressions; want 1 and 1", parses, decomps)
	}
	// A reader that takes its own decompressor is counted too.
	if _, err := CompressorByName("lz4").Decompress(nil, frame[HeaderSize:]); err != nil {
		t.Fatal(err)
	}
	if decomps != 2 {
		t.Errorf("own decompressor: %d decompressions counted; want 2", decomps)
	}
	stop()
	f.Reset(h, frame, LZ4{})
	f.Request()
	if parses != 1 {
		t.Errorf("after stop: %d parses counted; want 1", parses)
	}
}

// FuzzRequest: Request never panics on any body, and where the server's decoders
// (DecodeQuery, DecodeExecute, DecodeBatch, DecodePrepare) read a body whole, Request reads
// the same request, and so does a copy of it.
func FuzzRequest(f *testing.F) {
	for _, v := range []byte{V3, V4, V5} {
		for _, c := range requestCases(v) {
			f.Add(byte(c.m.Opcode()), v, c.m.AppendBody(nil, v))
		}
	}
	f.Fuzz(func(t *testing.T, op, v byte, body []byte) {
		version := fuzzVersion(v)
		var r Request
		r.Parse(Opcode(op), version, body)
		var cp Request
		r.CopyTo(&cp, nil)
		var want Message
		var err error
		switch Opcode(op) {
		case OpQuery:
			want, err = DecodeQuery(body, version)
		case OpExecute:
			want, err = DecodeExecute(body, version)
		case OpBatch:
			want, err = DecodeBatch(body, version)
		case OpPrepare:
			want, err = DecodePrepare(body, version)
		default:
			return
		}
		if err != nil {
			return
		}
		if r.Err != nil {
			t.Fatalf("the decoder reads %#v; Request fails: %v", want, r.Err)
		}
		sameMessage(t, fromRequest(&r), want, version)
		sameMessage(t, fromRequest(&cp), want, version)
	})
}
