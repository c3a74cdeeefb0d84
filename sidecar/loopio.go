//go:build linux

package sidecar

import (
	"fmt"
	"io"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"golang.org/x/sys/unix"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
)

// The bytes of the event loop: reading a socket, finding the whole frames in what it
// brought, and writing them to the peer, with the backpressure of a peer that does not take
// them (see the package doc). What is done to each frame is transport.go's and
// package pipeline's; the end of a connection is loop_end.go's.

// read takes what socket s holds and forwards every whole frame in it.
func (l *loop) read(s *side) {
	buf := l.rbuf
	have := 0
	gather := s.need > len(buf)
	if gather {
		// A frame larger than the shared buffer is gathered in pend, which grows as its
		// bytes arrive, by doubling (as cql.AppendRead), and never ahead of them: a length
		// field that lies costs no more memory than the bytes actually sent.
		s.pend = gatherRoom(s.pend, s.need)
		buf = s.pend[:cap(s.pend)]
		have = len(s.pend)
	} else {
		have = copy(buf, s.pend)
	}
	n, err := sysRead(s.fd, buf[have:])
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return
	case err != nil || n == 0:
		l.readEnded(s, err)
		return
	}
	if gather && have+n < s.need {
		s.pend = s.pend[:have+n] // not whole yet
		return
	}
	s.pend = s.pend[:0]
	l.frames(s, buf[:have+n])
}

// gatherRoom returns pend, the start of a frame of need bytes, with room for more of it:
// when pend is full it is copied to a buffer twice as large (at least loopReadSize, at most
// need), so that its capacity stays within twice the bytes received.
func gatherRoom(pend []byte, need int) []byte {
	if len(pend) < cap(pend) {
		return pend
	}
	nb := append(getBuffer(min(need, max(2*cap(pend), loopReadSize))), pend...)
	putBuffer(pend)
	return nb
}

// frames forwards the whole frames at the head of data, read from s, to its peer, and keeps
// the rest in s.pend.
func (l *loop) frames(s *side, data []byte) {
	c, d := s.c, s.peer
	b := batch{out: d.out, tickets: l.tickets[:0], answers: l.answers[:0]}
	if b.direct = len(b.out) == 0; b.direct {
		b.out = l.wbuf[:0]
	}
	pos := l.relay(s, data, &b)
	l.keep(s, data[pos:], b.need, pos > 0)
	if b.await > 0 {
		l.awaitBudget(s, b.await)
	}
	if b.direct {
		l.wbuf = b.out[:0]
		if cap(l.wbuf) > maxKeptBuffer {
			l.wbuf = nil
		}
	}
	l.tickets = b.tickets[:0]
	if len(b.answers) > 0 {
		// The responses of this read are queued for the client: one clock read records
		// them all (conn.queued is the goroutine path's, a frame at a time).
		now := tracing.Now()
		c.p.sh.Metrics.Answered(b.answers, b.arrived, now)
		c.pipe.Shard().Added(len(b.answers), now-b.arrived)
		l.answers = b.answers[:0]
	}
	if len(b.out) > 0 {
		l.send(d, b.out, b.direct, b.tickets)
		if c.getState() == stateClosed {
			return
		}
	}
	switch {
	case b.bad != nil:
		l.end(c, b.bad)
	case b.nodeErr != nil:
		l.end(c, fmt.Errorf("%w: %w", errNodeLost, b.nodeErr))
	case b.drained && len(d.out) == 0:
		l.close(c)
	}
}

