package tracing

import (
	"bytes"
	"math"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing/statements"
)

// Considers reports whether Begin could trace a request with header h under the
// configuration in force: false for what no mode traces (tracing off and no tracing flag
// or trace context asked for, an opcode never traced, an event's stream). A caller may
// leave a connection without a Conn until its first request considered: most connections
// of an idle pool, or of a node with tracing off, never need one. It is one atomic load
// and a compare.
func (t *Tracer) Considers(h *cql.Header) bool { return t.snap.Load().considers(h) }

func (s *snapshot) considers(h *cql.Header) bool {
	return !(s.off && h.Flags&cql.FlagTracing == 0 && (!s.follow || h.Flags&cql.FlagCustomPayload == 0)) &&
		traceable(h.Opcode) && h.Stream >= 0
}

// maxFreeRecords bounds the records a Conn keeps for reuse: about its concurrency.
const maxFreeRecords = 256

// maxPooledBody keeps the buffers of huge requests out of the free list.
const maxPooledBody = 64 << 10

// take returns a record for a new request; request side.
func (c *Conn) take() *record {
	var r *record
	c.freeMu.Lock()
	if n := len(c.free); n > 0 {
		r = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
	}
	c.freeMu.Unlock()
	if r == nil {
		r = new(record)
	}
	return r
}

// release gives a record back once its request has ended; response side.
func (c *Conn) release(r *record) {
	if cap(r.buf) > maxPooledBody {
		r.buf, r.req = nil, cql.Request{} // and the request's arrays, sized like it
	}
	r.comp = nil
	c.freeMu.Lock()
	if len(c.free) < maxFreeRecords {
		c.free = append(c.free, r)
	}
	c.freeMu.Unlock()
}

// Begin sees a request before the sidecar forwards it, through the view f that the
// sidecar decoded the frame into, and returns its Ticket. now, from Now, is the request's
// arrival when the caller has read the clock for its own purposes; 0 makes Begin read it
// when it needs it. When the request is sampled, Begin sets cql.FlagTracing in the frame's
// raw bytes, so the caller must forward f.Raw() and not a header re-encoded from
// f.Header. Begin does not retain f or its bytes.
//
// With tracing off it is one atomic load and a compare. In fast mode it keeps the start
// time and a copy of the frame (or of its body, when another reader has decompressed it
// already) in a reused record: no parsing, no clock read when now is given, no allocation
// once the Conn's records have grown. Request side only.
func (c *Conn) Begin(f *cql.Frame, now int64) Ticket {
	h := &f.Header
	s := c.t.snap.Load()
	if !s.considers(h) || len(f.Raw()) < cql.HeaderSize {
		return Ticket{}
	}
	if flt := c.t.filter.Load(); flt != nil && !c.match(flt, f) {
		return Ticket{}
	}
	// The trace context decides first when parent-based sampling is on; otherwise it is
	// read only for a request that is traced anyway. A request without a custom payload
	// never pays for it.
	var tc TraceContext
	read := false
	if s.follow && h.Flags&cql.FlagCustomPayload != 0 {
		tc, read = c.t.readContext(f.CustomPayload()), true
	}
	var mode string
	switch {
	case h.Flags&cql.FlagTracing != 0:
		mode = ModeClient
	case tc.Sampled():
		mode = ModeParent
	case s.sample && (s.sampleAll || c.t.rand() < s.sampleBelow):
		mode = ModeSampled
	case s.fast:
		return c.beginFast(s, f, now, &tc, read)
	case s.enabled:
		mode = ModeFull
	default:
		return Ticket{}
	}
	return c.beginEvents(s, f, now, mode, tc, read, nil)
}

// BeginFloor is Begin for a request that the trace floor (Config.FloorInterval) picked:
// it is traced fully, with the node's own trace, and recorded whatever its duration, in
// mode "floor" (or "client" when its client asked for tracing itself), unless the trace
// filter leaves it out. note, when not nil, gets the session's id once it is recorded.
// Request side only.
func (c *Conn) BeginFloor(f *cql.Frame, now int64, note FloorNote) Ticket {
	h := &f.Header
	if !traceable(h.Opcode) || h.Stream < 0 || len(f.Raw()) < cql.HeaderSize {
		return Ticket{}
	}
	if flt := c.t.filter.Load(); flt != nil && !c.match(flt, f) {
		return Ticket{}
	}
	mode := ModeFloor
	if h.Flags&cql.FlagTracing != 0 {
		mode = ModeClient
	}
	return c.beginEvents(c.t.snap.Load(), f, now, mode, TraceContext{}, false, note)
}

