package sidecar

import (
	"encoding/binary"
	"errors"
	"os"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// Protocol v5's segments, a layer of the transport between the bytes and the frames (see
// "Protocol v5" in the package doc). A v5 connection starts unframed, as v4 does; the READY
// or AUTHENTICATE that answers its STARTUP is the node's last unframed frame and the
// switch for both directions: what the node sends after it, and what the client sends once
// it has it, are segments. Both transports then read whole segments (cql.SegmentReader
// checks their CRCs and that their frames line up with them), hand each frame to the same
// per-frame work as v4 (pipeline.request, pipeline.response), and forward the segment itself when
// no frame in it changed, so that the common path re-encodes nothing and computes no CRC
// but the reader's. A segment whose frames changed (a rewritten system table, a stripped
// tracing id, a flag set in place) is re-segmented with fresh CRCs, and so is a frame
// larger than a segment, which is gathered whole from its segments first.

// segments is a connection as v5's segments carry it: the methods of that layer of the
// transports, between the bytes and the frames, on the connection whose v5conn it reads.
// Both transports use it. It holds the connection's core as a named field (c.core.X), so
// that it answers only to its own methods.
type segments struct{ core *conn }

// apply makes the change of framing that the per-frame work on a request returned
// (pipeline.request): a v5 STARTUP begins the segments. A frame changed in place
// (fxEdited) needs a fresh CRC only in a segment, which requestSegment sees.
func (c *conn) apply(fx pipeline.Effect) {
	if fx&pipeline.FxSegments != 0 {
		segments{c}.beginV5(fx&pipeline.FxSegmentsLZ4 != 0)
	}
}

// beginV5 notes a v5 STARTUP, with lz4 when it asked for it: the frames of a v5
// connection are never compressed themselves, so the connection's frame compression stays
// none. Only the first STARTUP counts: the format of the segments is the connection's.
func (c segments) beginV5(lz4 bool) {
	if c.core.v5.startup.Load() {
		return
	}
	c.core.v5.lz4.Store(lz4)
	c.core.v5.fromClient.LZ4, c.core.v5.fromNode.LZ4 = lz4, lz4
	c.core.v5.fromClient.CheckLarge = c.checkLargeRequest
	c.core.v5.fromNode.CheckLarge = c.checkLargeResponse
	c.core.v5.startup.Store(true)
}

// segmentsAfter reports whether the response with opcode op, answering a STARTUP, starts
// the segments, and starts them: it must come before the response is queued for the
// client, which sends segments once it has it.
func (c segments) segmentsAfter(op cql.Opcode) bool {
	if c.core.v5 == nil || !c.core.v5.startup.Load() || op != cql.OpReady && op != cql.OpAuthenticate || c.core.v5.node {
		return false
	}
	c.core.v5.node = true
	c.core.v5.client.Store(true)
	return true
}

// checkLargeRequest refuses a client frame larger than a segment by its header, before
// it is gathered, as requestHeader does any frame.
func (c segments) checkLargeRequest(hb []byte) error {
	h, pe := c.core.requestHeader(hb)
	if pe != nil {
		return pe
	}
	return c.holdLarge(cql.HeaderSize + int(h.Length))
}

// errAwaitBudget stops the event loop's reading of a client segment that starts a large
// frame while the budget of frames held whole has no room for it: the segment stays
// unread, and the loop waits for the budget as for a v4 frame (holdFrame).
type errAwaitBudget struct{ size int }

func (e errAwaitBudget) Error() string { return "waiting for the budget of frames held whole" }

// holdLarge charges a client frame of size bytes, about to be gathered from its segments,
// to the budget of frames held whole, as v4 charges a frame larger than the read buffer
// (readWhole, holdFrame): many connections that each send a large frame slowly then hold
// at most the budget together. The goroutine path waits for room; the event loop cannot, and
// returns errAwaitBudget unless the loop has waited already (the side holds the share).
func (c segments) holdLarge(size int) error {
	if c.core.carrier != nil {
		if handled, err := c.core.carrier.holdLarge(size); handled {
			return err
		}
	}
	if !c.core.p.held.acquire(int64(size), c.core.draining) {
		if c.core.getState() == stateDraining {
			return os.ErrDeadlineExceeded // as a drained read: see requestsEnded
		}
		return errClientGone
	}
	c.core.v5.largeHeld = size
	return nil
}

// gatheringLarge reports whether the client frame being gathered from its segments holds its
// share of the budget: its segments are part of it, and are not charged again (they would
// wait for a share the frame itself holds).
func (c segments) gatheringLarge() bool { return c.core.v5 != nil && c.core.v5.largeHeld > 0 }

// releaseLarge gives back what a large client frame held of the budget: once it is whole,
// or when the connection ends.
func (c segments) releaseLarge() {
	if c.core.v5 != nil && c.core.v5.largeHeld > 0 {
		c.core.p.held.release(c.core.v5.largeHeld)
		c.core.v5.largeHeld = 0
	}
}

// checkLargeResponse refuses a node frame larger than a segment whose header is malformed.
func (c segments) checkLargeResponse(hb []byte) error {
	_, err := c.core.responseHeader(hb)
	return err
}

// maxStartupSegment bounds a client's segments until its handshake is done, as
// cql.MaxStartupFrameSize bounds its frames: an unauthenticated client cannot make the
// proxy hold a segment larger than a frame it could send unframed.
const maxStartupSegment = cql.MaxStartupFrameSize + cql.SegmentHeaderSizeLZ4 + cql.SegmentTrailerSize

// segmentHead reads the header of the segment at the start of hb, from the client when
// client is set: its size on the wire, 0 when the header is not all there. A bad CRC is a
// protocolError for a client, a failure of the node connection for the node.
func (c segments) segmentHead(hb []byte, client bool) (int, error) {
	if !client {
		n, err := c.core.v5.fromNode.Peek(hb)
		if err != nil {
			return 0, errors.New("malformed segment from node: header CRC mismatch")
		}
		return n, nil
	}
	n, err := c.core.v5.fromClient.Peek(hb)
	switch {
	case err != nil:
		return 0, badSegment(err)
	case n > maxStartupSegment && !c.core.pipe.Ready():
		c.core.p.sh.TooBig.Add(1)
		return 0, &pipeline.ProtocolError{Msg: "Invalid segment: a payload of " + itoa(n) + " bytes before authentication"}
	}
	return n, nil
}

// badSegment is the protocolError for a client segment that fails its checks: the client
// is answered on stream 0, as Cassandra answers a corrupt frame, and closed.
func badSegment(err error) *pipeline.ProtocolError {
	var pe *pipeline.ProtocolError
	if errors.As(err, &pe) {
		return pe
	}
	return &pipeline.ProtocolError{Msg: "Invalid segment: " + segmentProblem(err)}
}

func segmentProblem(err error) string {
	switch {
	case errors.Is(err, cql.ErrSegmentCRC):
		return "CRC mismatch"
	case errors.Is(err, cql.ErrSegmentFraming):
		return "its frames do not line up with it"
	case errors.Is(err, cql.ErrFrameTooBig):
		return "a frame over the maximum size"
	}
	return err.Error()
}

// requestSegment does the per-frame work on the frames of seg, one whole segment from the
// client, and returns what goes to the node: seg itself when no frame in it changed (with a
// fresh CRC when one was changed in place), else its frames re-segmented; nil for a
// segment that only continues a large frame. tickets gathers the traced requests.
func (c segments) requestSegment(seg []byte, tickets []tracing.Ticket) ([]byte, []tracing.Ticket, error) {
	rd := &c.core.v5.fromClient
	_, _, frames, err := rd.Next(seg)
	if err != nil {
		if errors.As(err, new(errAwaitBudget)) || errors.Is(err, errClientGone) || errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, tickets, err
		}
		return nil, tickets, badSegment(err)
	}
	c.core.pipe.Counters.SegmentRead(pipeline.FromClient)
	if frames == nil {
		return nil, tickets, nil
	}
	if !rd.Gathering() {
		c.releaseLarge() // the large frame is whole: it is forwarded below
	}
	changed := false
	for rest := frames; len(rest) > 0; {
		h, pe := c.core.requestHeader(rest)
		if pe != nil {
			return nil, tickets, pe
		}
		n := cql.HeaderSize + int(h.Length)
		frame := rest[:n]
		rest = rest[n:]
		c.core.traceFrame(h, true)
		h.Flags &^= cql.FlagCompression // v5 compresses segments, not frames
		flags := frame[1]
		t, fx := c.core.pipe.Request(h, frame, n, nil)
		if t.Events() {
			tickets = append(tickets, t)
		}
		if fx != 0 {
			c.core.apply(fx)
		}
		changed = changed || frame[1] != flags || fx&pipeline.FxEdited != 0
	}
	if !changed && rd.SelfContained() {
		return seg, tickets, nil // forwarded as it came
	}
	c.core.pipe.Counters.SegmentWritten(pipeline.FromClient)
	if rd.InPlace() {
		// Its frames changed in place, in the segment: only its CRC is new.
		binary.LittleEndian.PutUint32(seg[len(seg)-cql.SegmentTrailerSize:], cql.CRC32(frames))
		return seg, tickets, nil
	}
	c.core.v5.reqOut = cql.AppendSegments(c.core.v5.reqOut[:0], frames, rd.LZ4)
	if cap(c.core.v5.reqOut) > maxKeptBuffer {
		defer func() { c.core.v5.reqOut = nil }()
	}
	return c.core.v5.reqOut, tickets, nil
}

