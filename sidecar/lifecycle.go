package sidecar

import (
	"sync"
	"sync/atomic"
)

// connState is where a connection is on its way to closed. It only moves forward (see
// lifecycle.advance):
//
//	open → draining → ending → closed
//
// draining is set by conn.drain (from Proxy.drain), ending by lifecycle.end with the cause, and
// closed when both sockets are closed (closeAll, close, loop.close). A state may be
// skipped.
type connState int32

const (
	stateOpen     connState = iota
	stateDraining           // no new request is read; the last answer ends the connection
	stateEnding             // a cause is recorded: the last frames are being written
	stateClosed             // both sockets are closed
)

// lifecycle is the end of a connection, the same on both transports: its state, which
// only moves forward, and the first cause. What a state does to the sockets is the
// transport's (conn.drain, conn.closeAll, the goroutine path's stop and close, the loop's
// end and close). A connection embeds it; its zero value is open.
type lifecycle struct {
	// state is a connState; it only moves forward, by compare-and-swap, so that the frame
	// loops and the event loop read it without mu. cause is written under mu before state
	// becomes stateEnding.
	state atomic.Int32
	cause error
	// closed is set once the transport closed the connection for good: the response
	// goroutine ended, or the loop closed it (on the goroutine path goPath.respDone is
	// closed then too).
	closed atomic.Bool
	// mu serialises the changes of state and their effect on the sockets with setting the
	// node socket and with the move to a loop (conn.toLoop).
	mu sync.Mutex
}

// getState returns the connection's state.
func (c *lifecycle) getState() connState { return connState(c.state.Load()) }

// draining reports whether the connection reads no new requests: it is draining, ending
// or closed.
func (c *lifecycle) draining() bool { return c.getState() >= stateDraining }

// advance moves the state forward to s, and reports whether it moved: it does not when the
// connection already is at s or beyond.
func (c *lifecycle) advance(s connState) bool {
	for {
		old := c.state.Load()
		if connState(old) >= s {
			return false
		}
		if c.state.CompareAndSwap(old, int32(s)) {
			return true
		}
	}
}

// end moves the connection to ending for cause, on either path, and reports whether it
// did: the first cause stands, a later one is dropped. c.mu must be held.
func (c *lifecycle) end(cause error) bool {
	if c.getState() >= stateEnding {
		return false
	}
	c.cause = cause
	return c.advance(stateEnding)
}

// lastAnswer reports whether a response that left requests in flight (pipeline's
// StreamTable.RequestFor) was the last answer a draining connection waited for.
func (c *lifecycle) lastAnswer(left int) bool { return left == 0 && c.draining() }