// beginEvents starts a request traced with events in mode: its record, the request kept
// whole, and the tracing flag set on the frame for the node when mode asks for the node's
// trace. tc is the request's trace context when read is set.
func (c *Conn) beginEvents(s *snapshot, f *cql.Frame, now int64, mode string, tc TraceContext, read bool, note FloorNote) Ticket {
	h := &f.Header
	if now == 0 {
		now = c.t.now()
	}
	r := c.take()
	seq := r.seq.Add(1)
	r.reset(mode, h, now, s.thresholdUS)
	r.note = note
	if !read && h.Flags&cql.FlagCustomPayload != 0 {
		tc = c.t.readContext(f.CustomPayload())
	}
	r.setContext(&tc)
	r.ctxRead = true
	// Whether to ask the node is read before keep, so that keep copies what asksNode has
	// decompressed or parsed (a BATCH) rather than have it done again.
	ask := nodeTraced(mode) && c.t.asksNode(f)
	// The request is kept as it came, whole, and parsed only when its session is built:
	// most full-mode requests are fast and never recorded (keep).
	c.keep(f, r, math.MaxInt)
	r.parsed = c.t.now()
	if ask {
		f.Raw()[1] |= cql.FlagTracing
	}
	c.traced.Store(c.traced.Load() + 1) // single writer: no locked add needed
	return Ticket{r: r, seq: seq, events: true}
}

// asksNode reports whether the node may be asked to trace the request of f, which the
// sidecar samples: not with Options.NoNodeTracing, and never for a request that carries a
// secret (cql.CarriesSecret), which the node's trace would keep in plain text, readable by
// other logins. An EXECUTE of a statement the sidecar never saw prepared, or a request it
// cannot read, is not asked either: its text is unknown. The sidecar's own session is
// recorded, redacted, either way.
func (t *Tracer) asksNode(f *cql.Frame) bool {
	if t.opts.NoNodeTracing {
		return false
	}
	switch f.Header.Opcode {
	case cql.OpQuery, cql.OpPrepare:
		st, ok := f.Statement()
		return ok && !cql.CarriesSecret(st.Query)
	case cql.OpExecute:
		st, ok := f.Statement()
		return ok && !t.prep.secret(st.ID)
	case cql.OpBatch:
		req, ok := f.Request()
		if !ok {
			return false
		}
		for i := range req.Batch {
			b := &req.Batch[i]
			if b.Prepared && t.prep.secret(b.ID) || !b.Prepared && cql.CarriesSecret(b.Query) {
				return false
			}
		}
	}
	return true
}

// beginFast starts a fast-mode request: its start time and a copy of its frame, or of its
// message when the view holds it decompressed, so that a slow request is never
// decompressed twice. tc is the request's trace context when read is set; otherwise it is
// read here when that is cheap (the body is not compressed, or already decompressed), and
// else left to a slow request's End, which decompresses the copy anyway.
func (c *Conn) beginFast(s *snapshot, f *cql.Frame, now int64, tc *TraceContext, read bool) Ticket {
	h := &f.Header
	if now == 0 {
		now = c.t.now()
	}
	r := c.take()
	r.seq.Add(1)
	r.mode, r.op, r.flags, r.version = ModeFast, h.Opcode, h.Flags, h.ProtoVersion()
	r.start, r.gen = now, s.gen
	c.keep(f, r, c.t.opts.CaptureMax)
	return c.fastContext(f, r, tc, read)
}

