//go:build linux

package sidecar

import "errors"

// relaySegments is relay for a side that sends v5 segments: it does the per-frame work on
// the frames of each whole segment at the head of data, read from s, appending what goes
// to the peer to b, and returns the bytes it took. It stops at the first segment that is
// not whole (b.need is its size once its header is in), or malformed.
func (l *loop) relaySegments(s *side, data []byte, b *batch) int {
	c := segments{s.c.conn}
	pos := 0
	hs := c.core.v5.fromNode.HeaderSize()
	for len(data)-pos >= hs {
		n, err := c.segmentHead(data[pos:], s.client)
		if err != nil {
			b.setErr(s.client, err)
			break
		}
		if len(data)-pos < n {
			b.need = n
			break
		}
		seg := data[pos : pos+n]
		pos += n
		var out []byte
		if s.client {
			out, b.tickets, err = c.requestSegment(seg, b.tickets)
			var wait errAwaitBudget
			if errors.As(err, &wait) {
				// The segment starts a frame that the budget has no room for: it stays
				// unread, and the side waits for the frame's share (frames, awaitBudget).
				pos -= n
				b.await = wait.size
				break
			}
		} else {
			var drained bool
			out, b.tickets, drained, err = c.responseSegment(seg, &b.arrived, b.tickets)
			b.drained = b.drained || drained
		}
		if err != nil {
			b.setErr(s.client, err)
			break
		}
		b.out = append(b.out, out...)
	}
	if c.core.v5.reader(s.client).Gathering() && cap(s.pend) > loopReadSize {
		// The segment that grew pend is now part of the large frame the reader gathers:
		// pend is not kept, so that the frame is held once.
		s.pend = nil
	}
	return pos
}

// setErr records why the frames of a read stopped: a malformed client segment or frame
// (a protocolError), or a malformed node one.
func (b *batch) setErr(client bool, err error) {
	if !client {
		b.nodeErr = err
		return
	}
	b.bad = badSegment(err)
}

// holdLarge is segments.holdLarge for a connection on an event loop (carrier), which
// cannot wait for room.
func (c *loopConn) holdLarge(size int) (handled bool, err error) {
	cs := &c.sides[0]
	if cs.held < size && !c.p.held.tryAcquire(int64(size)) {
		return true, errAwaitBudget{size}
	}
	if cs.held >= size {
		size, cs.held = cs.held, 0 // the loop's wait got it: the frame holds it now
	}
	c.v5.largeHeld = size
	return true, nil
}
