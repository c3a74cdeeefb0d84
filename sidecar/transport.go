package sidecar

import (
	"encoding/binary"
	"errors"
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

// lastFrames appends to f what the cause of a connection's end calls for, written to the
// client after what is queued for it and before the close, on either path: the
// ProtocolError for a malformed client frame, or a Server error for each request in
// flight when the node was lost or could not be written. Nothing else is owed.
func (c *conn) lastFrames(f []byte, cause error) []byte {
	var pe *protocolError
	switch {
	case errors.As(cause, &pe):
		c.log.Warn().Str("error", pe.msg).Msg("malformed frame from client: closing its connection")
		return c.appendError(f, pe.stream, cql.ErrCodeProtocol, pe.msg)
	case errors.Is(cause, errNodeLost) || errors.Is(cause, errNodeWrite):
		return c.nodeLost(f, cause)
	}
	return f
}

// nodeLost appends to f an error for each request in flight once the node connection
// failed for cause, and counts the failure. The client is no longer read, so that set is
// final.
func (c *conn) nodeLost(f []byte, cause error) []byte {
	c.p.nodeFailures.Add(1)
	c.lost = c.streams.takeAll(c.lost[:0])
	c.log.Warn().Err(cause).Str("node", c.nodeAddr.String()).Int("in_flight", len(c.lost)).
		Msg("node connection lost: failing the requests in flight and closing the client connection")
	msg := fmt.Sprintf("tracecar: connection to node %s lost", c.p.cfg.NodeAddr)
	for _, r := range c.lost {
		f = c.appendError(f, r.stream, cql.ErrCodeServer, msg)
	}
	return f
}
