// Package frames builds the CQL frames and message bodies that the sidecar's and its
// pipeline's tests send and answer with. It is imported by tests only.
package frames

import (
	"encoding/binary"
	"net/netip"

	"github.com/tracecar/tracecar/internal/cql"
)

// Frame builds a frame with the given header fields and body.
func Frame(version, flags byte, stream int16, op cql.Opcode, body []byte) []byte {
	f := cql.AppendHeader(nil, cql.Header{Version: version, Flags: flags, Stream: stream, Opcode: op, Length: uint32(len(body))})
	return append(f, body...)
}

// QueryBody is the body of a QUERY of q at consistency ONE without values.
func QueryBody(q string) []byte {
	return cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, cql.V4)
}

// VoidBody is the body of a RESULT Void.
func VoidBody() []byte { return cql.VoidResult{}.AppendBody(nil, cql.V4) }

// ExecuteFrame is an EXECUTE of a 16-byte id with two bound values, as a driver sends for a
// prepared INSERT.
func ExecuteFrame(stream int16) []byte {
	m := cql.Execute{ID: []byte("0123456789abcdef"), Params: cql.QueryParams{
		Consistency: cql.LocalOne, Flags: cql.QueryValues | cql.QuerySkipMetadata,
		Values: []cql.Value{{Bytes: make([]byte, 8)}, {Bytes: make([]byte, 34)}},
	}}
	return cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: stream}, m)
}

// RowsBody builds a RESULT Rows body with the given columns of system.table.
func RowsBody(table string, cols []cql.ColumnSpec, noMetadata bool, rows ...[][]byte) []byte {
	for i := range cols {
		cols[i].Keyspace, cols[i].Table = "system", table
	}
	md := cql.RowsMetadata{Columns: cols, ColumnCount: len(cols)}
	if noMetadata {
		md.Flags = cql.RowsNoMetadata
	}
	return cql.RowsResult{Metadata: md, Rows: rows}.AppendBody(nil, cql.V4)
}

// LocalColumns are columns of system.local that the sidecar rewrites or reads.
func LocalColumns() []cql.ColumnSpec {
	return []cql.ColumnSpec{
		{Name: "key", Type: cql.Simple(cql.TypeVarchar)},
		{Name: "data_center", Type: cql.Simple(cql.TypeVarchar)},
		{Name: "rpc_address", Type: cql.Simple(cql.TypeInet)},
		{Name: "rpc_port", Type: cql.Simple(cql.TypeInt)},
		{Name: "broadcast_address", Type: cql.Simple(cql.TypeInet)},
	}
}

// PeersV2Columns are the address columns of system.peers_v2.
func PeersV2Columns() []cql.ColumnSpec {
	return []cql.ColumnSpec{
		{Name: "peer", Type: cql.Simple(cql.TypeInet)},
		{Name: "native_address", Type: cql.Simple(cql.TypeInet)},
		{Name: "native_port", Type: cql.Simple(cql.TypeInt)},
	}
}

// IP, Port and Text are cell values: an inet, an int, a text.
func IP(s string) []byte   { return netip.MustParseAddr(s).AsSlice() }
func Port(n int) []byte    { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
func Text(s string) []byte { return []byte(s) }
