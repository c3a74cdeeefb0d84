package node

import (
	"errors"
	"io"

	"github.com/tracecar/tracecar/internal/cql"
)

// Protocol v5 on the node's connections: the handshake in unframed frames, then segments
// both ways (cql.SegmentReader, cql.AppendSegments) from the READY or AUTHENTICATE that
// answers a v5 STARTUP on. A connection reads segments whole, with both CRCs checked, and
// hands their frames one at a time to serve, as the unframed reader does; its writer
// gathers the frames of one flush into as few segments as fit.

// maxVersion returns the highest protocol version the node speaks: v4 for an emulated
// ScyllaDB node, which does not speak v5, unless told otherwise.
func (s *Server) maxVersion() byte {
	if v := s.cfg.MaxProtocolVersion; v >= cql.V3 && v < cql.MaxVersion {
		return v
	}
	if s.cfg.ScyllaSupported && s.cfg.MaxProtocolVersion == 0 {
		return cql.V4
	}
	return cql.MaxVersion
}

// speaks reports whether the node speaks protocol version v (without the response bit).
func (s *Server) speaks(v byte) bool { return v >= cql.V3 && v <= s.maxVersion() }

// protocolVersions is the PROTOCOL_VERSIONS of SUPPORTED: as Cassandra 4.1 lists them, v5
// no longer in beta, up to the node's highest.
func (s *Server) protocolVersions() []string {
	all := []string{"3/v3", "4/v4", "5/v5"}
	return all[:s.maxVersion()-cql.V3+1]
}

// segIn is the reading side of a v5 connection once its handshake is done.
type segIn struct {
	r      cql.SegmentReader
	buf    []byte // the last segment read
	frames []byte // the whole frames of the last segment not handed out yet
}

// startSegments switches the connection to v5 segments both ways, once the READY or
// AUTHENTICATE that answers its STARTUP is written, with lz4 when STARTUP asked for it.
func (c *conn) startSegments(lz4 bool) {
	c.seg = &segIn{r: cql.SegmentReader{LZ4: lz4, CheckLarge: c.checkLarge}}
	c.w.startSegments(lz4)
}

// frameTooBig is a large frame refused by its header (conn.checkLarge).
type frameTooBig struct{ h cql.Header }

func (e *frameTooBig) Error() string { return cql.ErrFrameTooBig.Error() }

// checkLarge refuses a frame larger than a segment, by its header, before it is gathered,
// when it is over the connection's limit.
func (c *conn) checkLarge(hb []byte) error {
	h, _ := cql.ParseHeader(hb)
	if uint64(h.Length)+cql.HeaderSize > uint64(c.frameLimit()) {
		return &frameTooBig{h}
	}
	return nil
}

// idle reports whether the connection has no more input at hand: nothing buffered from
// the socket, and no frame left from the last segment. serve flushes what it wrote then.
func (c *conn) idle() bool {
	return c.br.Buffered() == 0 && (c.seg == nil || len(c.seg.frames) == 0)
}

// errSegment is a segment that fails its checks: it is answered with a ProtocolError and
// the connection closes.
type errSegment struct{ err error }

func (e *errSegment) Error() string { return "bad segment: " + e.err.Error() }

// readSegmentFrame returns the next frame of a v5 connection: from the last
// self-contained segment, or from segments read until one completes a frame. A segment
// larger than the connection's limit allows is refused before its payload is read, and
// its buffer grows as its bytes arrive (cql.AppendRead); a large frame is refused by its
// header, before it is gathered.
func (c *conn) readSegmentFrame(limit int) (cql.Header, []byte, error) {
	sg := c.seg
	for len(sg.frames) == 0 {
		hs := sg.r.HeaderSize()
		hb, err := c.br.Peek(hs)
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
		if sg.buf, err = cql.AppendRead(sg.buf[:0], c.br, size); err != nil {
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

// startSegments makes every later write go out as segments.
func (w *writer) startSegments(lz4 bool) {
	w.mu.Lock()
	w.seg, w.lz4 = true, lz4
	w.mu.Unlock()
}

// writeSegments queues frames as segments; w.mu is held. The frames of writes between two
// flushes share segments; a segment goes out once it is full.
func (w *writer) writeSegments(frames []byte, flush bool) error {
	w.pend = append(w.pend, frames...)
	if !flush && len(w.pend) < cql.MaxSegmentPayload {
		return nil
	}
	w.sbuf = cql.AppendSegments(w.sbuf[:0], w.pend, w.lz4)
	w.pend = w.pend[:0]
	if cap(w.pend) > maxKeptBuffer {
		w.pend = nil
	}
	if _, err := w.w.Write(w.sbuf); err != nil {
		return err
	}
	if cap(w.sbuf) > maxKeptBuffer {
		w.sbuf = nil
	}
	if flush {
		return w.w.Flush()
	}
	return nil
}