// keep copies the request of f into its record, cut to max bytes, for a session built
// later: the request parsed, when another reader parsed it already, so that it is never
// parsed again; else its message, when the view holds it decompressed, so that it is
// never decompressed again; else the frame as it came. A record that is never recorded
// (a request under the threshold) costs a copy, not a parse.
func (c *Conn) keep(f *cql.Frame, r *record, max int) {
	r.comp = f.Compressor()
	src := f.Raw()
	r.plain, r.parsedReq = false, false
	if f.Decompressed() || f.RequestParsed() {
		if msg, err := f.Message(); err == nil {
			src, r.plain = msg, true
		}
	}
	if r.plain && f.RequestParsed() && len(src) <= max {
		req, _ := f.Request()
		r.buf = req.CopyTo(&r.req, r.buf)
		r.parsedReq, r.size, r.trunc = true, len(src), false
		return
	}
	r.size = len(src)
	n := len(src)
	r.trunc = n > max
	if r.trunc {
		n = max
		if f.Header.Flags&cql.FlagCompression != 0 && !r.plain {
			n = cql.HeaderSize // a cut compressed body cannot be read: keep the header
		}
	}
	r.buf = append(r.buf[:0], src[:n]...)
}

// fastContext notes the trace context of a fast-mode request in its record, reading it
// when that is cheap, and returns its Ticket.
func (c *Conn) fastContext(f *cql.Frame, r *record, tc *TraceContext, read bool) Ticket {
	if !read && f.Header.Flags&cql.FlagCustomPayload != 0 && (!f.Compressed() || f.Decompressed()) {
		*tc, read = c.t.readContext(f.CustomPayload()), true
	}
	r.setContext(tc)
	r.ctxRead = read
	return Ticket{r: r, seq: r.seq.Load()}
}

// SetUser attaches the username the client authenticated with (never its password) to
// the connection's sessions. It is safe for concurrent use.
func (c *Conn) SetUser(name string) { c.user.Store(&name) }

// User returns the connection's username, or "".
func (c *Conn) User() string {
	if u := c.user.Load(); u != nil {
		return *u
	}
	return ""
}

// End sees the response to the request of t before the sidecar forwards it, through the
// view f that the sidecar decoded the frame into, and returns the frame to forward and the
// Ticket that Done takes. The frame is f.Raw() or, for a sampled request whose client did
// not ask for tracing, the frame without the tracing id (length fixed): for an uncompressed
// body, the end of f.Raw(), rewritten in place (so the caller must forward what End returns,
// not f.Raw()); for a compressed one, a copy with the body re-compressed, in a buffer owned
// by c that stays valid until the next End. f is then replaced by a view of that frame, so
// that later readers see what is forwarded. now, from Now, is the response's arrival; 0
// makes End read the clock when it needs it.
//
// For a zero Ticket it is one compare. In fast mode it reads the clock (unless now is
// given), and a slow request is decoded and recorded here; the returned Ticket is zero. A
// request traced with events returns its Ticket: the caller calls Done after the write that
// carried the response. Response side only.
func (c *Conn) End(t Ticket, f *cql.Frame, now int64) ([]byte, Ticket) {
	r := t.r
	if r == nil {
		return f.Raw(), Ticket{}
	}
	if !t.events {
		if s := c.t.snap.Load(); r.gen == s.gen && s.enabled && len(f.Raw()) >= cql.HeaderSize {
			if now == 0 {
				now = c.t.now()
			}
			d := now - r.start
			if slow(d/1000, s.thresholdUS) {
				c.recordFast(r, d, f)
			}
		}
		c.release(r)
		return f.Raw(), Ticket{}
	}
	if len(f.Raw()) < cql.HeaderSize {
		return f.Raw(), t
	}
	if now == 0 {
		now = c.t.now()
	}
	return c.respond(r, f, now), t
}

// Done notes that the response of t went out to the client at at (from Now; 0 reads the
// clock) and completes its session. Call it after the write that carried the frame End
// returned; it does nothing for a zero Ticket. Response side only.
func (c *Conn) Done(t Ticket, at int64) {
	if !t.events {
		return
	}
	if at == 0 {
		at = c.t.now()
	}
	t.r.respSent = at
	c.finish(t.r)
}

// slow reports whether a request of durUS microseconds is slow: strictly above the
// threshold, and always with threshold 0 (which "logs everything").
func slow(durUS, thresholdUS int64) bool { return durUS > thresholdUS || thresholdUS == 0 }

