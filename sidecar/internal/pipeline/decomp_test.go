package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// insertQuery is an INSERT of about size bytes of text that compresses as real values do
// (a JSON-like payload, about 2:1), neither as a run of one byte nor as random bytes.
func insertQuery(size int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ks.events (id, at, payload) VALUES (7f3c2a10-0d6e-11ef-9a2b-0242ac120002, '2026-12-01 01:00:00', '")
	x := uint32(2463534242)
	for b.Len() < size-3 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		fmt.Fprintf(&b, `{"user":"u%d","event":"view","n":%d},`, x%5000, x>>20)
	}
	b.WriteString("')")
	return b.String()
}

// compressedFrame is a QUERY frame of q compressed with comp.
func compressedFrame(tb testing.TB, q string, comp cql.Compressor) []byte {
	tb.Helper()
	f, err := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: 1},
		cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One}}, comp)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// BenchmarkRequestCompressedInsert is conn.request on a compressed INSERT QUERY of about
// 1 KiB, tracing and statement statistics off: the rewrite has no use for its body. "none"
// is the same INSERT uncompressed, for reference.
func BenchmarkRequestCompressedInsert(b *testing.B) { benchRequest(b, insertQuery(1024)) }

// BenchmarkRequestCompressedSelect is conn.request on a compressed SELECT of a user table
// of about 1 KiB (a long IN list): the rewrite reads it whole, after its start.
func BenchmarkRequestCompressedSelect(b *testing.B) {
	q := "SELECT payload FROM ks.events WHERE id IN ("
	for i := 0; len(q) < 1000; i++ {
		q += fmt.Sprintf("7f3c2a10-0d6e-11ef-9a2b-0242ac12%04x, ", i)
	}
	benchRequest(b, q+"7f3c2a10-0d6e-11ef-9a2b-0242ac120002)")
}

// BenchmarkRequestCompressedLongSelect is conn.request on a compressed SELECT of about
// 500 bytes whose FROM lies beyond the start that is decompressed first: the worst case,
// which decompresses that start twice.
func BenchmarkRequestCompressedLongSelect(b *testing.B) { benchRequest(b, longSelect()) }

// benchRequest is conn.request on a QUERY of q, uncompressed and with each compression.
func benchRequest(b *testing.B, q string) {
	for i, comp := range []cql.Compressor{nil, cql.LZ4{}, cql.Snappy{}} {
		name := "none"
		if comp != nil {
			name = comp.Name()
		}
		b.Run(name, func(b *testing.B) {
			c := fuzzConn(int32(i))
			f := frame(cql.V4, 0, 1, cql.OpQuery, queryBody(q))
			if comp != nil {
				f = compressedFrame(b, q, comp)
			}
			h, err := cql.ParseHeader(f)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				c.Request(h, f, len(f), nil)
				c.Streams.Take(h.Stream)
			}
		})
	}
}

// countingCompressor counts the full decompressions of the compressor it wraps.
type countingCompressor struct {
	cql.Compressor
	full int
}

func (c *countingCompressor) Decompress(dst, src []byte) ([]byte, error) {
	c.full++
	return c.Compressor.Decompress(dst, src)
}

// countDecompressions makes compressors[i] count its full decompressions for the test.
func countDecompressions(t *testing.T, i int) *countingCompressor {
	t.Helper()
	orig := compressors[i]
	cc := &countingCompressor{Compressor: orig}
	compressors[i] = cc
	t.Cleanup(func() { compressors[i] = orig })
	return cc
}

// longSelect is a SELECT of system.peers_v2 whose FROM lies far beyond queryPrefix.
func longSelect() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i := range 60 {
		fmt.Fprintf(&b, "column_%d, ", i)
	}
	b.WriteString("peer FROM system.peers_v2")
	return b.String()
}

// longComment is a comment longer than queryPrefix, before a statement's first word.
var longComment = "/* " + strings.Repeat("a comment that hides the first word ", 6) + "*/\n  "

