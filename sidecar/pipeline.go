package sidecar

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// The per-frame work of the proxy, apart from the transport that reads and writes the
// bytes: what is done to one request frame before it is forwarded (request), and to one
// response frame (response). Both paths, the goroutine path and the event loop, call these.

// request does the proxy's work on a request frame of n bytes before it is forwarded: it
// reads what the rewrite needs, hands the request to tracing, records it in flight with its
// tracing Ticket (the one per-request record), and counts it. frame is the whole frame, or
// nil when it is streamed through unread. Both the goroutine path and the event loop call
// it, from the one place that reads the client. It returns the Ticket when the request is
// traced with events: the caller passes it to wrote once the frame is written; and the
// effect of the request on the framing, which the caller applies (conn.apply).
//
// The frame is decoded once, into c.views.req, which every reader of it shares: the rewrite,
// statement statistics and tracing. None decompresses or re-walks the body on its own.
//
// arrived is when the read that brought the frame returned, or 0: the event loop reads the
// clock once per read (arrival), for every request that read delivered, as for responses;
// with 0 the request reads the clock itself when it needs it.
func (c *pipeline) request(h cql.Header, frame []byte, n int, arrived int64) (tracing.Ticket, effect) {
	f := &c.views.req
	f.Reset(h, frame, c.compressor())
	var req inflight
	var now int64
	var fx effect
	if frame != nil {
		req.kind, req.stmt, req.probe, fx = c.inspect(f)
		if h.Opcode == cql.OpPrepare && h.Stream >= 0 {
			if st, ok := f.Statement(); ok {
				req.query = string(st.Query)
			}
		}
		if st := c.p.stmts; st != nil && h.Stream >= 0 && (h.Opcode == cql.OpPrepare || st.Enabled()) {
			now = readTime(arrived)
			req.start = now
			req.stat = st.Request(f, now)
		}
	}
	// One clock read serves the latency metric, statement statistics and fast-mode
	// tracing.
	if h.Stream >= 0 {
		req.stream, req.op = h.Stream, h.Opcode
		if c.p.metrics != nil && now == 0 {
			now = readTime(arrived)
			req.start = now
		}
		// The capture parses the request: it goes before tracing, whose fast mode then
		// keeps the request parsed rather than parse a copy of it again when it is slow.
		if cp := c.p.capture; cp != nil {
			if s := cp.Active(); s != nil {
				if now == 0 {
					now = readTime(arrived)
					req.start = now
				}
				req.capt = c.captureRequest(s, f, now, n)
			}
		}
		if t := c.p.tr; t != nil && t.Considers(&f.Header) {
			req.trace = c.traceConn().Begin(f, now)
		}
		c.streams.put(&req)
	}
	// The one request counter: metrics and tracing read it (Proxy.New).
	inc(&c.counters.requests[requestSlot(h.Opcode)], 1)
	inc(&c.counters.bytesIn, uint64(n))
	if c.p.logs(zerolog.DebugLevel) {
		if e := c.debug(); e != nil {
			e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg("request")
		}
	}
	if req.trace.Events() {
		return req.trace, fx
	}
	return tracing.Ticket{}, fx
}