// recordFast builds and records the session of a slow fast-mode request.
func (c *Conn) recordFast(r *record, d int64, f *cql.Frame) {
	c.t.tracedResp.Add(1)
	ps, view := c.decodeKept(r)
	if !r.ctxRead && view && r.flags&cql.FlagCustomPayload != 0 {
		tc := c.t.readContext(c.fast.CustomPayload())
		r.setContext(&tc)
	}
	if r.trunc {
		ps["truncated"] = "request of " + itoa(r.size) + " bytes, " + itoa(len(r.buf)) + " kept"
	}
	ri := readResponse(f)
	end := time.Now()
	sess := &Session{
		ID:          formatUUID(cql.NewTimeUUID(end.Add(-time.Duration(d)))),
		StartedAt:   end.Add(-time.Duration(d)),
		DurationUS:  d / 1000,
		Client:      c.client,
		Username:    c.User(),
		Coordinator: c.coordinator,
		Command:     r.op.String(),
		Request:     requestName(r.op),
		Mode:        ModeFast,
		Parameters:  ps,
		Events:      []Event{},
		Error:       ri.err,
	}
	r.annotate(sess)
	c.exemplar(r.op, d, sess)
	c.t.record(sess)
}

// respond notes the response of a request traced with events, and strips the tracing id
// its client did not ask for.
func (c *Conn) respond(r *record, f *cql.Frame, now int64) []byte {
	r.responded = now
	// The node answered, so the request went out, even if the sidecar's notice (Sent) is
	// still on its way from the request side: place the event at the hand-off.
	r.sent.CompareAndSwap(0, r.parsed)
	ri := readResponse(f)
	r.err = ri.err
	r.nodeID, r.hasNodeID = ri.tracingID, ri.hasTracingID
	r.rows = responseRows(f)
	if nodeTraced(r.mode) && ri.hasTracingID {
		return c.stripTracingID(f)
	}
	return f.Raw()
}

// stripTracingID returns the frame of f without the 16-byte tracing id at the start of its
// body and without FlagTracing, and makes f a view of that frame. An uncompressed frame is
// changed in place, in the only bytes that change: its header moves 16 bytes on, over the
// id, and the frame is the end of f.Raw(). A compressed body was decompressed by
// readResponse; it is re-compressed here, into c.out.
func (c *Conn) stripTracingID(f *cql.Frame) []byte {
	frame := f.Raw()
	body, err := f.Body()
	if err != nil || len(body) < 16 {
		return frame
	}
	comp := f.Compressor()
	if comp == nil {
		out := frame[16:]
		copy(out[:cql.HeaderSize], frame[:cql.HeaderSize])
		out[1] &^= cql.FlagTracing
		cql.SetBodyLength(out, len(out)-cql.HeaderSize)
		f.Replace(out, nil) // its body is out's own
		return out
	}
	out := append(c.out[:0], frame[:cql.HeaderSize]...)
	out[1] &^= cql.FlagTracing
	if out, err = comp.Compress(out, body[16:]); err != nil {
		c.t.log.Warn().Err(err).Msg("re-compress response without tracing id; forwarding it unchanged")
		return frame
	}
	cql.SetBodyLength(out, len(out)-cql.HeaderSize)
	if cap(out) <= maxKeptScratch {
		c.out = out
	} else {
		c.out = nil // valid for the caller until the GC takes it
	}
	f.Replace(out, body[16:])
	return out
}

// session builds the session record of a request traced with events that ended at end
// (from Now), d after it started: its parameters, decoded from the body its record kept,
// and its events. Only a session that is recorded is built.
func (c *Conn) session(r *record, end, d int64) *Session {
	now := c.t.now()
	wallEnd := time.Now().Add(-time.Duration(now - end))
	started := wallEnd.Add(-time.Duration(d))

	ps, _ := c.decodeKept(r)
	if r.rows >= 0 {
		ps["returned_rows"] = itoa(r.rows)
	}
	evs := make([]Event, 0, 5)
	add := func(activity string, at int64) {
		if at != 0 {
			evs = append(evs, Event{Activity: activity, Source: SourceSidecar, SourceElapsedUS: (at - r.start) / 1000})
		}
	}
	add(EventReceived, r.start)
	add(EventParsed, r.parsed)
	add(EventSentToNode, r.sent.Load())
	add(EventNodeResponded, r.responded)
	add(EventResponseSent, r.respSent)

	id := cql.NewTimeUUID(started)
	if r.hasNodeID {
		id = r.nodeID // the node's session id, so the two traces match
	}
	return &Session{
		ID:          formatUUID(id),
		StartedAt:   started,
		DurationUS:  d / 1000,
		Client:      c.client,
		Username:    c.User(),
		Coordinator: c.coordinator,
		Command:     r.op.String(),
		Request:     requestName(r.op),
		Mode:        r.mode,
		Parameters:  ps,
		Events:      evs,
		Error:       r.err,
	}
}

