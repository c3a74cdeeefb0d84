// Package cql implements the Cassandra native protocol, versions 3 and 4: the frame header,
// opcodes, the notation types of the spec, message bodies and lz4/snappy body compression.
//
// The package does no I/O policy and starts no goroutines. Decoders work on byte slices that
// the caller owns, never panic on malformed input, and never allocate more than the input's
// real size: a length field that claims more bytes than remain is ErrMalformed.
package cql
