package cql

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// v5Cases are messages with what protocol v5 adds (native_protocol_v5.spec, section 9):
// [int] query flags, the keyspace and now_in_seconds of QUERY, PREPARE and BATCH, the
// result metadata id of EXECUTE, Prepared and Rows.
func v5Cases() []msgCase {
	return []msgCase{
		{name: "query with keyspace and now", msg: Query{Query: "SELECT * FROM t", Params: QueryParams{
			Consistency: One, Flags: QueryPageSize | QueryDefaultTimestamp | QueryWithKeyspace, ExtFlags: QueryNowInSeconds,
			PageSize: 10, Timestamp: 42, Keyspace: "ks", NowInSeconds: 1700000000,
		}}},
		{name: "query with now only", msg: Query{Query: "SELECT * FROM t", Params: QueryParams{
			Consistency: Quorum, ExtFlags: QueryNowInSeconds, NowInSeconds: -1,
		}}},
		{name: "prepare with keyspace", msg: Prepare{Query: "SELECT v FROM t WHERE k = ?", Keyspace: "ks"}},
		{name: "execute with result metadata id", msg: Execute{ID: []byte{1, 2}, ResultMetadataID: []byte{3, 4, 5}, Params: QueryParams{
			Consistency: LocalOne, Flags: QueryValues | QuerySkipMetadata, Values: []Value{{Bytes: []byte("k")}},
		}}},
		{name: "batch with keyspace and now", msg: Batch{Type: BatchLogged, Queries: []BatchQuery{
			{Query: "INSERT INTO t (k) VALUES (1)"},
		}, Consistency: One, Flags: QueryDefaultTimestamp | QueryWithKeyspace, ExtFlags: QueryNowInSeconds, Timestamp: 7, Keyspace: "ks", NowInSeconds: 9}},
		{name: "prepared with result metadata id", msg: PreparedResult{
			ID: []byte{0xca, 0xfe}, ResultMetadataID: []byte{0xbe, 0xef},
			Metadata:       PreparedMetadata{Flags: RowsGlobalTableSpec, PKIndexes: []uint16{0}, Columns: colsKT},
			ResultMetadata: RowsMetadata{Flags: RowsGlobalTableSpec, ColumnCount: 2, Columns: colsKT},
		}},
		{name: "rows with changed metadata", msg: RowsResult{
			Metadata: RowsMetadata{Flags: RowsGlobalTableSpec | RowsMetadataChanged | RowsHasMorePages, ColumnCount: 2,
				PagingState: []byte{1}, NewMetadataID: []byte{9, 9, 9}, Columns: colsKT},
			Rows: [][][]byte{{{0, 0, 0, 1}, nil}},
		}},
	}
}

func TestMessageRoundTripV5(t *testing.T) {
	for _, tc := range v5Cases() {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.msg.AppendBody(nil, V5)
			m, err := DecodeBody(tc.msg.Opcode(), V5, body)
			if err != nil {
				t.Fatalf("decode %x: %v", body, err)
			}
			if !reflect.DeepEqual(m, tc.msg) {
				t.Fatalf("got  %#v\nwant %#v", m, tc.msg)
			}
		})
	}
	// Every message of v3 and v4 encodes in v5 too, and decodes back to the same bytes.
	for _, tc := range messageCases() {
		t.Run("v4 message "+tc.name, func(t *testing.T) {
			body := tc.msg.AppendBody(nil, V5)
			m, err := DecodeBody(tc.msg.Opcode(), V5, body)
			if err != nil {
				t.Fatalf("decode %x: %v", body, err)
			}
			if again := m.AppendBody(nil, V5); !bytes.Equal(again, body) && !hasMap(tc.msg) {
				t.Fatalf("encoded again %x; first %x", again, body)
			}
		})
	}
}

