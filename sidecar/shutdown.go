package sidecar

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

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
// error frames of a failed node, or a ProtocolError. It is a proxy's connEnv.lastWrite,
// which a test shortens on its own proxy.
const errWriteTimeout = 5 * time.Second

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

// drain stops reading the client: requests already read are answered, new ones are not
// read. The connection closes when its last request in flight is answered. It is safe for
// concurrent use.
func (c *conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.advance(stateDraining) {
		return
	}
	if c.carrier != nil {
		if c.carrier.post(true) {
			return
		}
		c.carrier.wake(true)
	}
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
	if c.carrier != nil && c.carrier.post(false) {
		return
	}
	if c.getState() < stateEnding {
		c.cause = errShutdown
	}
	c.advance(stateClosed)
	if c.carrier != nil {
		c.carrier.wake(false)
	}
	c.client.Close()
	if c.node != nil {
		c.node.Close()
	}
}

// finish releases what the connection holds once its transport has closed it.
func (c *conn) finish() {
	c.closeAll()
	c.mu.Lock()
	cr := c.carrier
	c.mu.Unlock()
	if cr != nil {
		cr.release()
	}
	c.pipe.EndTracing()
	c.p.forget(c)
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
		c.pipe.Warn().Str("error", pe.Msg).Msg("malformed frame from client: closing its connection")
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
	c.lost = c.pipe.Streams.TakeAll(c.lost[:0])
	c.pipe.Warn().Err(cause).Str("node", c.pipe.NodeAddr.String()).Int("in_flight", len(c.lost)).
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
