package cql_test

import (
	"fmt"

	"github.com/tracecar/tracecar/internal/cql"
)

func Example() {
	// A client's QUERY frame, compressed with lz4 as negotiated in STARTUP.
	q := cql.Query{Query: "SELECT v FROM ks.t WHERE k = ?", Params: cql.QueryParams{
		Consistency: cql.LocalOne,
		Flags:       cql.QueryValues | cql.QueryPageSize,
		Values:      []cql.Value{{Bytes: []byte("key")}},
		PageSize:    5000,
	}}
	c := cql.CompressorByName("LZ4")
	frame, err := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: 1}, q, c)
	if err != nil {
		panic(err)
	}

	// The server side: header, decompression, prefix, body.
	h, err := cql.ParseHeader(frame)
	if err != nil {
		panic(err)
	}
	body, err := c.Decompress(nil, frame[cql.HeaderSize:])
	if err != nil {
		panic(err)
	}
	_, body, err = cql.ParseRequestPrefix(h.Flags, body)
	if err != nil {
		panic(err)
	}
	m, err := cql.DecodeBody(h.Opcode, h.ProtoVersion(), body)
	if err != nil {
		panic(err)
	}
	got := m.(cql.Query)
	fmt.Println(h.Opcode, got.Query, got.Params.Consistency, got.Params.PageSize)
	// Output:
	// QUERY SELECT v FROM ks.t WHERE k = ? LOCAL_ONE 5000
}