// TestV5Layout pins where v5 puts what it adds, byte by byte, as the spec writes them.
func TestV5Layout(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"query flags are an [int], keyspace and now_in_seconds after the timestamp",
			QueryParams{Consistency: One, Flags: QueryWithKeyspace, ExtFlags: QueryNowInSeconds, Keyspace: "k", NowInSeconds: 2}.appendTo(V5),
			[]byte{0, 1, 0, 0, 1, 0x80, 0, 1, 'k', 0, 0, 0, 2}},
		{"v4 query flags are a [byte], and know no keyspace",
			QueryParams{Consistency: One, Flags: QueryWithKeyspace, Keyspace: "k"}.appendTo(V4),
			[]byte{0, 1, 0x80}},
		{"PREPARE: the query, [int] flags, the keyspace",
			Prepare{Query: "q", Keyspace: "k"}.AppendBody(nil, V5),
			[]byte{0, 0, 0, 1, 'q', 0, 0, 0, 1, 0, 1, 'k'}},
		{"PREPARE without keyspace: flags 0", Prepare{Query: "q"}.AppendBody(nil, V5), []byte{0, 0, 0, 1, 'q', 0, 0, 0, 0}},
		{"EXECUTE: the id, then the result metadata id",
			Execute{ID: []byte{7}, ResultMetadataID: []byte{8}, Params: QueryParams{Consistency: One}}.AppendBody(nil, V5),
			[]byte{0, 1, 7, 0, 1, 8, 0, 1, 0, 0, 0, 0}},
		{"Rows: the new metadata id after the paging state",
			AppendRowsMetadata(nil, RowsMetadata{Flags: RowsMetadataChanged, PagingState: []byte{5}, NewMetadataID: []byte{6}}),
			[]byte{0, 0, 0, 0x0a, 0, 0, 0, 0, 0, 0, 0, 1, 5, 0, 1, 6}},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s:\n got %x\nwant %x", tt.name, tt.got, tt.want)
		}
	}
}

func (p QueryParams) appendTo(version byte) []byte { return AppendQueryParams(nil, p, version) }

// TestFrameStatementV5: the view reads a v5 EXECUTE past its result metadata id, and
// points FlagsAt at the byte of the [int] flags that holds QuerySkipMetadata, so that a
// proxy clearing it in place clears the right bit.
func TestFrameStatementV5(t *testing.T) {
	ex := Execute{ID: []byte("stmt"), ResultMetadataID: []byte("meta"), Params: QueryParams{
		Consistency: LocalQuorum, Flags: QuerySkipMetadata | QueryValues, Values: []Value{{Bytes: []byte{1}}},
	}}
	raw := AppendFrame(nil, Header{Version: V5, Stream: 3}, ex)
	var f Frame
	h, _ := ParseHeader(raw)
	f.Reset(h, raw, nil)
	st, ok := f.Statement()
	if !ok || string(st.ID) != "stmt" || st.Consistency != LocalQuorum || st.Flags != QuerySkipMetadata|QueryValues {
		t.Fatalf("Statement: %+v, %v", st, ok)
	}
	raw[st.FlagsAt] &^= QuerySkipMetadata
	m, err := DecodeExecute(raw[HeaderSize:], V5)
	if err != nil || m.Params.Flags != QueryValues || string(m.ResultMetadataID) != "meta" {
		t.Errorf("after clearing skip-metadata at FlagsAt: %+v, %v; want flags %#x", m, err, QueryValues)
	}
	q := AppendFrame(nil, Header{Version: V5}, Query{Query: "SELECT 1", Params: QueryParams{Consistency: One, Flags: QueryPageSize, PageSize: 5}})
	h, _ = ParseHeader(q)
	f.Reset(h, q, nil)
	if st, ok := f.Statement(); !ok || string(st.Query) != "SELECT 1" || st.Flags != QueryPageSize || binary.BigEndian.Uint32(q[st.FlagsAt-3:]) != uint32(QueryPageSize) {
		t.Errorf("QUERY: %+v, %v", st, ok)
	}
}

// TestPeekV5: RowsCount reads past a changed metadata's id, and ReadPrepared past the
// result metadata id, as the full decoder does.
func TestPeekV5(t *testing.T) {
	rows := RowsResult{Metadata: RowsMetadata{Flags: RowsMetadataChanged | RowsGlobalTableSpec, ColumnCount: 2,
		NewMetadataID: []byte{1, 2, 3}, Columns: colsKT}, Rows: [][][]byte{{{1}, {2}}, {{3}, {4}}}}
	if n, ok := RowsCount(rows.AppendBody(nil, V5)); !ok || n != 2 {
		t.Errorf("RowsCount: %d, %v; want 2", n, ok)
	}
	pr := PreparedResult{ID: []byte{5}, ResultMetadataID: []byte{6, 6}, Metadata: PreparedMetadata{Columns: colsKT},
		ResultMetadata: RowsMetadata{ColumnCount: 2, Columns: colsKT}}
	info, ok := ReadPrepared(pr.AppendBody(nil, V5), V5)
	if !ok || string(info.ID) != "\x05" || string(info.Keyspace) != "ks" || info.ResultColumns != 2 {
		t.Errorf("ReadPrepared: %+v, %v", info, ok)
	}
}
