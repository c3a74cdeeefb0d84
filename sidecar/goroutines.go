package sidecar

import (
	"bufio"
	"errors"
	"fmt"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// startGoroutinePath sets up the buffers of the goroutine path.
func (c *conn) startGoroutinePath() {
	c.nr = bufio.NewReaderSize(c.node, readBufferSize)
	c.toNode = newFrameWriter(c.node, writeBufferSize)
	if c.cr.Size() < readBufferSize {
		// Bound for a loop that could not take it: full-size buffers, the small reader's
		// bytes read first, and what the gate queued for the client written out.
		c.cr = bufio.NewReaderSize(c.cr, readBufferSize)
		c.toClient.flush()
		c.toClient = newFrameWriter(c.client, writeBufferSize)
	}
}

// requests is the request loop: it forwards the client's frames to the node until the
// client goes away, sends a malformed frame, is drained, or the node cannot be written.
func (c *conn) requests() error {
	r := c.cr
	for {
		hb, err := r.Peek(cql.HeaderSize)
		if err != nil {
			if len(hb) > 0 {
				return noEOF(err)
			}
			return err
		}
		h, perr := c.requestHeader(hb)
		if perr != nil {
			return perr
		}
		n := cql.HeaderSize + int(h.Length)
		if e := c.log.Trace(); e != nil {
			e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg("frame from client")
		}

		var frame []byte
		peeked := n <= r.Size()
		switch {
		case peeked:
			if frame, err = r.Peek(n); err != nil {
				return noEOF(err)
			}
		case c.tr != nil || c.readsBody(h.Opcode):
			if c.reqBuf, err = c.readWhole(r, n); err != nil {
				return err
			}
			frame = c.reqBuf
		}

		if t := c.request(h, frame, n); t.Events() {
			c.sentQ = append(c.sentQ, t)
		}

		switch {
		case frame == nil:
			err = c.toNode.copyFrame(r, n)
		case peeked:
			err = c.toNode.write(frame)
			r.Discard(n)
		default:
			err = c.toNode.write(frame)
			c.p.held.release(n)
			if cap(c.reqBuf) > maxKeptBuffer {
				c.reqBuf = nil
			}
		}
		if err == nil && !frameReady(r) {
			if err = c.toNode.flush(); err == nil {
				c.wrote(c.sentQ, false)
				c.sentQ = c.sentQ[:0]
			}
		}
		if err != nil {
			if c.toNode.err != nil {
				return fmt.Errorf("%w: %w", errNodeWrite, err)
			}
			return err // the client went away in the middle of a frame
		}
	}
}

// responses is the response goroutine: it forwards the node's frames to the client until
// the response loop ends, stops the connection for that reason unless it was stopped
// already, and closes it.
func (c *conn) responses() {
	defer close(c.done)
	err := c.forwardResponses()
	switch {
	case err == nil:
		c.stop(errDrained)
	case errors.Is(err, errClientGone):
		c.stop(err)
	default:
		c.stop(fmt.Errorf("%w: %w", errNodeLost, err))
	}
	c.close()
}

// forwardResponses is the response loop. It returns nil when the connection was drained,
// errClientGone when the client could not be written, and the node read error otherwise.
func (c *conn) forwardResponses() error {
	r := c.nr
	var arrived int64 // when the last read from the node returned, if metrics are on
	for {
		fill := r.Buffered() < cql.HeaderSize
		hb, err := r.Peek(cql.HeaderSize)
		if err != nil {
			return err
		}
		h, err := c.responseHeader(hb)
		if err != nil {
			return err
		}
		n := cql.HeaderSize + int(h.Length)
		if e := c.log.Trace(); e != nil {
			e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg("frame from node")
		}

		var req inflight
		left := -1
		if h.Stream >= 0 {
			req, _, left = c.streams.take(h.Stream)
		}
		event := h.Stream < 0 && h.Opcode == cql.OpEvent
		var frame []byte
		fill = fill || r.Buffered() < n
		switch {
		case n <= r.Size():
			if frame, err = r.Peek(n); err != nil {
				return err
			}
		case c.tr != nil || req.kind != kindNone || event || req.stat.WantsBody(h.Opcode):
			if c.respBuf, err = cql.AppendRead(c.respBuf[:0], r, n); err != nil {
				return err
			}
			frame = c.respBuf
		}

		// The response arrived when the read that completed it returned: one clock read per
		// read from the node, shared by every frame that read delivered. It is the response
		// time that tracing and statement statistics see, and the start of the added latency.
		if fill {
			arrived = 0
		}
		if arrived == 0 && (c.p.metrics != nil || req.stat.Active()) {
			arrived = tracing.Now()
		}
		out, done := c.response(h, frame, req, arrived)
		if done.Events() {
			c.doneQ = append(c.doneQ, done)
		}

		switch {
		case frame == nil:
			inc(&c.counters.bytesOut, uint64(n))
			err = c.toClient.copyFrame(r, n)
		default:
			inc(&c.counters.bytesOut, uint64(len(out)))
			err = c.toClient.write(out)
			if n <= r.Size() {
				r.Discard(n)
			} else if cap(c.respBuf) > maxKeptBuffer {
				c.respBuf = nil
			}
		}
		c.queued(req, arrived)
		drained := left == 0 && c.draining() && c.requestsStopped()
		if err == nil && (drained || !frameReady(r)) {
			if err = c.toClient.flush(); err == nil {
				c.wrote(c.doneQ, true)
				c.doneQ = c.doneQ[:0]
			}
		}
		if err != nil {
			if c.toClient.err != nil {
				return errClientGone
			}
			return err // the node went away in the middle of a frame
		}
		if drained {
			return nil
		}
	}
}

// requestsStopped reports whether the request goroutine has stopped reading.
func (c *conn) requestsStopped() bool {
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
func (c *conn) requestsEnded(err error) {
	var pe *protocolError
	switch {
	case c.getState() >= stateEnding:
		// Stopped by the response goroutine or the proxy: that cause stands.
	case isTimeout(err) && c.getState() == stateDraining:
		// reqDone is closed before this check, and the response goroutine checks reqDone
		// after taking a stream: one of the two sees the last answer.
		if c.streams.len() == 0 {
			c.stop(errDrained)
		}
	case errors.As(err, &pe):
		c.stop(pe)
	case errors.Is(err, errNodeWrite):
		c.stop(err)
	default:
		if !isClosed(err) {
			c.log.Debug().Err(err).Msg("client read")
		}
		c.stop(fmt.Errorf("%w: %w", errClientGone, err))
	}
}

// stop ends a connection on the goroutine path for cause, from any goroutine; the first
// cause stands, a later one is dropped. It wakes both goroutines: the request goroutine's
// read of the client fails at once, and so does the response goroutine's read of the node,
// which is closed (nothing more goes to it). The response goroutine then writes the last
// frames and closes the connection: see close.
func (c *conn) stop(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inLoop() || !c.end(cause) {
		return
	}
	if c.node != nil {
		c.node.Close()
	}
	c.client.SetReadDeadline(time.Unix(1, 0))
	if cause != errDrained {
		// The response goroutine may be blocked writing to a client that does not read:
		// the last frames get errWriteTimeout, as on the event loop.
		c.client.SetWriteDeadline(time.Now().Add(errWriteTimeout))
	}
}

// close is the goroutine path's one close path, run by the response goroutine once both
// loops have stopped: it writes what the cause calls for after what is queued for the
// client (a ProtocolError for a malformed client frame; a Server error for each request in
// flight when the node was lost or could not be written), then closes both sockets.
func (c *conn) close() {
	<-c.reqDone
	c.mu.Lock()
	cause := c.cause
	closed := c.getState() == stateClosed
	c.mu.Unlock()
	if !closed {
		c.client.SetWriteDeadline(time.Now().Add(errWriteTimeout))
		c.toClient.write(c.lastFrames(nil, cause))
		c.toClient.flush()
	}
	c.closeAll()
}
