package capturefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// mustCapture writes a small capture: a header, a table, two statements, n records and
// the end entry.
func mustCapture(tb testing.TB, n int, keep bool) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	values := ValuesShape
	if keep {
		values = ValuesKeep
	}
	check := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	check(w.Header(Header{TracecarVersion: "test", StartedAt: time.Unix(1, 0).UTC(), Values: values}))
	check(w.Keyspace(Keyspace{Name: "ks", Replication: map[string]string{"class": "SimpleStrategy"}}))
	check(w.Table(Table{Keyspace: "ks", Name: "t", Columns: []Column{{Name: "k", Type: "int", Kind: PartitionKey}}}))
	check(w.Statement(Statement{ID: 1, Prepared: true, Text: "SELECT * FROM ks.t WHERE k = ?", Verb: "select",
		Keyspace: "ks", Table: "t", Values: []Value{{Column: "k", Type: "int", At: -1}}, PK: []int{0}}))
	check(w.Statement(Statement{ID: 2, Text: "INSERT INTO ks.t (k) VALUES (?)", Verb: "insert", Keyspace: "ks", Table: "t",
		Values: []Value{{Column: "k", Type: "int", Literal: "integer", At: 29}}, PK: []int{0}}))
	for i := range n {
		r := Record{AtUS: int64(i * 100), Conn: uint32(1 + i%2), Opcode: 0x0A, Keyspace: "ks", Consistency: 1, Serial: -1,
			PageSize: 5000, BatchType: -1, RespOpcode: OpResult, ResultKind: ResultRows, Rows: 10, LatencyUS: 250,
			ReqBytes: 40, RespBytes: 300,
			Parts: []Part{{Statement: uint32(1 + i%2), Lens: []int32{4}, Values: [][]byte{{0, 0, 0, byte(i)}},
				Key: []byte{1, 2, 3, 4, 5, 6, 7, byte(i % 3)}}}}
		check(w.Record(&r, keep))
		if i%50 == 0 {
			check(w.Flush())
		}
	}
	check(w.End(End{EndedAt: time.Unix(2, 0).UTC(), Reason: "stopped", Records: uint64(n)}))
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, keep := range []bool{false, true} {
		b := mustCapture(t, 200, keep)
		c, err := Read(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("keep=%v: %v", keep, err)
		}
		if len(c.Records) != 200 || len(c.Statements) != 2 || len(c.Tables) != 1 || c.End.Records != 200 {
			t.Fatalf("keep=%v: got %d records, %d statements, %d tables, end %+v", keep, len(c.Records), len(c.Statements), len(c.Tables), c.End)
		}
		r := c.Records[7]
		if r.AtUS != 700 || r.Conn != 2 || r.Keyspace != "ks" || r.Consistency != 1 || r.Serial != -1 || r.PageSize != 5000 ||
			r.Rows != 10 || r.LatencyUS != 250 || r.Parts[0].Statement != 2 || r.Parts[0].Lens[0] != 4 || r.Parts[0].Key[7] != 1 {
			t.Errorf("keep=%v: record 7 = %+v", keep, r)
		}
		if got := r.Parts[0].Values; keep != (got != nil && bytes.Equal(got[0], []byte{0, 0, 0, 7})) {
			t.Errorf("keep=%v: values %v", keep, got)
		}
	}
}

func TestBadFiles(t *testing.T) {
	good := mustCapture(t, 120, false)
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x40
		return b
	}
	version := bytes.Clone(good)
	binary.BigEndian.PutUint16(version[len(Magic):], 9)
	tests := []struct {
		name string
		file []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrTruncated, "empty"},
		{"not a capture", []byte("hello, world, this is text"), ErrNotCapture, "not a tracecar capture"},
		{"unknown version", version, nil, "capture format version 9: this tracecar reads version 1"},
		{"cut in the preamble", good[:10], ErrTruncated, "preamble"},
		{"cut after the preamble", good[:len(Magic)+2], ErrTruncated, "without its end entry"},
		{"cut in a chunk", good[:len(good)/2], ErrTruncated, "truncated"},
		{"cut before the end", good[:len(good)-3], ErrTruncated, "truncated"},
		{"a flipped byte", flip(len(good) / 2), ErrCorrupt, "corrupt"},
		{"a flipped checksum", flip(len(Magic) + 2 + 4), ErrCorrupt, "chunk at byte 18"},
		{"garbage appended", append(bytes.Clone(good), 1, 2, 3), nil, "chunk at byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.file))
			if err == nil {
				t.Fatal("read without error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v; want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q; want it to say %q", err, tt.msg)
			}
		})
	}
	var ve *VersionError
	if _, err := Read(bytes.NewReader(version)); !errors.As(err, &ve) || ve.Version != 9 {
		t.Errorf("unknown version: error %v; want a VersionError for 9", err)
	}
}

// TestEveryCutIsDetected cuts a file at every length: each read fails, as truncated or
// corrupt, and none passes for whole.
func TestEveryCutIsDetected(t *testing.T) {
	good := mustCapture(t, 30, false)
	for n := range len(good) {
		_, err := Read(bytes.NewReader(good[:n]))
		if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d: error %v; want truncated or corrupt", n, len(good), err)
		}
	}
}

func TestStreamingReader(t *testing.T) {
	r, err := NewReader(bytes.NewReader(mustCapture(t, 3, false)))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []Kind
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, e.Kind)
	}
	want := []Kind{KindHeader, KindKeyspace, KindTable, KindStatement, KindStatement, KindName, KindRecord, KindRecord, KindRecord, KindEnd}
	if !slicesEqual(kinds, want) {
		t.Errorf("kinds %v; want %v", kinds, want)
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSummarize(t *testing.T) {
	c, err := Read(bytes.NewReader(mustCapture(t, 300, false)))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(c)
	if len(s.Statements) != 2 || s.Statements[0].Count != 150 || s.Reads != 150 || s.Writes != 150 {
		t.Errorf("statements %+v, reads %d, writes %d", s.Statements, s.Reads, s.Writes)
	}
	if s.Keys.Distinct != 3 || s.Keys.WithKey != 300 || len(s.Keys.Top) != 3 || s.Keys.Top[0].SharePct < 33 {
		t.Errorf("keys %+v", s.Keys)
	}
	if s.Latency.P99 != 250 || s.ReqBytes.Max != 40 {
		t.Errorf("latency %+v, request bytes %+v", s.Latency, s.ReqBytes)
	}
	// Statement 1 binds an int of 4 bytes at each of its 150 runs; statement 2's value is a
	// literal, which is not bound.
	if want := []TypeSizes{{Type: "int", Count: 150, MeanLen: 4, MaxLen: 4}}; !slicesEqual(s.Values, want) {
		t.Errorf("value sizes %+v; want %+v", s.Values, want)
	}
	st := s.Statements[0]
	if st.ID != 1 || st.SharePct != 50 || st.Rows != 1500 || st.P99US != 250 || st.Consistency["ONE"] != 150 || st.PageSizes["5000"] != 150 {
		t.Errorf("first statement %+v", st)
	}
	if s.Mix["select"] != 150 || s.Mix["insert"] != 150 || s.SpanS != 0.0299 || s.OpRate < 10033 || s.OpRate > 10034 {
		t.Errorf("mix %v, span %vs, rate %v/s; want 150 each, 0.0299s, 300/0.0299", s.Mix, s.SpanS, s.OpRate)
	}
}
