package sidecar

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tracecar/tracecar/sidecar/idlepark"
	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// The goroutine path: one goroutine per direction, each reading frames from one side with
// a frameReader and writing them to the other through a frameWriter (see the package doc).
// It carries TLS connections, and every connection with Config.NoEventLoop.

// goroutines is a connection as the goroutine path carries it: the methods of that
// transport, on the connection's core and its goPath. It holds the core as a named field
// (c.core.X: what the transport asks of the connection is visible where it asks it, and
// the type answers only to its own methods and its goPath's), and embeds its goPath, the
// goroutine path's own state, one pointer away.
type goroutines struct {
	core *conn
	*goPath
}

// goPath is what only the goroutine path keeps of a connection, besides the version gate's
// reader and writer of the client, which it takes over: a connection on a loop has none.
type goPath struct {
	// Request goroutine.
	toNode *frameWriter
	reqBuf []byte // frames larger than cr's buffer
	// sentQ are the traced requests written to toNode since its last flush: tracing is
	// told they were sent once the flush returns.
	sentQ []tracing.Ticket
	// reqDone is closed when the request goroutine stops reading, respDone when the
	// response goroutine closed the connection (conn.closed).
	reqDone, respDone chan struct{}

	// Response goroutine.
	nr      *frameReader
	respBuf []byte
	// doneQ are the traced responses written to toClient since its last flush.
	doneQ []tracing.Ticket

	// park is the connection's parking when it is idle (park.go), or nil; set under mu.
	park *parkState
}

// startGoroutinePath sets up the buffers of the goroutine path for connection cc.
func startGoroutinePath(cc *conn) goroutines {
	c := goroutines{cc, &goPath{reqDone: make(chan struct{}), respDone: make(chan struct{})}}
	c.core.pipe.Views = new(pipeline.Views)
	c.nr = newFrameReader(c.core.node, readBufferSize)
	c.nr.preload(c.core.takeNodePend())
	c.toNode = newFrameWriter(c.core.node, writeBufferSize)
	// A connection bound for a loop that could not take it has the gate's small reader and
	// writer: they grow to full size, what they hold kept.
	c.core.cr.grow(readBufferSize)
	c.core.toClient.grow(writeBufferSize)
	return c
}

// forwardRequest forwards the request at the head of r, whose header h is checked, to the
// node, after the per-frame work, and flushes when no whole frame follows it.
func (c goroutines) forwardRequest(r *frameReader, h cql.Header) error {
	n := cql.HeaderSize + int(h.Length)
	frame, err := c.readRequest(r, h, n)
	if err != nil {
		return err
	}
	t, fx := c.core.pipe.Request(h, frame, n, nil)
	if t.Events() {
		c.sentQ = append(c.sentQ, t)
	}
	if fx != 0 {
		c.core.apply(fx)
	}
	switch {
	case frame == nil:
		err = c.toNode.copyFrame(r, n)
	case n <= r.Size():
		err = c.toNode.write(frame)
		r.Discard(n)
	default:
		err = c.toNode.write(frame)
		c.core.p.held.release(n)
		if cap(c.reqBuf) > maxKeptBuffer {
			c.reqBuf = nil
		}
	}
	if err == nil && !frameReady(r) {
		if err = c.toNode.flush(); err == nil {
			c.core.pipe.Wrote(c.sentQ, false)
			c.sentQ = c.sentQ[:0]
		}
	}
	if err != nil && c.toNode.err != nil {
		return fmt.Errorf("%w: %w", errNodeWrite, err)
	}
	return err // nil, or the client went away in the middle of a frame
}

// readRequest returns the request of n bytes at the head of r: in r's buffer when it fits
// there, read whole into reqBuf when the proxy reads it (see pipeline.Conn.ReadsRequest), or nil when it
// is streamed through unread.
func (c goroutines) readRequest(r *frameReader, h cql.Header, n int) ([]byte, error) {
	switch {
	case n <= r.Size():
		frame, err := r.Peek(n)
		if err != nil {
			return nil, noEOF(err)
		}
		return frame, nil
	case c.core.pipe.ReadsRequest(h):
		var err error
		if c.reqBuf, err = c.readWhole(r, n); err != nil {
			return nil, err
		}
		return c.reqBuf, nil
	}
	return nil, nil
}

// forwardResponse forwards the response at the head of r, whose header h is checked, to
// the client, after the per-frame work, and flushes when no whole frame follows it or the
// connection is drained. arrived is when the read that brought it returned, 0 until a frame
// of that read needs it. It reports whether this was the answer a drained connection
// waited for.
func (c goroutines) forwardResponse(r *frameReader, h cql.Header, arrived *int64) (bool, error) {
	n := cql.HeaderSize + int(h.Length)
	var req pipeline.Inflight
	left := c.core.pipe.Streams.RequestFor(h, &req)
	frame, err := c.readResponse(r, h, &req, n)
	if err != nil {
		return false, err
	}
	out, done := c.core.pipe.Response(h, frame, &req, arrived)
	if req.Op == cql.OpStartup {
		segments{c.core}.segmentsAfter(h.Opcode)
	}
	if done.Events() {
		c.doneQ = append(c.doneQ, done)
	}
	size := len(out)
	switch {
	case frame == nil:
		size = n
		err = c.core.toClient.copyFrame(r, n)
	default:
		err = c.core.toClient.write(out)
		if n <= r.Size() {
			r.Discard(n)
		} else if cap(c.respBuf) > maxKeptBuffer {
			c.respBuf = nil
		}
	}
	c.core.pipe.Queued(req, *arrived)
	c.core.pipe.Counters.Answered(size)
	drained := c.core.lastAnswer(left) && c.requestsStopped()
	if err == nil && (drained || !frameReady(r)) {
		if err = c.core.toClient.flush(); err == nil {
			c.core.pipe.Wrote(c.doneQ, true)
			c.doneQ = c.doneQ[:0]
		}
	}
	if err != nil && c.core.toClient.err != nil {
		return false, errClientGone
	}
	return drained, err // err: the node went away in the middle of a frame
}

