package sidecar

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// The per-frame work of the proxy, apart from the transport that reads and writes the
// bytes: what is done to one request frame before it is forwarded (request), and to one
// response frame (response). Both paths, the goroutine path and the event loop, call these.

// request does the proxy's work on a request frame of n bytes before it is forwarded: it
// reads what the rewrite needs, hands the request to tracing, records it in flight with its
// tracing Ticket (the one per-request record), and counts it. frame is the whole frame, or
// nil when it is streamed through unread. Both the goroutine path and the event loop call
// it, from the one place that reads the client. It returns the Ticket when the request is
// traced with events: the caller passes it to wrote once the frame is written.
func (c *conn) request(h cql.Header, frame []byte, n int) tracing.Ticket {
	var req inflight
	var now int64
	if frame != nil {
		req.kind, req.stmt, req.probe = c.inspect(h, frame)
		if h.Opcode == cql.OpPrepare && h.Stream >= 0 {
			req.query = prepareQuery(c.inspected)
		}
		if st := c.p.stmts; st != nil && h.Stream >= 0 && (h.Opcode == cql.OpPrepare || st.Enabled()) {
			now = tracing.Now()
			req.start = now
			req.stat = st.Request(h, c.statBody(h, frame), now)
		}
		if cap(c.reqBody) > maxKeptBuffer {
			c.reqBody = nil
		}
	}
	// One clock read serves the latency metric, statement statistics and fast-mode
	// tracing.
	if h.Stream >= 0 {
		req.stream, req.op = h.Stream, h.Opcode
		if c.p.metrics != nil && now == 0 {
			now = tracing.Now()
			req.start = now
		}
		if c.tr != nil {
			req.trace = c.tr.Begin(h, frame, c.compressor(), now)
		}
		c.streams.put(req)
	}
	// The one request counter: metrics and tracing read it (Proxy.New).
	inc(&c.counters.requests[min(int(h.Opcode), 31)], 1)
	inc(&c.counters.bytesIn, uint64(n))
	if e := c.log.Debug(); e != nil {
		e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg("request")
	}
	if req.trace.Events() {
		return req.trace
	}
	return tracing.Ticket{}
}

// prepareQuery returns the query text of a PREPARE body (decompressed, without custom
// payload), or "" when it cannot be read.
func prepareQuery(body []byte) string {
	if len(body) < 4 {
		return ""
	}
	n := int(int32(binary.BigEndian.Uint32(body)))
	if n < 0 || n > len(body)-4 {
		return ""
	}
	return string(body[4 : 4+n])
}

// response does the proxy's work on a response frame for the request req (zero for events
// and unknown streams): the end of the handshake, statement statistics, tracing, learning
// prepared statements, and the rewrite of SUPPORTED, system tables and events. It returns
// the frame to forward, which is frame itself unless it was rewritten (frame is nil for a
// frame streamed through unread), and the tracing Ticket that the caller passes to wrote
// once the frame is written, when the request is traced with events. arrived is when the
// read that brought it returned (0 without metrics or statement statistics). The caller
// calls queued once the frame is queued for the client.
func (c *conn) response(h cql.Header, frame []byte, req inflight, arrived int64) ([]byte, tracing.Ticket) {
	if h.Stream >= 0 {
		c.noteHandshake(h.Opcode)
	}
	if req.stat.Active() {
		c.p.stmts.Response(req.stat, h, c.statResponseBody(h, frame, req.stat), arrived)
	}
	out := frame
	var done tracing.Ticket
	if req.trace.Traced() {
		out, done = c.tr.End(req.trace, h, frame, c.compressor(), arrived)
	}
	switch {
	case req.op == cql.OpPrepare && req.used:
		if h.Opcode == cql.OpResult && frame != nil {
			c.learnPrepared(out, req)
		}
	case req.kind == kindOptions:
		out = c.rewriteSupported(out)
	case req.kind != kindNone:
		out = c.rewriteResult(out, req)
	case h.Stream < 0 && h.Opcode == cql.OpEvent && out != nil:
		out = c.rewriteEvent(out)
	}
	inc(&c.counters.responses, 1)
	return out, done
}

// queued records the metrics of a response once it is queued for the client: the second
// clock read of a request, after the one at its arrival. The added latency is the
// response's way through the sidecar (its wait behind earlier frames of the same read,
// tracing, rewriting, the copy into the client's buffer); the request's way in is not
// measured, to keep to these reads. arrived is when the read that brought the response
// from the node returned.
func (c *conn) queued(req inflight, arrived int64) {
	if m := c.p.metrics; m != nil && req.used {
		now := tracing.Now()
		m.Latency(req.op, time.Duration(now-req.start))
		m.AddedLatency(time.Duration(now - arrived))
	}
}

