package tracing

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

func TestRowsCount(t *testing.T) {
	blob := cql.Simple(cql.TypeBlob)
	text := cql.Simple(cql.TypeVarchar)
	nested := cql.TypeInfo{ID: cql.TypeMap, Key: &text, Elem: &cql.TypeInfo{ID: cql.TypeList, Elem: &cql.TypeInfo{
		ID: cql.TypeUDT, Keyspace: "ks", Name: "addr", Fields: []cql.Field{{Name: "street", Type: text},
			{Name: "pair", Type: cql.TypeInfo{ID: cql.TypeTuple, Elems: []cql.TypeInfo{blob, {ID: cql.TypeCustom, Custom: "x.Y"}}}}}}}}
	row := func(n int) [][][]byte {
		rows := make([][][]byte, n)
		for i := range rows {
			rows[i] = [][]byte{[]byte("k"), nil}
		}
		return rows
	}
	tests := []struct {
		name string
		body []byte
		want int
		ok   bool
	}{
		{"global spec", cql.RowsResult{Metadata: cql.RowsMetadata{Columns: []cql.ColumnSpec{
			{Keyspace: "ks", Table: "t", Name: "a", Type: blob}, {Keyspace: "ks", Table: "t", Name: "b", Type: text}}},
			Rows: row(3)}.AppendBody(nil, cql.V4), 3, true},
		{"per-column spec, nested types", cql.RowsResult{Metadata: cql.RowsMetadata{Columns: []cql.ColumnSpec{
			{Keyspace: "ks", Table: "t", Name: "a", Type: blob}, {Keyspace: "ks2", Table: "u", Name: "b", Type: nested}}},
			Rows: row(2)}.AppendBody(nil, cql.V4), 2, true},
		{"paged, no metadata", cql.RowsResult{Metadata: cql.RowsMetadata{Flags: cql.RowsNoMetadata, ColumnCount: 2,
			PagingState: []byte("page")}, Rows: row(5)}.AppendBody(nil, cql.V4), 5, true},
		{"empty", cql.RowsResult{Metadata: cql.RowsMetadata{Columns: []cql.ColumnSpec{{Keyspace: "ks", Table: "t", Name: "a", Type: blob}}}}.AppendBody(nil, cql.V4), 0, true},
		{"void", cql.VoidResult{}.AppendBody(nil, cql.V4), 0, false},
		{"truncated", cql.RowsResult{Metadata: cql.RowsMetadata{Columns: []cql.ColumnSpec{{Keyspace: "ks", Table: "t", Name: "a", Type: nested}}}}.AppendBody(nil, cql.V4)[:20], 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := rowsCount(tt.body)
			if got != tt.want || ok != tt.ok {
				t.Errorf("rowsCount = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