// relay does the per-frame work on each whole frame at the head of data, read from s,
// appending what goes to the peer to b, and returns the bytes it took. It stops at the
// first frame that is not whole, or malformed. It works on locals, written to b at the
// end, as this loop runs per frame.
func (l *loop) relay(s *side, data []byte, b *batch) int {
	c := s.c
	if s.client && c.segmentsFromClient() || !s.client && c.segmentsFromNode() {
		return l.relaySegments(s, data, b)
	}
	out, tickets, answers, arrived, drained := b.out, b.tickets, b.answers, b.arrived, false
	// Whether frames are logged at trace level is asked once for the read's frames.
	logFrames := c.pipe.TraceOn && c.p.logs(zerolog.TraceLevel)
	pos := 0
	for len(data)-pos >= cql.HeaderSize {
		hb := data[pos : pos+cql.HeaderSize]
		var h cql.Header
		var bad *pipeline.ProtocolError
		var err error
		if s.client {
			h, bad = c.requestHeader(hb)
		} else {
			h, err = c.responseHeader(hb)
		}
		if bad != nil || err != nil {
			b.bad, b.nodeErr = bad, err
			break
		}
		n := cql.HeaderSize + int(h.Length)
		if len(data)-pos < n {
			b.need = n
			break
		}
		frame := data[pos : pos+n]
		pos += n
		if logFrames {
			c.logFrame(h, s.client)
		}
		if s.client {
			// One clock read per read from the client, shared by every request it
			// delivered, as for responses.
			t, fx := c.pipe.Request(h, frame, n, &arrived)
			if t.Events() {
				tickets = append(tickets, t)
			}
			if fx != 0 {
				c.apply(fx)
			}
			out = append(out, frame...)
			continue
		}
		var req pipeline.Inflight
		left := c.pipe.Streams.RequestFor(h, &req)
		f, done := c.pipe.Response(h, frame, &req, &arrived)
		if done.Events() {
			tickets = append(tickets, done)
		}
		out = append(out, f...)
		if req.Used && c.p.sh.Metrics != nil {
			answers = append(answers, metrics.Answer{Start: req.Start, Op: req.Op})
		}
		c.pipe.Counters.Answered(len(f))
		drained = c.lastAnswer(left) || drained
		if req.Op == cql.OpStartup && (segments{c.conn}).segmentsAfter(h.Opcode) {
			// What follows the answer to a v5 STARTUP is segments.
			b.out, b.tickets, b.answers, b.arrived, b.drained = out, tickets, answers, arrived, drained
			return pos + l.relaySegments(s, data[pos:], b)
		}
	}
	b.out, b.tickets, b.answers, b.arrived, b.drained = out, tickets, answers, arrived, drained
	return pos
}

// keep keeps rest, the start of a frame of need bytes (0 while its header is not in), in
// s.pend for the next read. Once frames were forwarded (took), a frame gathered whole gives
// its share of the budget back; a client frame to be gathered whole is charged to it.
func (l *loop) keep(s *side, rest []byte, need int, took bool) {
	if s.held > 0 && took {
		s.c.p.held.release(s.held)
		s.held = 0
	}
	s.need = need
	s.pend = keepPend(s.pend, rest)
	if s.client && s.need > len(l.rbuf) && s.held == 0 && !(segments{s.c.conn}).gatheringLarge() {
		l.holdFrame(s)
	}
}

// keepPend returns pend holding rest, which may be in pend already. An empty pend goes back
// to the pool, so that a connection whose frames are all forwarded holds no buffer; a large
// frame's buffer is not kept for a small rest.
func keepPend(pend, rest []byte) []byte {
	switch {
	case len(rest) == 0:
		putBuffer(pend)
		return nil
	case cap(pend) < len(rest) || cap(pend) > maxKeptBuffer && len(rest) <= loopReadSize:
		nb := append(getBuffer(len(rest)), rest...)
		putBuffer(pend) // after the copy: rest may be in it
		return nb
	}
	return append(pend[:0], rest...)
}

// send writes out to d. When d takes only part of it, the rest waits in d.out for
// EPOLLOUT, and reading from d's peer stops until it is written. direct says that out is the
// loop's scratch buffer rather than d.out. tickets are the traced frames in out: tracing
// is told once they are written.
func (l *loop) send(d *side, out []byte, direct bool, tickets []tracing.Ticket) {
	if !direct {
		// d.out was already waiting for EPOLLOUT: just queue behind it.
		d.out = out
		d.tickets = append(d.tickets, tickets...)
		return
	}
	n, err := sysWrite(d.fd, out)
	if err != nil && err != unix.EAGAIN && err != unix.EINTR {
		l.writeFailed(d, err)
		return
	}
	n = max(n, 0)
	if n == len(out) {
		d.c.pipe.Wrote(tickets, d.client)
		return
	}
	if d.out == nil {
		d.out = getBuffer(len(out) - n)
	}
	d.out = append(d.out[:0], out[n:]...)
	d.tickets = append(d.tickets[:0], tickets...)
	l.setEvents(d)
	d.peer.paused = true
	l.setEvents(d.peer)
}

