package cql

import (
	"testing"
)

func BenchmarkParseHeader(b *testing.B) {
	frame := AppendFrame(nil, Header{Version: V4, Stream: 17}, Query{Query: "SELECT 1"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeQuery(b *testing.B) {
	q := Query{Query: "INSERT INTO app.events (tenant_id, event_id, payload) VALUES (?, ?, ?) USING TTL 86400",
		Params: QueryParams{
			Consistency: LocalQuorum,
			Flags:       QueryValues | QueryPageSize | QueryDefaultTimestamp,
			Values: []Value{
				{Bytes: []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39}},
				{Bytes: []byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x11, 0xef, 0x80, 1, 2, 3, 4, 5, 6, 7}},
				{Bytes: []byte(`{"kind":"click","x":120,"y":48,"target":"#buy"}`)},
			},
			PageSize:  5000,
			Timestamp: 1714979289123000,
		}}
	body := q.AppendBody(nil, V4)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeQuery(body, V4); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRows() RowsResult {
	cols := make([]ColumnSpec, 6)
	for i := range cols {
		cols[i] = ColumnSpec{Keyspace: "app", Table: "blobs", Name: string(rune('a' + i)), Type: Simple(TypeBlob)}
	}
	rows := make([][][]byte, 100)
	for i := range rows {
		rows[i] = make([][]byte, 6)
		for j := range rows[i] {
			rows[i][j] = pseudoRandom(32 + j)
		}
	}
	return RowsResult{Metadata: RowsMetadata{Columns: cols, PagingState: []byte{1, 2, 3, 4}}, Rows: rows}
}

// BenchmarkEncodeRows encodes a whole RESULT frame of 100 rows of 6 blob columns into a
// reused buffer, through the Message interface and through the AppendRowsHeader fast path.
func BenchmarkEncodeRows(b *testing.B) {
	rows := benchRows()
	h := Header{Version: V4 | ResponseBit, Stream: 5}
	b.Run("frame", func(b *testing.B) {
		var m Message = rows
		buf := AppendFrame(nil, h, m)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendFrame(buf[:0], h, m)
		}
	})
	b.Run("lz4", func(b *testing.B) {
		var m Message = rows
		buf, _ := AppendFrameCompressed(nil, h, m, LZ4{})
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = AppendFrameCompressed(buf[:0], h, m, LZ4{})
		}
	})
	b.Run("header", func(b *testing.B) {
		buf := AppendFrame(nil, h, rows)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendHeader(buf[:0], h)
			buf = AppendRowsHeader(buf, rows.Metadata, len(rows.Rows))
			for _, row := range rows.Rows {
				for _, cell := range row {
					buf = AppendBytes(buf, cell)
				}
			}
			SetBodyLength(buf, len(buf)-HeaderSize)
		}
	})
}

func BenchmarkDecodeRows(b *testing.B) {
	body := benchRows().AppendBody(nil, V4)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeResult(body, V4); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompress(b *testing.B) {
	body := benchRows().AppendBody(nil, V4)
	for _, c := range []Compressor{LZ4{}, Snappy{}} {
		b.Run(c.Name(), func(b *testing.B) {
			z, _ := c.Compress(nil, body)
			var out []byte
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				out, _ = c.Decompress(out[:0], z)
				z, _ = c.Compress(z[:0], body)
			}
		})
	}
}
