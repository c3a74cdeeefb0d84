package cql

import (
	"bytes"
	"fmt"
	"testing"
)

// peekTypes are types of every shape, nested, for the column specs of the tests.
func peekTypes() []TypeInfo {
	text, blob := Simple(TypeVarchar), Simple(TypeBlob)
	pair := TypeInfo{ID: TypeTuple, Elems: []TypeInfo{blob, {ID: TypeCustom, Custom: "x.Y"}}}
	udt := TypeInfo{ID: TypeUDT, Keyspace: "ks", Name: "addr", Fields: []Field{{Name: "street", Type: text}, {Name: "pair", Type: pair}}}
	return []TypeInfo{
		text, blob, Simple(TypeDuration), pair, udt,
		{ID: TypeCustom, Custom: "org.apache.cassandra.db.marshal.VectorType(FloatType, 3)"},
		ListOf(Simple(TypeInt)), SetOf(Simple(TypeUUID)), MapOf(text, ListOf(udt)),
		{ID: TypeUDT, Keyspace: "ks", Name: "empty"}, {ID: TypeTuple},
	}
}

func peekColumns(ks, table string) []ColumnSpec {
	var cols []ColumnSpec
	for i, typ := range peekTypes() {
		cols = append(cols, ColumnSpec{Keyspace: ks, Table: table, Name: fmt.Sprintf("c%d", i), Type: typ})
	}
	return cols
}

// nested returns list<list<…<int>>> of depth lists.
func nested(depth int) TypeInfo {
	t := Simple(TypeInt)
	for range depth {
		t = ListOf(t)
	}
	return t
}

func TestSkipTypeInfo(t *testing.T) {
	types := append(peekTypes(), nested(maxTypeDepth), nested(maxTypeDepth+1))
	inputs := [][]byte{{0x00, 0x0a}, {0x00, 0x16}, {0x00, 0x23}, {0xff, 0xff}, {0x00, 0x20, 0x00, 0x40}}
	for _, typ := range types {
		inputs = append(inputs, AppendTypeInfo(nil, typ))
	}
	for _, b := range inputs {
		// Every cut of it too, and with bytes after it, which neither must read.
		for i := 0; i <= len(b); i++ {
			in := append(b[:i:i], 0xee, 0xee)
			var full, skip Decoder
			full.Reset(in)
			skip.Reset(in)
			full.TypeInfo()
			skip.SkipTypeInfo()
			if (full.Err() == nil) != (skip.Err() == nil) || full.Len() != skip.Len() {
				t.Errorf("%x: TypeInfo left %d bytes (%v); SkipTypeInfo %d (%v)", in, full.Len(), full.Err(), skip.Len(), skip.Err())
			}
		}
	}
}

func TestSimpleType(t *testing.T) {
	for id := range 1 << 16 {
		_, named := typeNames[TypeID(id)]
		if simpleType(TypeID(id)) != named {
			t.Errorf("simpleType(0x%04x) = %v; typeNames has it: %v", id, !named, named)
		}
	}
}

