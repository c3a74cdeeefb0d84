package sidecar

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/sidecar/pipeline"

	"github.com/tracecar/tracecar/internal/cql"
)

// The end of a connection is one state machine on both transports, its lifecycle (see
// "Ending a connection" in the package doc):
//
//	open → draining → ending → closed
//
// Its transitions are the same functions on both, advance and end (which records the
// cause); what a state does to the sockets is the transport's:
//
//	          goroutine path                        event loop
//	draining  drain: client read deadline in past   drain posts cmdDrain: loop.drain
//	ending    stop(cause), from either goroutine    loop.end(cause)
//	closed    close, by the response goroutine;     loop.close
//	          closeAll
//
// On both, the last frames that a cause calls for are lastFrames'.

// errWriteTimeout bounds the last frames written to a client that is being closed: the
// error frames of a failed node, or a ProtocolError.
var errWriteTimeout = 5 * time.Second // a variable for tests

// Causes of the end of a connection (lifecycle.end). A client's error or EOF, and a malformed
// client frame (*protocolError), are the others. The event loop ends with a cause only a
// connection that owes the client last frames (a malformed frame, a lost node or a failed
// write to it); one that owes nothing (client gone, drained, closed by the proxy) goes
// straight to closed.
var (
	errNodeWrite  = errors.New("write to node failed")
	errNodeLost   = errors.New("node connection lost")
	errClientGone = errors.New("client connection closed")
	errDrained    = errors.New("drained")
	errShutdown   = errors.New("closed by the proxy")
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

// drain stops reading the client: requests already read are answered, new ones are not
// read. The connection closes when its last request in flight is answered. It is safe for
// concurrent use.
func (c *conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.advance(stateDraining) {
		return
	}
	if c.inLoop() {
		c.postLoop(cmdDrain)
		return
	}
	goroutines{c}.unpark(sideRequests, 0)
	c.client.SetReadDeadline(time.Unix(1, 0))
}

// closeAll closes both sockets at once, if they are not closed yet; a connection in a loop
// is closed by its loop. It is safe for concurrent use.
func (c *conn) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.getState() == stateClosed {
		return
	}
	if c.inLoop() {
		c.postLoop(cmdClose)
		return
	}
	if c.getState() < stateEnding {
		c.cause = errShutdown
	}
	c.advance(stateClosed)
	goroutines{c}.unparkAll()
	c.client.Close()
	if c.node != nil {
		c.node.Close()
	}
}

// finish releases what the connection holds once its transport has closed it.
func (c *conn) finish() {
	c.closeAll()
	goroutines{c}.stopParking()
	c.EndTracing()
	c.p.unregister(c)
}

// retire finishes a closed connection and takes it out of its Serve call's group, which
// drain waits for: on the goroutine that ran it on the goroutine path, on a goroutine of
// its own once a loop closed it (closedOnLoop).
func (c *conn) retire() {
	c.finish()
	c.group.wg.Done()
}

// closedOnLoop is the last step of a connection closed on its loop, or moved to another
// process from it: serve returned when it moved to the loop, so the connection is retired
// here, on a goroutine, as finish takes locks that the loop must not wait for.
func (c *conn) closedOnLoop() {
	c.closed.Store(true)
	go c.retire()
}

// lastFrames appends to f what the cause of a connection's end calls for, written to the
// client after what is queued for it and before the close, on either path: the
// ProtocolError for a malformed client frame, or a Server error for each request in
// flight when the node was lost or could not be written. Nothing else is owed.
func (c *conn) lastFrames(f []byte, cause error) []byte {
	var pe *pipeline.ProtocolError
	switch {
	case errors.As(cause, &pe):
		c.Warn().Str("error", pe.Msg).Msg("malformed frame from client: closing its connection")
		return c.appendError(f, pe.Stream, cql.ErrCodeProtocol, pe.Msg)
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
	c.lost = c.Streams.TakeAll(c.lost[:0])
	c.Warn().Err(cause).Str("node", c.NodeAddr.String()).Int("in_flight", len(c.lost)).
		Msg("node connection lost: failing the requests in flight and closing the client connection")
	msg := fmt.Sprintf("tracecar: connection to node %s lost", c.p.cfg.NodeAddr)
	for _, r := range c.lost {
		f = c.appendError(f, r.Stream, cql.ErrCodeServer, msg)
	}
	return f
}

// isClosed reports whether err only says that a connection ended.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, errClientGone)
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