// readsBody reports whether the proxy itself reads the body of requests with opcode op.
func (c *conn) readsBody(op cql.Opcode) bool {
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

// statBody returns the body of a request for statement statistics: the one inspect has
// read for a QUERY or PREPARE, or the frame's own, decompressed here when inspect read only
// its start.
func (c *conn) statBody(h cql.Header, frame []byte) []byte {
	if c.inspectedAll && (h.Opcode == cql.OpQuery || h.Opcode == cql.OpPrepare) {
		return c.inspected
	}
	return c.requestBody(h, frame)
}

// maxKeptBuffer is the largest scratch buffer kept between frames; a larger one, grown for
// a rare large frame, is released so that an idle connection stays small.
const maxKeptBuffer = 1 << 20

// inspect reads what the proxy needs from a request: the compression of a STARTUP, and
// whether a QUERY, PREPARE or EXECUTE reads system.local or system.peers.
func (c *conn) inspect(h cql.Header, frame []byte) (rewriteKind, *tracing.Statement, string) {
	c.inspected, c.inspectedAll = nil, false
	switch h.Opcode {
	case cql.OpStartup:
		c.startup(frame[cql.HeaderSize:])
	case cql.OpOptions:
		return kindOptions, nil, ""
	case cql.OpAuthResponse:
		if c.tr != nil {
			c.authResponse(h, frame)
		}
	case cql.OpQuery, cql.OpPrepare:
		var sc scan // how far the start of a compressed QUERY was read
		if h.Opcode == cql.OpQuery && h.Flags&cql.FlagCompression != 0 {
			k, known, s := c.queryStart(h, frame)
			if known {
				return k, nil, ""
			}
			sc = s
		}
		body := c.requestBody(h, frame)
		c.inspected, c.inspectedAll = body, true
		if len(body) < 4 {
			return kindNone, nil, ""
		}
		n := int(int32(binary.BigEndian.Uint32(body)))
		if n < 0 || n > len(body)-4 {
			return kindNone, nil, ""
		}
		k, _, _ := statementScan(body[4:4+n], c.inSystem.Load(), -1, sc)
		switch {
		case k == kindUse && h.Opcode == cql.OpPrepare:
			k = kindNone
		case k != kindNone && k != kindUse && h.Opcode == cql.OpPrepare:
			k |= kindPrepare
		}
		return k, nil, ""
	case cql.OpExecute:
		return c.inspectExecute(h, frame)
	}
	return kindNone, nil, ""
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
func (c *conn) queryStart(h cql.Header, frame []byte) (k rewriteKind, known bool, sc scan) {
	if h.Flags&cql.FlagCustomPayload != 0 {
		return kindNone, false, sc
	}
	body := frame[cql.HeaderSize:]
	var p []byte
	switch c.comp.Load() {
	case 1:
		p = cql.LZ4Prefix(c.reqPrefix[:0], body, queryPrefix)
	case 2:
		p = cql.SnappyPrefix(c.reqPrefix[:0], body, queryPrefix)
	}
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
func (c *conn) authResponse(h cql.Header, frame []byte) {
	body := c.requestBody(h, frame)
	if h.Flags&cql.FlagCompression != 0 {
		defer clear(body)
	}
	if user, ok := saslPlainUser(body); ok {
		c.tr.SetUser(user)
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

// requestBody returns the body of a request frame, decompressed and without its custom
// payload, or nil when it cannot be read.
func (c *conn) requestBody(h cql.Header, frame []byte) []byte {
	body := frame[cql.HeaderSize:]
	if h.Flags&cql.FlagCompression != 0 {
		comp := c.compressor()
		if comp == nil {
			return nil
		}
		var err error
		if c.reqBody, err = comp.Decompress(c.reqBody[:0], body); err != nil {
			return nil
		}
		body = c.reqBody
	}
	if h.Flags&cql.FlagCustomPayload != 0 {
		var err error
		if _, body, err = cql.ParseRequestPrefix(h.Flags, body); err != nil {
			return nil
		}
	}
	return body
}

// startup notes the compression that a STARTUP asks for. Its body is never compressed.
func (c *conn) startup(body []byte) {
	m, err := cql.DecodeStartup(body)
	if err != nil {
		return // the node answers it
	}
	var name string
	for k, v := range m.Options {
		if strings.EqualFold(k, "COMPRESSION") {
			name = v
		}
	}
	var i int32
	switch comp := cql.CompressorByName(name); {
	case comp == nil:
	case comp.Name() == "lz4":
		i = 1
	case comp.Name() == "snappy":
		i = 2
	}
	c.comp.Store(i)
}

// statResponseBody returns the body of a response that statement statistics read, or nil.
func (c *conn) statResponseBody(h cql.Header, frame []byte, t statements.Ticket) []byte {
	if frame == nil || !t.WantsBody(h.Opcode) {
		return nil
	}
	body := frame[cql.HeaderSize:]
	if h.Flags&cql.FlagCompression == 0 {
		return body
	}
	comp := c.compressor()
	switch {
	case comp == nil:
		return nil
	case t.PrefixEnough(h.Opcode):
		// Only the row count is read: decompress just the start of the body (lz4 only; a
		// snappy RESULT's rows are not counted).
		if comp.Name() != "lz4" {
			return nil
		}
		if cap(c.respBody) < statements.RowsPrefix {
			c.respBody = make([]byte, 0, statements.RowsPrefix)
		}
		return cql.LZ4Prefix(c.respBody, body, statements.RowsPrefix)
	}
	var err error
	if c.respBody, err = comp.Decompress(c.respBody[:0], body); err != nil {
		return nil
	}
	body = c.respBody
	if cap(c.respBody) > maxKeptBuffer {
		c.respBody = nil
	}
	return body
}