func TestSkipResponsePrefix(t *testing.T) {
	body := VoidResult{}.AppendBody(nil, V4)
	all := FlagTracing | FlagWarning | FlagCustomPayload
	tests := []struct {
		name  string
		flags byte
		p     ResponsePrefix
	}{
		{"none", 0, ResponsePrefix{}},
		{"tracing", FlagTracing, ResponsePrefix{TracingID: [16]byte{1}}},
		{"warnings", FlagWarning, ResponsePrefix{Warnings: []string{"a", "", "long warning"}}},
		{"no warnings", FlagWarning, ResponsePrefix{}},
		{"all", all, ResponsePrefix{TracingID: [16]byte{2}, Warnings: []string{"w"},
			CustomPayload: map[string][]byte{"k": {1, 2}, "null": nil, "empty": {}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append(AppendResponsePrefix(nil, tt.flags, tt.p), body...)
			for i := 0; i <= len(in); i++ {
				_, wantRest, wantErr := ParseResponsePrefix(tt.flags, in[:i])
				rest, err := SkipResponsePrefix(tt.flags, in[:i])
				if (err == nil) != (wantErr == nil) || !bytes.Equal(rest, wantRest) {
					t.Errorf("cut at %d: rest %x (%v); ParseResponsePrefix %x (%v)", i, rest, err, wantRest, wantErr)
				}
			}
			if n := testing.AllocsPerRun(100, func() { _, _ = SkipResponsePrefix(tt.flags, in) }); n != 0 {
				t.Errorf("%v allocations; want 0", n)
			}
		})
	}
}

// rowsCases are RESULT Rows bodies of every metadata shape.
func rowsCases() []struct {
	name string
	msg  RowsResult
} {
	row := func(cols, n int) [][][]byte {
		rows := make([][][]byte, n)
		for i := range rows {
			rows[i] = make([][]byte, cols)
			rows[i][0] = []byte("k")
		}
		return rows
	}
	cols := peekColumns("ks", "t")
	mixed := append(peekColumns("ks", "t")[:2], peekColumns("ks2", "u")...)
	return []struct {
		name string
		msg  RowsResult
	}{
		{"global spec", RowsResult{Metadata: RowsMetadata{Columns: cols}, Rows: row(len(cols), 3)}},
		{"per-column spec", RowsResult{Metadata: RowsMetadata{Columns: mixed}, Rows: row(len(mixed), 2)}},
		{"paged", RowsResult{Metadata: RowsMetadata{Columns: cols[:1], PagingState: []byte("page")}, Rows: row(1, 4)}},
		{"paged, null state", RowsResult{Metadata: RowsMetadata{Flags: RowsHasMorePages, Columns: cols[:1]}, Rows: row(1, 1)}},
		{"paged, no metadata", RowsResult{Metadata: RowsMetadata{Flags: RowsNoMetadata, ColumnCount: 2,
			PagingState: []byte("page")}, Rows: row(2, 5)}},
		{"no metadata", RowsResult{Metadata: RowsMetadata{Flags: RowsNoMetadata, ColumnCount: 1}, Rows: row(1, 300)}},
		{"empty", RowsResult{Metadata: RowsMetadata{Columns: cols}}},
		{"no columns", RowsResult{}},
	}
}

// TestRowsCount compares RowsCount with DecodeResult on whole bodies and checks every
// cut of them: each gives ok false or the whole body's count, and once a cut gives the
// count, every longer one does.
func TestRowsCount(t *testing.T) {
	for _, tc := range rowsCases() {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.msg.AppendBody(nil, V4)
			m, err := DecodeResult(body, V4)
			if err != nil {
				t.Fatal(err)
			}
			want := len(m.(RowsResult).Rows)
			if n, ok := RowsCount(body); !ok || n != want {
				t.Fatalf("RowsCount = %d, %v; DecodeResult has %d rows", n, ok, want)
			}
			counted := false
			for i := range body {
				n, ok := RowsCount(body[:i])
				if ok && n != want || counted && !ok {
					t.Fatalf("cut at %d of %d: RowsCount = %d, %v; want %d", i, len(body), n, ok, want)
				}
				counted = ok
			}
			if n := testing.AllocsPerRun(100, func() { RowsCount(body) }); n != 0 {
				t.Errorf("%v allocations; want 0", n)
			}
		})
	}
}

func TestRowsCountNotRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"void", VoidResult{}.AppendBody(nil, V4)},
		{"prepared", PreparedResult{ID: []byte{1}}.AppendBody(nil, V4)},
		{"set keyspace", SetKeyspaceResult{Keyspace: "ks"}.AppendBody(nil, V4)},
		{"negative columns", AppendInt(AppendInt(AppendInt(AppendInt(nil, ResultRows), RowsNoMetadata), -1), 0)},
		{"negative count", AppendInt(AppendInt(AppendInt(AppendInt(nil, ResultRows), RowsNoMetadata), 1), -1)},
		{"unknown type", AppendInt(append(AppendInt(AppendInt(AppendInt(nil, ResultRows), RowsGlobalTableSpec), 1),
			0, 1, 'k', 0, 1, 't', 0, 1, 'c', 0x00, 0x16), 1)},
		{"too deep", RowsResult{Metadata: RowsMetadata{Columns: []ColumnSpec{{Name: "c", Type: nested(maxTypeDepth + 1)}}}}.AppendBody(nil, V4)},
	} {
		if n, ok := RowsCount(tc.body); ok {
			t.Errorf("%s: RowsCount = %d, true; want false", tc.name, n)
		}
	}
}

