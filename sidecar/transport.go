package sidecar

import (
	"fmt"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// The glue between the transports and the per-frame work (see "Transports" in the package
// doc): both the goroutine path (goroutines.go) and the event loop (loopio.go) move bytes,
// find the frames in them and apply backpressure; what they do with one frame once its
// header is in is here, so that they do it alike. The version gate (Proxy.openConn) reads the
// 8-byte headers of versions 1 and 2 itself, as cql.ParseHeader does not.

// requestHeader parses and checks the header of a client's frame: a response, a version
// other than 3, 4 or 5, a change to or from v5 on the connection (v5 frames the bytes
// otherwise), or a frame over the connection's limit is a protocolError.
func (c *conn) requestHeader(hb []byte) (cql.Header, *pipeline.ProtocolError) {
	h, err := cql.ParseHeader(hb)
	switch {
	case h.IsResponse():
		return h, &pipeline.ProtocolError{Stream: h.Stream, Msg: "response frame sent by a client"}
	case err != nil && err != cql.ErrFrameTooBig:
		return h, &pipeline.ProtocolError{Stream: h.Stream, Msg: cql.UnsupportedVersionMessage(h.Version, c.p.maxVersion())}
	case h.Version != c.pipe.Version && (h.Version == cql.V5 || c.pipe.Version == cql.V5):
		return h, &pipeline.ProtocolError{Stream: h.Stream, Msg: "Invalid message version. Got " + itoa(int(h.Version)) + " but previous messages on this connection had version " + itoa(int(c.pipe.Version))}
	}
	// A length over cql.MaxBodySize is over the limit too. tooBig, which counts and words
	// the refusal, is called only for a frame over the limit.
	if uint64(h.Length)+cql.HeaderSize > c.pipe.FrameLimit() {
		return h, c.pipe.TooBig(h.Stream, h.Length)
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

// appendError appends an ERROR frame for the client to f, in a segment of its own once
// the client reads segments (protocol v5).
func (c *conn) appendError(f []byte, stream int16, code int32, msg string) []byte {
	h := cql.Header{Version: cql.ResponseBit | c.pipe.Version, Stream: stream}
	if c.segmentsFromClient() {
		return cql.AppendSegments(f, cql.AppendFrame(nil, h, cql.Error{Code: code, Message: msg}), c.v5.lz4.Load())
	}
	return cql.AppendFrame(f, h, cql.Error{Code: code, Message: msg})
}

// traceFrame logs a frame whose header is checked, at trace level. It looks at traceOn and
// the log gate first, so that the frame loops pay a load or two per frame for it.
func (c *conn) traceFrame(h cql.Header, fromClient bool) {
	if c.pipe.TraceOn && c.p.logs(zerolog.TraceLevel) {
		c.logFrame(h, fromClient)
	}
}

func (c *conn) logFrame(h cql.Header, fromClient bool) {
	if e := c.p.sh.Log.Trace(); e != nil {
		msg := "frame from node"
		if fromClient {
			msg = "frame from client"
		}
		e.Str("client", c.pipe.ClientAddr.String()).Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", cql.HeaderSize+int(h.Length)).Msg(msg)
	}
}

// A frame that fits the reader's buffer is read whole on both paths; a larger one is read
// whole, into a scratch buffer, only when the per-frame work reads it (requestWhole,
// responseWhole), and otherwise streamed through unread (frame nil in request and
// response). The event loop gathers every larger frame whole, so only the goroutine path
// asks.

// writeError queues an ERROR frame for the client. It is used by the goroutine that owns
// toClient.
func (c *conn) writeError(stream int16, code int32, msg string) error {
	return c.toClient.write(c.appendError(nil, stream, code, msg))
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	u := uint64(n)
	if n < 0 {
		u = uint64(-n)
	}
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if n < 0 {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