// writeOut writes the output that d holds, on EPOLLOUT.
func (l *loop) writeOut(d *side) {
	if len(d.out) == 0 {
		l.setEvents(d)
		return
	}
	n, err := sysWrite(d.fd, d.out)
	if err != nil && err != unix.EAGAIN && err != unix.EINTR {
		l.writeFailed(d, err)
		return
	}
	n = max(n, 0)
	if n < len(d.out) {
		d.out = d.out[:copy(d.out, d.out[n:])]
		return
	}
	putBuffer(d.out) // all out: an idle connection holds no output buffer
	d.out = nil
	c := d.c
	c.pipe.Wrote(d.tickets, d.client)
	clear(d.tickets)
	d.tickets = d.tickets[:0]
	l.setEvents(d)
	switch {
	case c.getState() == stateEnding:
		l.close(c) // the last frames are out
		return
	case d.client && c.draining() && c.pipe.Streams.Len() == 0:
		l.close(c)
		return
	}
	src := d.peer
	if src.paused && !src.budgetWait && !(src.client && (c.draining() || c.move.moving)) {
		src.paused = false
		l.setEvents(src)
	}
}

// writeFailed handles a write error on d: the node is lost, or the client is gone.
func (l *loop) writeFailed(d *side, err error) {
	if d.client {
		l.close(d.c)
		return
	}
	l.end(d.c, fmt.Errorf("%w: %w", errNodeWrite, err))
}

// readEnded handles the end of reading s: EOF or an error.
func (l *loop) readEnded(s *side, err error) {
	c := s.c
	if !s.client {
		if err == nil {
			err = io.EOF
		}
		l.end(c, fmt.Errorf("%w: %w", errNodeLost, err))
		return
	}
	if err != nil {
		c.pipe.Debug().Err(err).Msg("client read")
	}
	l.close(c)
}

// holdFrame charges the client frame that s is about to gather whole (larger than the
// read buffer) to the proxy-wide budget of frames held whole, as readWhole does on the
// goroutine path. While the budget has no room, s is not read: its frame stays in the
// client's socket and the client's writes block, which is the backpressure; retryBudget
// tries again every budgetPoll.
func (l *loop) holdFrame(s *side) {
	if s.c.p.held.tryAcquire(int64(s.need)) {
		s.held = s.need
		return
	}
	s.budgetWait = true
	s.paused = true
	l.setEvents(s)
	l.waiting = append(l.waiting, s)
}

// awaitBudget makes a client side whose next v5 segment starts a frame of size bytes, for
// which the budget of frames held whole has no room (holdLarge), wait for that share as
// holdFrame does for a v4 frame: what the side holds for the segment itself goes back
// first, since the frame's share covers it.
func (l *loop) awaitBudget(s *side, size int) {
	if s.held > 0 {
		s.c.p.held.release(s.held)
		s.held = 0
	}
	if s.budgetWait {
		return
	}
	s.need, s.awaitLarge = size, true
	l.holdFrame(s)
	if !s.budgetWait {
		l.largeGranted(s) // room came meanwhile, from another loop
	}
}

// largeGranted reads pend again once the side holds the share of the v5 frame its next
// segment starts: its segments are read as they come from here on (need is theirs again, not
// the frame's), and holdLarge gives the share to the frame. pend may hold the whole frame
// already, so waiting for more bytes could wait for ever.
func (l *loop) largeGranted(s *side) {
	s.need, s.awaitLarge = 0, false
	data := s.pend
	s.pend = s.pend[:0]
	l.frames(s, data)
}

// retryBudget resumes the connections waiting for the budget that now fits their frame.
// A connection closed or drained meanwhile stops waiting (a drained one is not read again).
func (l *loop) retryBudget() {
	kept := l.waiting[:0]
	var granted []*side
	for _, s := range l.waiting {
		c := s.c
		switch {
		case c.draining(): // or ending, or closed
			s.budgetWait = false
		case c.p.held.tryAcquire(int64(s.need)):
			s.held, s.budgetWait = s.need, false
			if len(s.peer.out) == 0 && !c.move.moving {
				s.paused = false
				l.setEvents(s)
			}
			if s.awaitLarge {
				granted = append(granted, s)
			}
		default:
			kept = append(kept, s)
		}
	}
	clear(l.waiting[len(kept):])
	l.waiting = kept
	for _, s := range granted { // after the list is settled: frames may add to it
		if s.c.getState() != stateClosed {
			l.largeGranted(s)
		}
	}
}