// preparedCases are RESULT Prepared bodies of every metadata shape.
func preparedCases() []struct {
	name string
	msg  PreparedResult
} {
	cols := peekColumns("ks", "t")
	mixed := append(peekColumns("ks2", "u")[:3], peekColumns("ks", "t")...)
	id := []byte("0123456789abcdef")
	return []struct {
		name string
		msg  PreparedResult
	}{
		{"global spec", PreparedResult{ID: id, Metadata: PreparedMetadata{PKIndexes: []uint16{0, 2}, Columns: cols},
			ResultMetadata: RowsMetadata{Columns: cols}}},
		{"per-column spec", PreparedResult{ID: id, Metadata: PreparedMetadata{PKIndexes: []uint16{1}, Columns: mixed},
			ResultMetadata: RowsMetadata{Columns: mixed[:1]}}},
		{"empty keyspace", PreparedResult{ID: id, Metadata: PreparedMetadata{Columns: peekColumns("", "")}}},
		{"no bound variables", PreparedResult{ID: id, ResultMetadata: RowsMetadata{Columns: cols}}},
		{"result without metadata", PreparedResult{ID: id, Metadata: PreparedMetadata{Columns: cols[:1]},
			ResultMetadata: RowsMetadata{Flags: RowsNoMetadata, ColumnCount: 7}}},
		{"empty id", PreparedResult{ID: []byte{}}},
	}
}

// wantPrepared is what ReadPrepared must read of r, as the full decoder decoded it.
func wantPrepared(r PreparedResult) PreparedInfo {
	p := PreparedInfo{ID: r.ID, ResultColumns: r.ResultMetadata.ColumnCount}
	if len(r.Metadata.Columns) > 0 {
		p.Keyspace = []byte(r.Metadata.Columns[0].Keyspace)
	}
	return p
}

func samePrepared(a, b PreparedInfo) bool {
	return bytes.Equal(a.ID, b.ID) && (a.Keyspace == nil) == (b.Keyspace == nil) &&
		bytes.Equal(a.Keyspace, b.Keyspace) && a.ResultColumns == b.ResultColumns
}

// TestReadPrepared compares ReadPrepared with DecodeResult on whole bodies of both
// versions and checks every cut of them: each field is either unknown or the whole body's.
func TestReadPrepared(t *testing.T) {
	for _, tc := range preparedCases() {
		for _, v := range []byte{V3, V4} {
			t.Run(fmt.Sprintf("%s v%d", tc.name, v), func(t *testing.T) {
				body := tc.msg.AppendBody(nil, v)
				m, err := DecodeResult(body, v)
				if err != nil {
					t.Fatal(err)
				}
				want := wantPrepared(m.(PreparedResult))
				if p, ok := ReadPrepared(body, v); !ok || !samePrepared(p, want) {
					t.Fatalf("ReadPrepared = %+v, %v; DecodeResult gives %+v", p, ok, want)
				}
				for i := range body {
					p, ok := ReadPrepared(body[:i], v)
					if ok && !consistentPrepared(p, want) {
						t.Fatalf("cut at %d of %d: ReadPrepared = %+v; want parts of %+v", i, len(body), p, want)
					}
				}
				if n := testing.AllocsPerRun(100, func() { ReadPrepared(body, v) }); n != 0 {
					t.Errorf("%v allocations; want 0", n)
				}
			})
		}
	}
}

