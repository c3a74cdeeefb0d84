package pipeline

import (
	"bytes"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
)

// The per-frame work of the proxy, apart from the transport that reads and writes the
// bytes: what is done to one request frame before it is forwarded (request), and to one
// response frame (response). Both paths, the goroutine path and the event loop, call these.

// Request does the proxy's work on a Request frame of n bytes before it is forwarded: it
// reads what the rewrite needs, hands the Request to tracing, records it in flight with its
// tracing Ticket (the one per-Request record), and counts it. frame is the whole frame, or
// nil when it is streamed through unread. Both the goroutine path and the event loop call
// it, from the one place that reads the client. It returns the Ticket when the Request is
// traced with events: the caller passes it to wrote once the frame is written; and the
// effect of the Request on the framing, which the caller applies (conn.apply).
//
// The frame is decoded once, into c.views.req, which every reader of it shares: the rewrite,
// statement statistics and tracing. None decompresses or re-walks the body on its own.
//
// read is the time of the read that brought the frame, shared by every Request that read
// delivered (the event loop's: one clock read per read, as for responses): 0 until a
// Request of the read needs it, when it is set (requestArrival). With nil (the goroutine
// path's), the Request reads the clock itself when it needs it.
func (c *Conn) Request(h cql.Header, frame []byte, n int, read *int64) (tracing.Ticket, Effect) {
	var arrived int64
	if read != nil {
		*read = c.requestArrival(*read)
		arrived = *read
	}
	f := &c.Views.req
	f.Reset(h, frame, c.compressor())
	var req Inflight
	var now int64
	var fx Effect
	if frame != nil {
		req.kind, req.stmt, req.probe, fx = c.inspect(f)
		if sc := c.shard.Load(); sc != nil && h.Opcode == cql.OpExecute {
			c.sh.countShard(f, sc)
		}
		if h.Opcode == cql.OpPrepare && h.Stream >= 0 {
			if st, ok := f.Statement(); ok {
				req.query = string(st.Query)
			}
		}
		if st := c.sh.Statements; st != nil && h.Stream >= 0 && (h.Opcode == cql.OpPrepare || st.Active()) {
			now = readTime(arrived)
			req.Start = now
			req.stat = st.Request(f, now)
		}
	}
	// One clock read serves the latency metric, statement statistics and fast-mode
	// tracing.
	if h.Stream >= 0 {
		req.Stream, req.Op = h.Stream, h.Opcode
		if c.sh.Metrics != nil && now == 0 {
			now = readTime(arrived)
			req.Start = now
		}
		if frame != nil && auditOn(c.sh) {
			if now == 0 {
				now = readTime(arrived)
				req.Start = now
			}
			req.aud = c.audit.request(c, f, now)
		}
		// The capture parses the request: it goes before tracing, whose fast mode then
		// keeps the request parsed rather than parse a copy of it again when it is slow.
		if cp := c.sh.Capture; cp != nil {
			if s := cp.Active(); s != nil {
				if now == 0 {
					now = readTime(arrived)
					req.Start = now
				}
				req.capt = c.captureRequest(s, f, now, n)
			}
		}
		if t := c.sh.Tracer; t != nil {
			if e := req.stat.Floor(); e != nil {
				req.trace = c.traceConn().BeginFloor(f, now, e)
			} else if t.Considers(&f.Header) {
				req.trace = c.traceConn().Begin(f, now)
			}
		}
		c.Streams.put(&req)
	}
	// The one request counter: metrics and tracing read it (Proxy.New).
	inc(&c.Counters.Requests[RequestSlot(h.Opcode)], 1)
	inc(&c.Counters.BytesIn, uint64(n))
	if c.sh.Logs(zerolog.DebugLevel) {
		if e := c.Debug(); e != nil {
			e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg("request")
		}
	}
	if req.trace.Events() {
		return req.trace, fx
	}
	return tracing.Ticket{}, fx
}