func TestCompressedQueryDecompressedOnlyWhenNeeded(t *testing.T) {
	tests := []struct {
		name string
		q    string
		kind rewriteKind
		full int // full decompressions by inspect and statBody, statistics off
	}{
		{"insert", insertQuery(1024), kindNone, 0},
		{"short insert", "INSERT INTO ks.t (k) VALUES (1)", kindNone, 0},
		{"update", "  update ks.t SET v = 1 WHERE k = 2", kindNone, 0},
		{"delete after comment", "-- clean up\nDELETE FROM ks.t WHERE k = 1", kindNone, 0},
		{"batch", "BEGIN BATCH INSERT INTO ks.t (k) VALUES (1); APPLY BATCH", kindNone, 0},
		{"create", "CREATE TABLE ks.t (k int PRIMARY KEY)", kindNone, 0},
		{"select word cut", "selectx * FROM system.local", kindNone, 0},
		// A SELECT whose table is named in the start of the body is read from it alone.
		{"select user table", "SELECT * FROM ks.t WHERE k = 1", kindNone, 0},
		{"select user table, long", "SELECT * FROM ks.t WHERE k IN (" + strings.Repeat("1234567, ", 100) + "0)", kindNone, 0},
		{"select local", "SELECT * FROM system.local WHERE key = 'local'", kindLocal, 0},
		{"select local after comment", "/* driver */ select peer from system.peers", kindPeers, 0},
		{"use", "USE system", kindUse, 0},
		// One whose table comes later is read whole.
		{"long select", longSelect(), kindPeersV2, 1},
		{"long select of a user table", longSelect()[:len(longSelect())-len("system.peers_v2")] + "ks.t", kindNone, 1},
		// A first word beyond the prefix is not guessed either.
		{"insert after long comment", longComment + insertQuery(300), kindNone, 1},
		{"select after long comment", longComment + "SELECT * FROM system.local", kindLocal, 1},
	}
	for i, comp := range []cql.Compressor{cql.LZ4{}, cql.Snappy{}} {
		t.Run(comp.Name(), func(t *testing.T) {
			cc := countDecompressions(t, i+1)
			c := fuzzConn(int32(i + 1))
			for _, tt := range tests {
				f := compressedFrame(t, tt.q, comp)
				h, err := cql.ParseHeader(f)
				if err != nil {
					t.Fatal(err)
				}
				cc.full = 0
				c.Request(h, f, len(f), nil)
				req, ok, _ := c.Streams.Take(h.Stream)
				if !ok || req.kind != tt.kind {
					t.Errorf("%s: kind %#x (in flight %v); want %#x", tt.name, req.kind, ok, tt.kind)
				}
				if cc.full != tt.full {
					t.Errorf("%s: %d full decompressions; want %d", tt.name, cc.full, tt.full)
				}
			}
		})
	}
}

// TestCorruptCompressedQuery: a QUERY whose compressed start cannot be read is left to the
// node, without a full decompression.
func TestCorruptCompressedQuery(t *testing.T) {
	for i, comp := range []cql.Compressor{cql.LZ4{}, cql.Snappy{}} {
		t.Run(comp.Name(), func(t *testing.T) {
			cc := countDecompressions(t, i+1)
			c := fuzzConn(int32(i + 1))
			f := compressedFrame(t, "SELECT * FROM system.local", comp)
			cut := f[:cql.HeaderSize+6]
			cql.SetBodyLength(cut, 6)
			garbage := append(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Flags: cql.FlagCompression, Stream: 1, Opcode: cql.OpQuery, Length: 4}), 0xff, 0xff, 0xff, 0xff)
			for _, f := range [][]byte{cut, garbage} {
				h, err := cql.ParseHeader(f)
				if err != nil {
					t.Fatal(err)
				}
				if k, _, _ := c.inspectFrame(h, f); k != kindNone || cc.full != 0 {
					t.Errorf("% x: kind %#x after %d full decompressions; want none after none", f, k, cc.full)
				}
			}
		})
	}
}

// TestStatisticsGetWholeCompressedBody: with statement statistics on, a compressed INSERT
// or short SELECT is decompressed once, for the statistics, and a long SELECT or a PREPARE
// once, shared by the rewrite and the statistics; the statistics see the whole statement.
func TestStatisticsGetWholeCompressedBody(t *testing.T) {
	for i, comp := range []cql.Compressor{cql.LZ4{}, cql.Snappy{}} {
		t.Run(comp.Name(), func(t *testing.T) {
			cc := countDecompressions(t, i+1)
			st := statements.New(statements.Options{})
			st.SetEnabled(true)
			c := fuzzConn(int32(i + 1))
			c.sh.Statements = st
			prepare, err := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: 1},
				cql.Prepare{Query: "SELECT * FROM system.peers WHERE peer = ?"}, comp)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range [][]byte{compressedFrame(t, insertQuery(1024), comp), compressedFrame(t, "SELECT * FROM system.local", comp), compressedFrame(t, longSelect(), comp), prepare} {
				h, _ := cql.ParseHeader(f)
				cc.full = 0
				c.Request(h, f, len(f), nil)
				if cc.full != 1 {
					t.Errorf("%s of %d bytes: %d full decompressions; want 1", h.Opcode, len(f), cc.full)
				}
				req, _, _ := c.Streams.Take(h.Stream)
				resp := frame(cql.ResponseBit|cql.V4, 0, h.Stream, cql.OpResult, voidBody())
				st.Response(req.stat, c.respView(resp), tracing.Now())
			}
			got := map[string]uint64{}
			for _, s := range st.List("calls", 0, false) {
				got[s.Table] += s.Calls
			}
			if got["events"] != 1 || got["local"] != 1 || got["peers_v2"] != 1 {
				t.Errorf("statistics by table %v; want events, local and peers_v2 counted once each", got)
			}
		})
	}
}

