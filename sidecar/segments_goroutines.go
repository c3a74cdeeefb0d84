package sidecar

import (
	"errors"

	"github.com/tracecar/tracecar/internal/cql"
)

// The goroutine path's segment loops (see segments.go, below, for the segment layer that
// both transports use, and segments_loop.go for the event loop's).

// segmentReady reports whether r holds a whole segment of the side rd reads, so that
// reading it will not block; the goroutine path flushes when it does not.
func segmentReady(r *frameReader, rd *cql.SegmentReader) bool {
	hs := rd.HeaderSize()
	if r.Buffered() < hs {
		return false
	}
	hb, _ := r.Peek(hs)
	n, err := rd.Peek(hb)
	return err != nil || n > 0 && r.Buffered() >= n
}

// requestSegments is the request loop once the client sends segments: it forwards them to
// the node, after the per-frame work, until the client goes away, sends a malformed
// segment or frame, is drained, or the node cannot be written.
func (c goroutines) requestSegments(r *frameReader) error {
	rd := &c.core.v5.fromClient
	defer segments{c.core}.releaseLarge()
	for {
		hb, err := r.Peek(rd.HeaderSize())
		if err != nil {
			if len(hb) > 0 {
				return noEOF(err)
			}
			return err
		}
		size, err := segments{c.core}.segmentHead(hb, true)
		if err != nil {
			return err
		}
		var seg []byte
		if size <= r.Size() {
			if seg, err = r.Peek(size); err != nil {
				return noEOF(err)
			}
		} else {
			// Held whole, charged to the budget of frames held whole, as a large frame;
			// the charge is given back before its frames are read, so that the large frame
			// it may start (holdLarge) never waits for a share this connection holds.
			if (segments{c.core}).gatheringLarge() {
				c.reqBuf, err = cql.AppendRead(c.reqBuf[:0], r, size) // part of the frame's share
			} else if c.reqBuf, err = c.readWhole(r, size); err == nil {
				c.core.p.held.release(size)
			}
			if err != nil {
				return err
			}
			seg = c.reqBuf
		}
		out, tickets, err := segments{c.core}.requestSegment(seg, c.sentQ)
		c.sentQ = tickets
		if err == nil && out != nil {
			err = c.toNode.write(out)
		}
		if size <= r.Size() {
			r.Discard(size)
		} else {
			if cap(c.reqBuf) > maxKeptBuffer || rd.Gathering() {
				c.reqBuf = nil // a large frame's segment: the frame is held once, by rd
			}
		}
		if err == nil && !segmentReady(r, rd) {
			if err = c.toNode.flush(); err == nil {
				c.core.pipe.Wrote(c.sentQ, false)
				c.sentQ = c.sentQ[:0]
			}
		}
		if err != nil {
			if c.toNode.err != nil {
				return errors.Join(errNodeWrite, err)
			}
			return err
		}
	}
}

// responseSegments is the response loop once the node sends segments. It returns as
// forwardResponses does.
func (c goroutines) responseSegments(r *frameReader, arrived int64) error {
	rd := &c.core.v5.fromNode
	for {
		fill := r.Buffered() < rd.HeaderSize()
		hb, err := r.Peek(rd.HeaderSize())
		if err != nil {
			return err
		}
		size, err := segments{c.core}.segmentHead(hb, false)
		if err != nil {
			return err
		}
		var seg []byte
		if fill || r.Buffered() < size {
			arrived = 0
		}
		if size <= r.Size() {
			if seg, err = r.Peek(size); err != nil {
				return err
			}
		} else {
			if c.core.v5.respSeg, err = cql.AppendRead(c.core.v5.respSeg[:0], r, size); err != nil {
				return err
			}
			seg = c.core.v5.respSeg
		}
		out, tickets, drained, err := segments{c.core}.responseSegment(seg, &arrived, c.doneQ)
		c.doneQ = tickets
		if err != nil {
			return err
		}
		if out != nil {
			err = c.core.toClient.write(out)
		}
		if size <= r.Size() {
			r.Discard(size)
		} else if cap(c.core.v5.respSeg) > maxKeptBuffer || rd.Gathering() {
			c.core.v5.respSeg = nil
		}
		drained = drained && c.requestsStopped()
		if err == nil && (drained || !segmentReady(r, rd)) {
			if err = c.core.toClient.flush(); err == nil {
				c.core.pipe.Wrote(c.doneQ, true)
				c.doneQ = c.doneQ[:0]
			}
		}
		switch {
		case err != nil && c.core.toClient.err != nil:
			return errClientGone
		case err != nil || drained:
			return err
		}
	}
}