// Response does the proxy's work on a Response frame for the request req (zero for events
// and unknown streams): the end of the handshake, statement statistics, tracing, learning
// prepared statements, and the rewrite of SUPPORTED, system tables and events. It returns
// the frame to forward, which is frame itself unless it was rewritten (frame is nil for a
// frame streamed through unread), and the tracing Ticket that the caller passes to wrote
// once the frame is written, when the request is traced with events. read is the time of
// the read that brought it, shared by every frame that read delivered: 0 until a frame of
// the read needs it, when it is set (arrival); the caller passes it on to Queued once the
// frame is queued for the client.
//
// Like a request, the Response is decoded once, into c.views.resp, for every reader.
func (c *Conn) Response(h cql.Header, frame []byte, req *Inflight, read *int64) ([]byte, tracing.Ticket) {
	*read = c.arrival(*read, req)
	arrived := *read
	f := &c.Views.resp
	f.Reset(h, frame, c.compressor())
	if h.Stream >= 0 {
		c.noteHandshake(h.Opcode)
		if req.Op == cql.OpAuthResponse && h.Opcode == cql.OpAuthSuccess {
			c.audit.loggedIn()
		}
	}
	if req.aud != nil {
		c.audit.response(c, f, req.aud)
	}
	if req.stat.Active() {
		c.sh.Statements.Response(req.stat, f, arrived)
	}
	out := frame
	var done tracing.Ticket
	if req.trace.Traced() {
		out, done = c.tr.Load().End(req.trace, f, arrived)
	}
	switch {
	case frame == nil:
	case req.Op == cql.OpPrepare && req.Used:
		if h.Opcode == cql.OpResult {
			c.learnPrepared(f, *req)
		}
	case req.kind == kindOptions:
		out = c.rewriteSupported(f)
	case req.kind != kindNone:
		out = c.rewriteResult(f, *req)
	case h.Stream < 0 && h.Opcode == cql.OpEvent:
		out = c.rewriteEvent(f)
	}
	if req.capt != nil {
		captureResponse(req.capt, f, arrived)
	}
	inc(&c.Counters.Responses, 1)
	return out, done
}

// readTime returns arrived, when the read that brought a frame returned, or the time now
// when it is 0.
func readTime(arrived int64) int64 {
	if arrived != 0 {
		return arrived
	}
	return tracing.Now()
}

// Queued records the metrics of a response once it is Queued for the client: the second
// clock read of a request, after the one at its arrival. The added latency is the
// response's way through the sidecar (its wait behind earlier frames of the same read,
// tracing, rewriting, the copy into the client's buffer); the request's way in is not
// measured, to keep to these reads. arrived is when the read that brought the response
// from the node returned.
func (c *Conn) Queued(req Inflight, arrived int64) {
	if m := c.sh.Metrics; m != nil && req.Used {
		now := tracing.Now()
		m.Latency(req.Op, time.Duration(now-req.Start))
		m.AddedLatency(time.Duration(now - arrived))
		c.Shard().Added(1, now-arrived)
	}
}

// readsBody reports whether the proxy itself reads the body of requests with opcode op.
func (c *Conn) readsBody(op cql.Opcode) bool {
	switch op {
	case cql.OpStartup, cql.OpQuery, cql.OpPrepare:
		return true
	case cql.OpExecute:
		return c.sh.Prepared.HasSystem() || c.sh.Statements != nil && c.sh.Statements.Active() || c.shard.Load() != nil
	case cql.OpBatch:
		return c.sh.Statements != nil && c.sh.Statements.Active()
	}
	return false
}

// inspect reads what the proxy needs from a request: the compression of a STARTUP, and
// whether a QUERY, PREPARE or EXECUTE reads system.local or system.peers. Its effect is
// what the request asks of the transport: the segments of a v5 STARTUP, or the fresh CRC
// of a frame changed in place (the probe of an EXECUTE).
func (c *Conn) inspect(f *cql.Frame) (k rewriteKind, ps *tracing.Statement, probe string, fx Effect) {
	switch f.Header.Opcode {
	case cql.OpStartup:
		fx = c.startup(f.Raw()[cql.HeaderSize:])
	case cql.OpOptions:
		k = kindOptions
	case cql.OpAuthResponse:
		c.authResponse(f)
	case cql.OpQuery, cql.OpPrepare:
		k, ps, probe = c.inspectQuery(f)
	case cql.OpExecute:
		k, ps, probe = c.inspectExecute(f)
		if k == kindProbe {
			fx = FxEdited // its skip-metadata bit, cleared in place
		}
	}
	return k, ps, probe, fx
}