// responseSegment does the per-frame work on the frames of seg, one whole segment from the
// node, and returns what goes to the client: seg itself when no frame in it changed, else
// its frames re-segmented; nil for a segment that only continues a large frame. arrived is
// when the read that brought seg returned, 0 until a frame needs it (see arrival); tickets
// gathers the traced responses; drained reports the answer a drained connection waited
// for.
func (c segments) responseSegment(seg []byte, arrived *int64, tickets []tracing.Ticket) (out []byte, _ []tracing.Ticket, drained bool, err error) {
	rd := &c.core.v5.fromNode
	_, _, frames, err := rd.Next(seg)
	if err != nil {
		return nil, tickets, false, errors.New("malformed segment from node: " + segmentProblem(err))
	}
	c.core.pipe.Counters.SegmentRead(pipeline.FromNode)
	if frames == nil {
		return nil, tickets, false, nil
	}
	// A large frame is always re-segmented; the frames of a self-contained segment are
	// gathered again only from the first one that changed.
	changed := !rd.SelfContained()
	acc := c.core.v5.respFrames[:0]
	for rest := frames; len(rest) > 0; {
		h, err := c.core.responseHeader(rest)
		if err != nil {
			return nil, tickets, drained, err
		}
		n := cql.HeaderSize + int(h.Length)
		frame := rest[:n]
		rest = rest[n:]
		c.core.traceFrame(h, false)
		h.Flags &^= cql.FlagCompression
		var req pipeline.Inflight
		left := c.core.pipe.Streams.RequestFor(h, &req)
		flags := frame[1]
		f, done := c.core.pipe.Response(h, frame, &req, arrived)
		if done.Events() {
			tickets = append(tickets, done)
		}
		if !changed && (len(f) != n || &f[0] != &frame[0] || frame[1] != flags) {
			changed = true
			acc = append(acc, frames[:len(frames)-len(rest)-n]...)
		}
		if changed {
			acc = append(acc, f...)
		}
		c.core.pipe.Queued(req, *arrived)
		c.core.pipe.Counters.Answered(len(f))
		drained = c.core.lastAnswer(left) || drained
	}
	c.core.v5.respFrames = acc
	if cap(acc) > maxKeptBuffer {
		c.core.v5.respFrames = nil
	}
	if !changed {
		return seg, tickets, drained, nil
	}
	c.core.pipe.Counters.SegmentWritten(pipeline.FromNode)
	c.core.v5.respOut = cql.AppendSegments(c.core.v5.respOut[:0], acc, rd.LZ4)
	out = c.core.v5.respOut
	if cap(out) > maxKeptBuffer {
		c.core.v5.respOut = nil
	}
	return out, tickets, drained, nil
}