// response does the proxy's work on a response frame for the request req (zero for events
// and unknown streams): the end of the handshake, statement statistics, tracing, learning
// prepared statements, and the rewrite of SUPPORTED, system tables and events. It returns
// the frame to forward, which is frame itself unless it was rewritten (frame is nil for a
// frame streamed through unread), and the tracing Ticket that the caller passes to wrote
// once the frame is written, when the request is traced with events. arrived is when the
// read that brought it returned (0 without metrics or statement statistics). The caller
// calls queued once the frame is queued for the client.
//
// Like a request, the response is decoded once, into c.views.resp, for every reader.
func (c *pipeline) response(h cql.Header, frame []byte, req *inflight, arrived int64) ([]byte, tracing.Ticket) {
	f := &c.views.resp
	f.Reset(h, frame, c.compressor())
	if h.Stream >= 0 {
		c.noteHandshake(h.Opcode)
	}
	if req.stat.Active() {
		c.p.stmts.Response(req.stat, f, arrived)
	}
	out := frame
	var done tracing.Ticket
	if req.trace.Traced() {
		out, done = c.tr.Load().End(req.trace, f, arrived)
	}
	switch {
	case frame == nil:
	case req.op == cql.OpPrepare && req.used:
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
	inc(&c.counters.responses, 1)
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

// queued records the metrics of a response once it is queued for the client: the second
// clock read of a request, after the one at its arrival. The added latency is the
// response's way through the sidecar (its wait behind earlier frames of the same read,
// tracing, rewriting, the copy into the client's buffer); the request's way in is not
// measured, to keep to these reads. arrived is when the read that brought the response
// from the node returned.
func (c *pipeline) queued(req inflight, arrived int64) {
	if m := c.p.metrics; m != nil && req.used {
		now := tracing.Now()
		m.Latency(req.op, time.Duration(now-req.start))
		m.AddedLatency(time.Duration(now - arrived))
	}
}

// readsBody reports whether the proxy itself reads the body of requests with opcode op.
func (c *pipeline) readsBody(op cql.Opcode) bool {
	switch op {
	case cql.OpStartup, cql.OpQuery, cql.OpPrepare:
		return true
	case cql.OpExecute:
		return c.p.prepared.HasSystem() || c.p.stmts != nil && c.p.stmts.Enabled()
	case cql.OpBatch:
		return c.p.stmts != nil && c.p.stmts.Enabled()
	}
	return false
}

// maxKeptBuffer is the largest scratch buffer kept between frames; a larger one, grown for
// a rare large frame, is released so that an idle connection stays small.
const maxKeptBuffer = 1 << 20

// inspect reads what the proxy needs from a request: the compression of a STARTUP, and
// whether a QUERY, PREPARE or EXECUTE reads system.local or system.peers. Its effect is
// what the request asks of the transport: the segments of a v5 STARTUP, or the fresh CRC
// of a frame changed in place (the probe of an EXECUTE).
func (c *pipeline) inspect(f *cql.Frame) (k rewriteKind, ps *tracing.Statement, probe string, fx effect) {
	switch f.Header.Opcode {
	case cql.OpStartup:
		fx = c.startup(f.Raw()[cql.HeaderSize:])
	case cql.OpOptions:
		k = kindOptions
	case cql.OpAuthResponse:
		if c.p.tr != nil {
			c.authResponse(f)
		}
	case cql.OpQuery, cql.OpPrepare:
		k, ps, probe = c.inspectQuery(f)
	case cql.OpExecute:
		k, ps, probe = c.inspectExecute(f)
		if k == kindProbe {
			fx = fxEdited // its skip-metadata bit, cleared in place
		}
	}
	return k, ps, probe, fx
}

// inspectQuery reads whether a QUERY or PREPARE reads a system table, or is a USE. A
// compressed QUERY is read from the start of its body first, and whole only when the
// answer lies beyond that start.
func (c *pipeline) inspectQuery(f *cql.Frame) (rewriteKind, *tracing.Statement, string) {
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
func (c *pipeline) inspectExecute(f *cql.Frame) (rewriteKind, *tracing.Statement, string) {
	known := c.p.prepared.HasSystem()
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
		if ps := c.p.prepared.Lookup(st.ID); ps != nil && ps.System != 0 {
			return rewriteKind(ps.System), ps, ""
		}
	}
	if found, full := c.p.checked.has(st.ID); found || full {
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
func (c *pipeline) queryStart(f *cql.Frame) (k rewriteKind, known bool, sc scan) {
	if f.Header.Flags&cql.FlagCustomPayload != 0 {
		return kindNone, false, sc
	}
	p := f.Start(queryPrefix)
	if len(p) < 4 {
		return kindNone, true, sc
	}
	n := int(int32(binary.BigEndian.Uint32(p)))
	if n < 0 {
		return kindNone, true, sc
	}
	if q := p[4:]; n <= len(q) {
		return statementTable(q[:n], c.inSystem.Load()), true, sc
	}
	return statementStart(p[4:], c.inSystem.Load(), true)
}

// authResponse takes the username from a SASL PLAIN AUTH_RESPONSE ("authzid NUL authcid
// NUL password") for the connection's trace records. Only the username is copied; a
// decompressed copy of the token, which holds the password, is zeroed.
func (c *pipeline) authResponse(f *cql.Frame) {
	body, err := f.Message()
	if err != nil {
		return
	}
	if f.Compressed() {
		defer clear(body)
	}
	if user, ok := saslPlainUser(body); ok {
		c.traceConn().SetUser(user)
	}
}

// saslPlainUser returns the authcid of a SASL PLAIN token held in an AUTH_RESPONSE body.
func saslPlainUser(body []byte) (string, bool) {
	if len(body) < 4 {
		return "", false
	}
	n := int(int32(binary.BigEndian.Uint32(body)))
	if n < 0 || n > len(body)-4 {
		return "", false
	}
	tok := body[4 : 4+n]
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
func (c *pipeline) startup(body []byte) effect {
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
	if c.version == cql.V5 {
		if i == 1 { // v5 compresses segments, never frames
			return fxSegments | fxSegmentsLZ4
		}
		return fxSegments
	}
	c.comp.Store(i)
	return 0
}