// inspectQuery reads whether a QUERY or PREPARE reads a system table, or is a USE. A
// compressed QUERY is read from the start of its body first, and whole only when the
// answer lies beyond that start.
func (c *Conn) inspectQuery(f *cql.Frame) (rewriteKind, *tracing.Statement, string) {
	h := f.Header
	var sc scan // how far the start of a compressed QUERY was read
	if h.Opcode == cql.OpQuery && f.Compressed() {
		k, known, s := c.queryStart(f)
		if known {
			return k, nil, ""
		}
		sc = s
	}
	st, ok := f.Statement()
	if !ok {
		return kindNone, nil, ""
	}
	k, _, _ := statementScan(st.Query, c.inSystem.Load(), -1, sc)
	switch {
	case k == kindUse && h.Opcode == cql.OpPrepare:
		k = kindNone
	case k != kindNone && k != kindUse && h.Opcode == cql.OpPrepare:
		k |= kindPrepare
	}
	return k, nil, ""
}

// inspectExecute returns what the response to an EXECUTE needs: the rewrite of a known
// system statement (from the prepared-statement registry), a probe of an id not seen
// before (with that id), or nothing.
func (c *Conn) inspectExecute(f *cql.Frame) (rewriteKind, *tracing.Statement, string) {
	known := c.sh.Prepared.HasSystem()
	if f.Compressed() && !known {
		// A compressed body cannot be changed in place, so it is not probed, and
		// decompressing every EXECUTE to look for known ids would cost the hot path.
		return kindNone, nil, ""
	}
	st, ok := f.Statement()
	if !ok {
		return kindNone, nil, ""
	}
	if known {
		if ps := c.sh.Prepared.Lookup(st.ID); ps != nil && ps.System != 0 {
			return rewriteKind(ps.System), ps, ""
		}
	}
	if found, full := c.sh.checked.has(st.ID); found || full {
		return kindNone, nil, ""
	}
	if st.FlagsAt < 0 {
		return kindNone, nil, ""
	}
	// Ask for the result metadata, to learn from it whether the statement reads a system
	// table: the frame is changed in place, as it is forwarded.
	f.Raw()[st.FlagsAt] &^= cql.QuerySkipMetadata
	return kindProbe, nil, string(st.ID)
}

// queryPrefix is how much of a compressed QUERY body inspect decompresses first: the
// [long string] length of the statement, then room for its first words, up to the table
// after the FROM of most SELECTs.
const queryPrefix = 128

// queryStart reads what the rewrite needs from the start of a compressed QUERY body: known
// is false when the answer lies beyond it (a SELECT whose table is named further on, a
// comment longer than the start, a custom payload before the statement), and the body must
// be read whole, its statement from sc on. A body whose start cannot be read is left to the
// node: kindNone.
func (c *Conn) queryStart(f *cql.Frame) (k rewriteKind, known bool, sc scan) {
	if f.Header.Flags&cql.FlagCustomPayload != 0 {
		return kindNone, false, sc
	}
	q, whole, ok := f.QueryStart(queryPrefix)
	switch {
	case !ok:
		return kindNone, true, sc
	case whole:
		return statementTable(q, c.inSystem.Load()), true, sc
	}
	return statementStart(q, c.inSystem.Load(), true)
}

// authResponse takes the username from a SASL PLAIN AUTH_RESPONSE ("authzid NUL authcid
// NUL password") for the connection's trace records and its audit records (the login's,
// and once the node accepts it every later one's). Only the username is copied; a
// decompressed copy of the token, which holds the password, is zeroed. It runs once per
// login, whether tracing and the audit log are on or not, so that a log turned on later
// knows the connection's user.
func (c *Conn) authResponse(f *cql.Frame) {
	body, err := f.Message()
	if err != nil {
		return
	}
	if f.Compressed() {
		defer clear(body)
	}
	if user, ok := saslPlainUser(body); ok {
		c.audit.tried.Store(&user)
		if c.sh.Tracer != nil {
			c.traceConn().SetUser(user)
		}
	}
}

