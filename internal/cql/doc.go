// Package cql implements the Cassandra native protocol, versions 3, 4 and 5: the frame
// header, opcodes, the notation types of the spec, message bodies, lz4/snappy body
// compression, and v5's segments (segment.go: the framing of v5 once its handshake is done,
// with its CRCs and lz4 per segment).
//
// The package does no I/O policy and starts no goroutines. Decoders work on byte slices that
// the caller owns, never panic on malformed input, and never allocate more than the input's
// real size: a length field that claims more bytes than remain is ErrMalformed.
//
// Messages are plain structs with value receivers: AppendBody encodes one, and DecodeBody
// (or DecodeQuery, DecodeResult, …) decodes one, returning values, never pointers. Decoded
// byte slices alias the input body. Flags fields are the source of truth for which optional
// fields a message carries. Values stay bytes here: the node has the one value codec
// (node/cqlvalue/values.go); the tests have their own, valuecodec_test.go.
//
// The files form layers, each naming only declarations of the files below it. From the
// ground up: frame.go (the header and opcodes) and notation.go (the Decoder and the spec's
// notation); types.go (a column's type option) and params.go (bound values and the query
// flags); request.go (a request, parsed once and lazily); message.go (the Message interface,
// the frame's appenders, the messages other than queries and results), query.go (QUERY,
// PREPARE, EXECUTE and BATCH, decoded through a Request) and result.go (RESULT); body.go
// (DecodeBody, any message by its opcode) and view.go (a frame read through them) on top.
//
// Every function of the package is safe for concurrent use. A Decoder is not, since reading
// moves it on; a message value is safe for concurrent use as long as nobody modifies it.
package cql