// consistentPrepared reports whether every field of p that is known is the one of want.
func consistentPrepared(p, want PreparedInfo) bool {
	return bytes.Equal(p.ID, want.ID) && (p.Keyspace == nil || bytes.Equal(p.Keyspace, want.Keyspace)) &&
		(p.ResultColumns == -1 || p.ResultColumns == want.ResultColumns)
}

func TestReadPreparedNotPrepared(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"rows", RowsResult{}.AppendBody(nil, V4)},
		{"no id", AppendInt(nil, ResultPrepared)},
		{"cut id", append(AppendInt(nil, ResultPrepared), 0, 4, 1, 2)},
	} {
		if p, ok := ReadPrepared(tc.body, V4); ok {
			t.Errorf("%s: ReadPrepared = %+v, true; want false", tc.name, p)
		}
	}
}

// FuzzRowsCount checks RowsCount against the full decoder of the kind, the metadata and
// the count (and against DecodeResult when the whole body decodes), and that no cut of
// an input gives another count than the input.
func FuzzRowsCount(f *testing.F) {
	for _, s := range bodySeeds(OpResult) {
		f.Add(s.body)
	}
	for _, tc := range rowsCases() {
		f.Add(tc.msg.AppendBody(nil, V4))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, ok := RowsCount(body)
		d := Decoder{b: body}
		kind := d.Int()
		d.RowsMetadata()
		if c := d.Int(); kind == ResultRows && d.err == nil && c >= 0 && (!ok || n != int(c)) {
			t.Fatalf("RowsCount = %d, %v; the full decoder reads %d", n, ok, c)
		}
		if m, err := DecodeResult(body, V4); err == nil {
			if r, rows := m.(RowsResult); rows && (!ok || n != len(r.Rows)) {
				t.Fatalf("RowsCount = %d, %v; DecodeResult has %d rows", n, ok, len(r.Rows))
			}
		}
		if !ok {
			return
		}
		for i := range min(len(body), 4096) {
			if m, ok := RowsCount(body[:i]); ok && m != n {
				t.Fatalf("cut at %d: RowsCount = %d; the whole body's is %d", i, m, n)
			}
		}
	})
}

// FuzzReadPrepared checks ReadPrepared against the full decoder of the id and the
// metadata (and against DecodeResult when the whole body decodes), and that no cut of an
// input reads another field than the input.
func FuzzReadPrepared(f *testing.F) {
	for _, s := range bodySeeds(OpResult) {
		f.Add(s.body, s.version)
	}
	for _, tc := range preparedCases() {
		f.Add(tc.msg.AppendBody(nil, V3), V3)
		f.Add(tc.msg.AppendBody(nil, V4), V4)
	}
	f.Fuzz(func(t *testing.T, body []byte, v byte) {
		v = fuzzVersion(v)
		p, ok := ReadPrepared(body, v)
		d := Decoder{b: body}
		if d.Int() == ResultPrepared {
			r := PreparedResult{ID: d.ShortBytes(), Metadata: d.PreparedMetadata(v), ResultMetadata: d.RowsMetadata()}
			if want := wantPrepared(r); d.err == nil && (!ok || !samePrepared(p, want)) {
				t.Fatalf("ReadPrepared = %+v, %v; the full decoder reads %+v", p, ok, want)
			}
		}
		if m, err := DecodeResult(body, v); err == nil {
			if r, prep := m.(PreparedResult); prep && (!ok || !samePrepared(p, wantPrepared(r))) {
				t.Fatalf("ReadPrepared = %+v, %v; DecodeResult gives %+v", p, ok, wantPrepared(r))
			}
		}
		if !ok {
			return
		}
		for i := range min(len(body), 4096) {
			if q, ok := ReadPrepared(body[:i], v); ok && !consistentPrepared(q, p) {
				t.Fatalf("cut at %d: ReadPrepared = %+v; the whole body gives %+v", i, q, p)
			}
		}
	})
}

func BenchmarkRowsCount(b *testing.B) {
	body := benchRows().AppendBody(nil, V4)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := RowsCount(body); !ok {
			b.Fatal("not counted")
		}
	}
}