// saslPlainUser returns the authcid of a SASL PLAIN token held in an AUTH_RESPONSE body.
func saslPlainUser(body []byte) (string, bool) {
	var d cql.Decoder
	d.Reset(body)
	tok := d.Bytes()
	if d.Err() != nil || tok == nil {
		return "", false
	}
	i := bytes.IndexByte(tok, 0)
	if i < 0 {
		return "", false
	}
	rest := tok[i+1:]
	j := bytes.IndexByte(rest, 0)
	if j <= 0 {
		return "", false
	}
	return string(rest[:j]), true
}

// startup notes the compression that a STARTUP asks for. Its body is never compressed. A
// v5 STARTUP returns the segments, which the transport begins (conn.beginV5).
func (c *Conn) startup(body []byte) Effect {
	name, err := cql.StartupCompression(body)
	if err != nil {
		return 0 // the node answers it
	}
	var i int32
	switch comp := cql.CompressorByName(string(name)); {
	case comp == nil:
	case comp.Name() == "lz4":
		i = 1
	case comp.Name() == "snappy":
		i = 2
	}
	if c.Version == cql.V5 {
		if i == 1 { // v5 compresses segments, never frames
			return FxSegments | FxSegmentsLZ4
		}
		return FxSegments
	}
	c.comp.Store(i)
	return 0
}

// ReadsRequest reports whether a client frame with header h, too large for the transport's
// read buffer, is read whole for the work on it rather than streamed through unread.
func (c *Conn) ReadsRequest(h cql.Header) bool {
	return c.sh.Tracer != nil || c.readsBody(h.Opcode) || auditOn(c.sh)
}

// ReadsResponse reports whether a node frame with header h, answering req and too large
// for the transport's read buffer, is read whole rather than streamed through unread.
func (c *Conn) ReadsResponse(h cql.Header, req *Inflight) bool {
	event := h.Stream < 0 && h.Opcode == cql.OpEvent
	return c.sh.Tracer != nil || req.kind != kindNone || event || req.stat.WantsBody(h.Opcode) ||
		req.aud != nil && h.Opcode == cql.OpError
}

// arrival returns when the response to req arrived: arrived, the time of the read from the
// node that brought it, or now when that time was not read yet and metrics or the
// statement statistics of req need it. The transport keeps the time for the read: every
// frame that read delivered shares one clock read. It is the response time that tracing
// and statement statistics see, and the start of the added latency.
func (c *Conn) arrival(arrived int64, req *Inflight) int64 {
	if arrived == 0 && (req.stat.Active() || c.sh.Metrics != nil) {
		return tracing.Now()
	}
	return arrived
}

// requestArrival returns when the read from the client that brought requests returned:
// arrived, or now when that time was not read yet and metrics or statement statistics
// need it. Every request that read delivered shares one clock read.
func (c *Conn) requestArrival(arrived int64) int64 {
	if arrived == 0 && (c.sh.Statements != nil || c.sh.Metrics != nil) {
		return tracing.Now()
	}
	return arrived
}

// The workload capture's hooks on the per-frame pipeline (this file): with no capture
// running they cost one atomic load per request (Capture.Active) and nothing per
// response; while one runs, the request and its response are handed to it through the
// views the pipeline decoded them into.

// captureRequest hands the request in f, of n bytes, arrived at now (0: not read yet), to
// the running capture s, and returns its record for the stream table.
func (c *Conn) captureRequest(s *capture.Session, f *cql.Frame, now int64, n int) *capture.Record {
	if c.capt.sess != s {
		c.capt.sess, c.capt.id = s, s.NewConn()
	}
	if now == 0 {
		now = tracing.Now()
	}
	return s.Request(f, c.capt.id, c.capt.keyspace.Load(), now, n)
}

// captureResponse hands the response in f, arrived at arrived (0: not read yet), to the
// capture of its request's record r.
func captureResponse(r *capture.Record, f *cql.Frame, arrived int64) {
	if arrived == 0 {
		arrived = tracing.Now()
	}
	r.Response(f, arrived)
}
