package sidecar

import (
	"encoding/binary"
	"fmt"

	"github.com/tracecar/tracecar/internal/cql"
)

// The glue between the transports and the per-frame work: both the goroutine path
// (goroutines.go) and the event loop (loop.go) move bytes, find the frames in them and
// apply backpressure; what they do with one frame once its header is in is here, so that
// they do it alike.

// requestHeader parses and checks the header of a client's frame: a response, a version
// other than 3 or 4, or a frame over the connection's limit is a *protocolError.
func (c *conn) requestHeader(hb []byte) (cql.Header, error) {
	h, err := cql.ParseHeader(hb)
	switch {
	case h.IsResponse():
		return h, &protocolError{stream: h.Stream, msg: "response frame sent by a client"}
	case err != nil && err != cql.ErrFrameTooBig:
		return h, &protocolError{stream: h.Stream, msg: cql.UnsupportedVersionMessage(h.Version)}
	}
	// A length over cql.MaxBodySize is over the limit too.
	if pe := c.tooBig(h.Stream, h.Length); pe != nil {
		return h, pe
	}
	return h, nil
}

// responseHeader parses and checks the header of a node's frame. A malformed one counts as
// a failure of the node connection.
func (c *conn) responseHeader(hb []byte) (cql.Header, error) {
	h, err := cql.ParseHeader(hb)
	switch {
	case !h.IsResponse() || err != nil && err != cql.ErrFrameTooBig:
		return h, fmt.Errorf("malformed frame from node: version byte 0x%02x", hb[0])
	case err != nil:
		return h, fmt.Errorf("malformed frame from node: body of %d bytes exceeds the maximum of %d", h.Length, cql.MaxBodySize)
	}
	return h, nil
}

// frameSize returns the size, header included, that the v3/v4 header at the start of hb
// claims for its frame, before the header is checked: the one reader of the length field
// beside cql.ParseHeader, for the tests of whether a whole frame is buffered.
func frameSize(hb []byte) uint64 {
	return cql.HeaderSize + uint64(binary.BigEndian.Uint32(hb[5:9]))
}

// appendError appends an ERROR frame for the client to f.
func (c *conn) appendError(f []byte, stream int16, code int32, msg string) []byte {
	h := cql.Header{Version: cql.ResponseBit | c.version, Stream: stream}
	return cql.AppendFrame(f, h, cql.Error{Code: code, Message: msg})
}