// finish builds the session of a request traced with events, records it when it is slow,
// or sampled, or the client's own, and releases the record.
func (c *Conn) finish(r *record) {
	end := r.respSent
	if end == 0 {
		end = r.responded
	}
	d := end - r.start
	if f := c.t.opts.AddedLatency; f != nil {
		if sent := r.sent.Load(); sent != 0 && r.responded >= sent {
			f(time.Duration(d - (r.responded - sent)))
		}
	}
	if r.mode == ModeFull && !slow(d/1000, r.thresholdUS) {
		c.release(r)
		return
	}
	if w := c.t.opts.Work; w != nil {
		mark := w.Begin()
		defer w.End(mark)
	}
	sess := c.session(r, end, d)
	r.annotate(sess)
	c.exemplar(r.op, d, sess)
	sess.note = r.note // told once the session is recorded, with its node events
	nodeID, hasNodeID := r.nodeID, r.hasNodeID
	c.release(r)
	c.t.submit(sess, nodeID, hasNodeID)
}

// exemplar hands a recorded session that continues a caller's trace to Options.Exemplar.
func (c *Conn) exemplar(op cql.Opcode, d int64, s *Session) {
	if f := c.t.opts.Exemplar; f != nil && s.TraceID != "" {
		f(op, time.Duration(d), s.TraceID)
	}
}

// Close ends the connection's tracing: sessions of requests still in flight are dropped,
// and its counter goes to the Tracer's totals. It is safe for concurrent use and
// idempotent.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		t := c.t
		t.connMu.Lock()
		delete(t.conns, c)
		t.retired.traced += c.traced.Load()
		t.connMu.Unlock()
	})
}

// match reports whether the request of the view f on c passes flt. It reads the
// statement from the view only when flt needs it.
func (c *Conn) match(flt *Filter, f *cql.Frame) bool {
	h := &f.Header
	if flt.op != 0 && h.Opcode != flt.op {
		return false
	}
	if flt.Client.IsValid() && !flt.Client.Contains(c.clientAddr) {
		return false
	}
	if flt.User != "" && c.User() != flt.User {
		return false
	}
	if flt.Keyspace == "" && flt.Table == "" && flt.Statement == "" {
		return true
	}
	st, ok := f.Statement()
	if !ok {
		return false
	}
	text, id := string(st.Query), st.ID
	if id != nil {
		text, _ = c.t.prep.get(id)
	}
	norm, _ := cql.NormalizeQuery(text, false, 0)
	if flt.Keyspace != "" || flt.Table != "" {
		ks, table := statements.Target(norm)
		if flt.Keyspace != "" && ks != flt.Keyspace || flt.Table != "" && table != flt.Table {
			return false
		}
	}
	switch {
	case flt.id != nil:
		return bytes.Equal(id, flt.id)
	case flt.sub != "":
		return strings.Contains(norm, flt.sub)
	}
	return true
}

// decodeKept builds the parameters of a request whose session is recorded from what its
// record kept (Conn.keep): the request, when another reader had parsed it already and
// Begin copied it, or else a copy of the frame (decompressed here, when the sidecar had
// not) or of its message, parsed here. A fast-mode copy may be truncated; what could be
// read is kept. view reports whether c.fast is now a view of the copied frame, whose
// custom payload can be read. Response side only.
func (c *Conn) decodeKept(r *record) (ps map[string]string, view bool) {
	m := make(map[string]string, 6)
	req := &r.req
	switch {
	case r.parsedReq:
	case r.plain:
		req.Parse(r.op, r.version, r.buf)
	default:
		h, err := cql.ParseHeader(r.buf)
		if err != nil {
			m["decode_error"] = err.Error()
			return m, false
		}
		if c.fast == nil {
			c.fast = new(cql.Frame)
		}
		c.fast.Reset(h, r.buf, r.comp)
		req, _ = c.fast.Request()
		view = true
	}
	c.t.params(m).request(req)
	if req.Err != nil {
		m["decode_error"] = req.Err.Error()
	}
	return m, view
}