// TestStatementStart: read from any start of a statement, statementStart either says it
// does not know, or gives statementTable's answer on the whole statement; on the whole
// statement it always knows; and the scan of the whole statement that goes on from where
// it stopped gives that answer too.
func TestStatementStart(t *testing.T) {
	queries := []string{
		"SELECT * FROM system.local WHERE key='local'",
		"select peer, rpc_address from SYSTEM.PEERS",
		`SELECT * FROM "system"."local"`,
		"SELECT * FROM system . local",
		"SELECT * FROM system.localx",
		"SELECT * FROM system_schema.keyspaces",
		"SELECT * FROM ks.t WHERE v = 'system.local'",
		"SELECT 'it''s' FROM system.peers_v2",
		"SELECT * FROM ks.t /* system.local */",
		"SELECT * FROM ks.t WHERE v = $$ from system.peers $$",
		"SELECT count(*) FROM system.local",
		"SELECT (a) FROM (system.local)",
		"/* c */ select\n  peer -- from x\n  from system.peers",
		"-- a\n// b\nSELECT * FROM peers",
		"SELECT * FROM local",
		"SELECT * FROM \"local\"",
		"SELECT \"from\" FROM ks.t",
		"use system",
		"USE \"system\"",
		"INSERT INTO ks.t (k) VALUES ('system')",
		"UPDATE ks.t SET v = 'SELECT * FROM system.local' WHERE k = 1",
		"SELECTfrom FROM system.local",
		"SELECT * FROM",
		"SELECT * FROM system.",
		"",
		longSelect(),
		longComment + "SELECT * FROM system.local",
	}
	for _, q := range queries {
		for _, inSystem := range []bool{false, true} {
			want := statementTable([]byte(q), inSystem)
			for n := 0; n <= len(q); n++ {
				got, known, sc := statementStart([]byte(q[:n]), inSystem, n < len(q))
				if known && got != want {
					t.Errorf("%q cut at %d (in system %v): %#x; want %#x or unknown", q, n, inSystem, got, want)
				}
				if n == len(q) && !known {
					t.Errorf("%q whole (in system %v): unknown", q, inSystem)
				}
				// The scan of the whole statement goes on from where the cut one stopped.
				if got, known, _ := statementScan([]byte(q), inSystem, -1, sc); !known || got != want {
					t.Errorf("%q scanned on from its cut at %d (%+v, in system %v): %#x, %v; want %#x", q, n, sc, inSystem, got, known, want)
				}
			}
		}
	}
	// Known as soon as the table is: the WHERE clause is not needed.
	q := "SELECT * FROM system.local WHERE key = 'local'"
	if k, known, _ := statementStart([]byte(q[:len("SELECT * FROM system.local ")]), false, true); !known || k != kindLocal {
		t.Errorf("table named, WHERE cut: %#x, %v; want local, known", k, known)
	}
	if _, known, _ := statementStart([]byte(q[:len("SELECT * FROM system.local")]), false, true); known {
		t.Errorf("table name at the cut (it may go on, as localx): known")
	}
}

// FuzzStatementStart: whatever the statement and wherever it is cut, statementStart knows
// only statementTable's answer on the whole statement, and the scan that goes on from
// where it stopped finds that answer.
func FuzzStatementStart(f *testing.F) {
	f.Add("SELECT * FROM system.local WHERE key='local'", uint16(20), false)
	f.Add("/* c */ select peer -- from x\n from \"system\" . peers", uint16(40), true)
	f.Add("SELECT 'a''b' FROM $$x$$ peers_v2", uint16(30), true)
	f.Fuzz(func(t *testing.T, q string, n uint16, inSystem bool) {
		cut := min(int(n), len(q))
		got, known, sc := statementStart([]byte(q[:cut]), inSystem, cut < len(q))
		want := statementTable([]byte(q), inSystem)
		if known && got != want {
			t.Fatalf("%q cut at %d: %#x; want %#x or unknown", q, cut, got, want)
		}
		if got, known, _ := statementScan([]byte(q), inSystem, -1, sc); !known || got != want {
			t.Fatalf("%q scanned on from its cut at %d (%+v): %#x, %v; want %#x", q, cut, sc, got, known, want)
		}
		if cut == len(q) && !known {
			t.Fatalf("%q whole: unknown", q)
		}
	})
}
