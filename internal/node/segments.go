package node

import (
	"bufio"
	"errors"
	"io"

	"github.com/tracecar/tracecar/internal/cql"
)

// Protocol v5 on the node's connections: the handshake in unframed frames, then segments
// both ways (cql.SegmentReader, cql.AppendSegments) from the READY or AUTHENTICATE that
// answers a v5 STARTUP on. A connection reads segments whole, with both CRCs checked, and
// hands their frames one at a time to serve, as the unframed reader does; its writer
// gathers the frames of one flush into as few segments as fit (writer.go). This file reads
// them: a connection's segIn, which knows nothing of the connection but its reader.

// segIn is the reading side of a v5 connection once its handshake is done.
type segIn struct {
	r      cql.SegmentReader
	buf    []byte // the last segment read
	frames []byte // the whole frames of the last segment not handed out yet
}

// frameTooBig is a large frame refused by its header (conn.checkLarge).
type frameTooBig struct{ h cql.Header }

func (e *frameTooBig) Error() string { return cql.ErrFrameTooBig.Error() }

// errSegment is a segment that fails its checks: it is answered with a ProtocolError and
// the connection closes.
type errSegment struct{ err error }

func (e *errSegment) Error() string { return "bad segment: " + e.err.Error() }

// next returns the next frame of a v5 connection, read from br: from the last
// self-contained segment, or from segments read until one completes a frame. A segment
// larger than limit allows is refused before its payload is read, and its buffer grows as
// its bytes arrive (cql.AppendRead); a large frame is refused by its header, before it is
// gathered.
func (sg *segIn) next(br *bufio.Reader, limit int) (cql.Header, []byte, error) {
	for len(sg.frames) == 0 {
		hs := sg.r.HeaderSize()
		hb, err := br.Peek(hs)
		if err != nil {
			if len(hb) > 0 {
				return cql.Header{}, nil, io.ErrUnexpectedEOF
			}
			return cql.Header{}, nil, err
		}
		size, err := sg.r.Peek(hb)
		if err != nil {
			return cql.Header{}, nil, &errSegment{err}
		}
		if size-hs-cql.SegmentTrailerSize > limit {
			// Only before the handshake is done can the limit be below a segment's.
			return cql.Header{}, nil, &errSegment{cql.ErrFrameTooBig}
		}
		if cap(sg.buf) > maxKeptBuffer {
			sg.buf = nil
		}
		if sg.buf, err = cql.AppendRead(sg.buf[:0], br, size); err != nil {
			return cql.Header{}, nil, err
		}
		_, _, frames, err := sg.r.Next(sg.buf)
		if sg.r.Gathering() && cap(sg.buf) > connBufferSize {
			sg.buf = nil // the segment is part of the large frame the reader holds
		}
		var tb *frameTooBig
		switch {
		case errors.As(err, &tb):
			return tb.h, nil, cql.ErrFrameTooBig
		case err != nil:
			return cql.Header{}, nil, &errSegment{err}
		}
		sg.frames = frames
	}
	h, err := cql.ParseHeader(sg.frames)
	n := cql.HeaderSize + int(h.Length)
	if err != nil || n > len(sg.frames) {
		// The reader lined the frames up with the segment, so only a version can be wrong.
		return h, nil, &errSegment{cql.ErrSegmentFraming}
	}
	body := sg.frames[cql.HeaderSize:n]
	sg.frames = sg.frames[n:]
	if n > limit {
		return h, nil, cql.ErrFrameTooBig
	}
	return h, body, nil
}
