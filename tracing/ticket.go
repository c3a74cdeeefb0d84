package tracing

import (
	"encoding/hex"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
)

// Ticket is the tracing record of one request, from Begin to End: the caller keeps it with
// its own record of the request in flight (the sidecar's stream table entry), so tracing
// keeps no per-stream state of its own. The zero Ticket is a request that is not traced,
// which End passes through at the cost of one compare.
type Ticket struct {
	r      *record
	seq    uint32 // r.seq at Begin: a later use of the record is not this request
	events bool   // traced with events (full, sampled, client): Sent and Done apply
}

// Traced reports whether the request is traced: End has work to do.
func (t Ticket) Traced() bool { return t.r != nil }

// Events reports whether the request is traced with events, so that its "sent to node"
// and "response sent" events are wanted: the caller calls Sent after the write that
// carried the request, and Done after the write that carried its response.
func (t Ticket) Events() bool { return t.events }

// Sent notes that the request went out to the node at at (from Now). The caller calls it
// on the request side, after the write that carried the request; it does nothing for a
// Ticket without events, or one whose request has already ended.
func (t Ticket) Sent(at int64) {
	if t.events && t.r.seq.Load() == t.seq {
		t.r.sent.CompareAndSwap(0, at)
	}
}

// record is what tracing keeps of one request in flight. A fast-mode record holds the
// start time and a copy of the request frame, so that a slow request can be decoded after
// its response; a record traced with events holds the decompressed body and the times of
// its events. Records are reused through the Conn's free list: Begin takes one, and End
// (fast mode) or Done gives it back.
type record struct {
	seq atomic.Uint32 // incremented by each Begin that takes the record

	mode    string
	op      cql.Opcode
	flags   byte // the client's own flags
	version byte
	start   int64
	gen     uint32 // fast mode: the Config generation at Begin

	// The request as Begin kept it (Conn.keep): in fast mode cut to Options.CaptureMax
	// bytes, with events whole.
	comp  cql.Compressor
	size  int // the whole frame's size, when buf is cut
	trunc bool
	plain bool // buf is the decompressed message, not the frame

	// req is the request parsed, its slices in buf, when parsedReq is set: when another
	// reader had parsed it already, or once its session was built.
	req       cql.Request
	parsedReq bool

	// buf is the request frame or, when plain, its decompressed message.
	buf []byte

	// Traced with events. sent is set by Ticket.Sent on the request side, and read on the
	// response side, hence atomic.
	parsed      int64
	sent        atomic.Int64
	responded   int64
	respSent    int64
	nodeID      [16]byte
	hasNodeID   bool
	err         string
	thresholdUS int64
	rows        int // the RESULT Rows count, or -1

	// The request's W3C trace context (its State copied into state), and whether it has
	// been read from the request yet: fast mode may leave that to a slow request's End.
	ctx     TraceContext
	state   []byte
	ctxRead bool

	// note is told the id of the session of a floor trace (Conn.BeginFloor).
	note FloorNote
}

// reset readies a record taken for a request traced with events.
func (r *record) reset(mode string, h *cql.Header, now, thresholdUS int64) {
	r.mode, r.op, r.flags, r.version = mode, h.Opcode, h.Flags, h.ProtoVersion()
	r.start, r.thresholdUS = now, thresholdUS
	r.sent.Store(0)
	r.responded, r.respSent = 0, 0
	r.err = ""
	r.nodeID, r.hasNodeID = [16]byte{}, false
	r.rows = -1
	r.note = nil
}

// setContext keeps tc in r, copying its tracestate into r's own buffer.
func (r *record) setContext(tc *TraceContext) {
	r.ctx = *tc
	r.ctx.State = nil
	r.state = append(r.state[:0], tc.State...)
}

// annotate puts the record's trace context into s: trace_id, parent_span_id and the
// tracestate, in lower-case hex as the specification writes them.
func (r *record) annotate(s *Session) {
	if !r.ctx.Valid() {
		return
	}
	s.TraceID = hex.EncodeToString(r.ctx.TraceID[:])
	s.ParentSpanID = hex.EncodeToString(r.ctx.SpanID[:])
	s.traceFlags = r.ctx.Flags
	if len(r.state) > 0 {
		s.TraceState = string(r.state)
	}
}
