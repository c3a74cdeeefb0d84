//go:build linux

package sidecar

import (
	"runtime"
	"time"

	"github.com/tracecar/tracecar/sidecar/handover"
	"golang.org/x/sys/unix"
)

// The end of a connection on its loop (see "Ending a connection" in the package doc):
// end writes the last frames that a cause calls for, drain stops reading the client,
// close closes both sockets and retires the connection, and expire bounds the last frames.
// The loop's reading and writing (loopio.go) and its commands (loop.go) call them.

// end ends the connection for cause, unless it is ending already (the first cause
// stands): the connection moves to ending, the node side stops, and the last frames that
// the cause calls for (lastFrames) go to the client after what it still holds; the
// connection closes once they are out.
func (l *loop) end(c *loopConn, cause error) {
	c.mu.Lock()
	ending := c.end(cause)
	c.mu.Unlock()
	if !ending {
		return
	}
	cs, ns := &c.sides[0], &c.sides[1]
	cs.paused, ns.paused = true, true
	ns.out = nil
	l.setEvents(ns)
	cs.out = c.lastFrames(cs.out, cause)
	if len(cs.out) == 0 {
		l.close(c)
		return
	}
	n, err := sysWrite(cs.fd, cs.out)
	if err != nil && err != unix.EAGAIN && err != unix.EINTR || n == len(cs.out) {
		l.close(c)
		return
	}
	cs.out = cs.out[:copy(cs.out, cs.out[max(n, 0):])]
	l.setEvents(cs)
	// The client has errWriteTimeout to take the rest, as on the goroutine path.
	c.lastDeadline = time.Now().Add(c.p.lastWrite)
	l.closing = append(l.closing, c)
}

// expire closes the connections whose last frames were not taken in time. The loop's wait
// is bounded, so it runs at least every loopWaitMillis.
func (l *loop) expire() {
	now := time.Now()
	kept := l.closing[:0]
	for _, c := range l.closing {
		switch {
		case c.getState() == stateClosed:
		case now.After(c.lastDeadline):
			l.close(c)
		default:
			kept = append(kept, c)
		}
	}
	clear(l.closing[len(kept):])
	l.closing = kept
}

// drain stops reading the client; the connection closes when its last request in flight
// is answered. A connection ending closes once its last frames are out.
func (l *loop) drain(c *loopConn) {
	if c.getState() >= stateEnding {
		return
	}
	cs := &c.sides[0]
	cs.paused = true
	l.setEvents(cs)
	if c.pipe.Streams.Len() == 0 && len(cs.out) == 0 {
		l.close(c)
	}
}

// close ends a connection in the loop, from any state: both sockets are closed and serve
// returns.
func (l *loop) close(c *loopConn) {
	if !c.advance(stateClosed) {
		return
	}
	c.pipe.Streams.SetSpares(nil) // what empties the table from here on is not this loop
	if c.move.moving {
		l.moveOver(c, handover.Ended)
	}
	for i := range c.sides {
		s := &c.sides[i]
		if l.side(int32(s.fd)) == s {
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
			l.setSide(s.fd, nil)
		}
		discard(s.fd, l.rbuf)
		unix.Close(s.fd)
		putBuffer(s.pend)
		putBuffer(s.out)
		s.pend, s.out, s.tickets = nil, nil, nil
		if s.held > 0 {
			c.p.held.release(s.held)
			s.held = 0
		}
	}
	segments{c.conn}.releaseLarge()
	c.closedOnLoop()
	// The loop never gives up its P by itself (see wait), so a goroutine it starts could
	// wait in that P's run queue until another P steals it: yield, so that the goroutine
	// that retires the connection runs and the connection is unregistered.
	runtime.Gosched()
}