// readResponse returns the response of n bytes at the head of r: in r's buffer when it
// fits there, read whole into respBuf when the proxy reads it (see pipeline.Conn.ReadsResponse), or nil
// when it is streamed through unread.
func (c goroutines) readResponse(r *frameReader, h cql.Header, req *pipeline.Inflight, n int) ([]byte, error) {
	switch {
	case n <= r.Size():
		return r.Peek(n)
	case c.core.pipe.ReadsResponse(h, req):
		var err error
		if c.respBuf, err = cql.AppendRead(c.respBuf[:0], r, n); err != nil {
			return nil, err
		}
		return c.respBuf, nil
	}
	return nil, nil
}

// requestsStopped reports whether the request goroutine has stopped reading.
func (c goroutines) requestsStopped() bool {
	select {
	case <-c.reqDone:
		return true
	default:
		return false
	}
}

// requestsEnded stops the connection for the reason the request loop ended with err,
// unless it is a drained read with requests still in flight: then the response goroutine
// stops it after the last answer.
func (c goroutines) requestsEnded(err error) {
	var pe *pipeline.ProtocolError
	switch {
	case c.core.getState() >= stateEnding:
		// Stopped by the response goroutine or the proxy: that cause stands.
	case isTimeout(err) && c.core.getState() == stateDraining:
		// reqDone is closed before this check, and the response goroutine checks reqDone
		// after taking a stream: one of the two sees the last answer.
		if c.core.pipe.Streams.Len() == 0 {
			c.stop(errDrained)
		}
	case errors.As(err, &pe):
		c.stop(pe)
	case errors.Is(err, errNodeWrite):
		c.stop(err)
	default:
		if !isClosed(err) {
			c.core.pipe.Debug().Err(err).Msg("client read")
		}
		c.stop(fmt.Errorf("%w: %w", errClientGone, err))
	}
}

// stop ends a connection on the goroutine path for cause, from any goroutine; the first
// cause stands, a later one is dropped. It wakes both goroutines: the request goroutine's
// read of the client fails at once, and so does the response goroutine's read of the node,
// which is closed (nothing more goes to it). The response goroutine then writes the last
// frames and closes the connection: see close.
func (c goroutines) stop(cause error) {
	c.core.mu.Lock()
	defer c.core.mu.Unlock()
	if !c.core.end(cause) {
		return
	}
	if c.core.carrier != nil {
		c.core.carrier.wake(false) // the parked sides (park.go)
	}
	if c.core.node != nil {
		c.core.node.Close()
	}
	c.core.client.SetReadDeadline(time.Unix(1, 0))
	if cause != errDrained {
		// The response goroutine may be blocked writing to a client that does not read:
		// the last frames get errWriteTimeout, as on the event loop.
		c.core.client.SetWriteDeadline(time.Now().Add(c.core.p.lastWrite))
	}
}

// close is the goroutine path's one close path, run by the response goroutine once both
// loops have stopped: it writes what the cause calls for after what is queued for the
// client (a ProtocolError for a malformed client frame; a Server error for each request in
// flight when the node was lost or could not be written), then closes both sockets.
func (c goroutines) close() {
	<-c.reqDone
	c.core.mu.Lock()
	cause := c.core.cause
	closed := c.core.getState() == stateClosed
	c.core.mu.Unlock()
	if !closed {
		c.core.client.SetWriteDeadline(time.Now().Add(c.core.p.lastWrite))
		c.core.toClient.write(c.core.lastFrames(nil, cause))
		c.core.toClient.flush()
	}
	c.core.closeAll()
}

// readWhole reads the frame of n bytes at the head of r into the connection's scratch
// buffer, once the proxy-wide budget of frames held whole has room for it; the caller
// releases n from c.p.held once the frame is forwarded. While it waits the connection
// reads nothing: that is the backpressure. It gives up when the connection closes, its
// node connection fails, or the proxy drains.
func (c goroutines) readWhole(r *frameReader, n int) ([]byte, error) {
	if !c.core.p.held.acquire(int64(n), c.core.draining) {
		if c.core.getState() == stateDraining {
			return c.reqBuf, os.ErrDeadlineExceeded // as a drained read: see requestsEnded
		}
		return c.reqBuf, errClientGone
	}
	buf, err := cql.AppendRead(c.reqBuf[:0], r, n)
	if err != nil {
		c.core.p.held.release(n)
	}
	return buf, err
}

// parkState is a connection's part in parking, and the connection as the process's parker
// sees it (idlepark.Parkable) and as its ending sees the goroutine path (carrier). All but
// seen is under conn.mu.
type parkState struct {
	g     goroutines       // the connection
	pk    *idlepark.Parker // nil: the connection does not park
	want  [2]bool          // the parker asked the side to park: its read deadline is in the past
	token [2]uint64
	seen  uint64 // the parker's: the connection's byte count at its last look
}
