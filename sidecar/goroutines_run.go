package sidecar

import (
	"errors"
	"fmt"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/sidecar/internal/pipeline"
)

// The goroutine path's goroutines (see goroutines.go, below, for the connection as that
// path carries it and its per-frame work, and park.go for its parking): their start, the
// frame loops they run, and their start again once a parked side has something to read.

// runGoroutines carries connection cc on the goroutine path: the request loop runs on the
// calling goroutine, the response loop on a goroutine of its own, which closes the
// connection once both have stopped (close) and then closes respDone. It returns when the
// connection is closed and retired, or when its request side parked (park.go).
func runGoroutines(cc *conn) {
	c := startGoroutinePath(cc)
	c.startParking()
	go c.runResponses()
	c.runRequests()
}

// runRequests runs the request loop until it ends, then retires the connection once it is
// closed; or until the side parks, when a new goroutine runs it on its next read.
func (c goroutines) runRequests() {
	err := c.requests()
	for err == errParked {
		if c.parkSide(sideRequests) {
			return
		}
		err = c.requests()
	}
	close(c.reqDone)
	c.requestsEnded(err)
	<-c.respDone
	c.core.retire()
}

// requests is the request loop: it forwards the client's frames to the node until the
// client goes away, sends a malformed frame, is drained, or the node cannot be written.
func (c goroutines) requests() error {
	r := c.core.cr
	for {
		hb, err := r.next()
		if c.core.segmentsFromClient() {
			// The client has the answer to its v5 STARTUP: it sends segments (a segment is
			// larger than a header, so the wait for one above was no mistake).
			return c.requestSegments(r)
		}
		if err != nil {
			if len(hb) > 0 {
				return noEOF(err)
			}
			return err
		}
		h, pe := c.core.requestHeader(hb)
		if pe != nil {
			return pe
		}
		c.core.traceFrame(h, true)
		if err := c.forwardRequest(r, h); err != nil {
			return err
		}
		c.parkAfter(r, h.Opcode)
	}
}

// runResponses is the response goroutine: it forwards the node's frames to the client
// until the response loop ends, stops the connection for that reason unless it was stopped
// already, and closes it. When the side parks, a new goroutine runs it on its next read.
func (c goroutines) runResponses() {
	err := c.forwardResponses()
	for err == errParked {
		if c.parkSide(sideResponses) {
			return
		}
		err = c.forwardResponses()
	}
	defer func() {
		c.core.closed.Store(true)
		close(c.respDone)
	}()
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
func (c goroutines) forwardResponses() error {
	r := c.nr
	var arrived int64 // when the last read from the node returned, once a frame needed it
	for {
		fill := r.Buffered() < cql.HeaderSize
		hb, err := r.next()
		if err != nil {
			return err
		}
		h, err := c.core.responseHeader(hb)
		if err != nil {
			return err
		}
		c.core.traceFrame(h, false)
		// The response arrived when the read that completed it returned: one clock read per
		// read from the node, shared by every frame that read delivered (see arrival).
		if fill || r.Buffered() < cql.HeaderSize+int(h.Length) {
			arrived = 0
		}
		drained, err := c.forwardResponse(r, h, &arrived)
		if err != nil || drained {
			return err
		}
		c.parkAfter(r, h.Opcode)
		if c.core.segmentsFromNode() {
			return c.responseSegments(r, arrived) // the node's READY was its last frame
		}
	}
}

// unpark starts a goroutine for side s if it is parked, its socket taken back from the
// parker; by the parker when the socket has something, and by unparkAll. c.mu must be held.
// token, when not 0, is the parking the parker found ready: an older one is over already.
func (c goroutines) unpark(s int, token uint64) {
	if c.park == nil {
		return
	}
	t := c.park.token[s]
	if t == 0 || token != 0 && token != t {
		return
	}
	c.park.token[s] = 0
	c.park.pk.Unwatch(t, c.rawSocket(s))
	if c.core.pipe.Views == nil {
		c.core.pipe.Views = viewPool.Get().(*pipeline.Views)
	}
	if s == sideRequests {
		go c.runRequests()
	} else {
		go c.runResponses()
	}
}

// unparkAll starts the parked sides, before what ends a connection wakes them (drain,
// stop, closeAll): they end as the running ones do. c.mu must be held.
func (c goroutines) unparkAll() {
	if c.park != nil {
		c.unpark(sideRequests, 0)
		c.unpark(sideResponses, 0)
	}
}

// Unpark starts side s, whose socket the parker found ready for its parking tok.
func (ps *parkState) Unpark(s int, tok uint64) {
	c := ps.g
	c.core.mu.Lock()
	c.unpark(s, tok)
	c.core.mu.Unlock()
}

// wake starts the parked sides, before what ends a connection wakes them (carrier): the
// request side for a drain, both for a close.
func (ps *parkState) wake(draining bool) {
	if draining {
		ps.g.unpark(sideRequests, 0)
		return
	}
	ps.g.unparkAll()
}
