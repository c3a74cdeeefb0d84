package tracing

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// A request in flight, as its tracing record holds it: what GET /tracecar/queries shows of
// a request that has not been answered yet. The record already holds a copy of the request
// (the frame in fast mode, its decompressed message with events), so reading it costs the
// data path nothing: the reader copies it under the caller's lock and decodes the copy on
// its own goroutine.

// maxPeek bounds the bytes Peek copies: enough for the statement text of nearly every
// request, and for fast mode's whole copy (DefaultCaptureMax).
const maxPeek = 16 << 10

// Peek is a copy of the request that a Ticket's record holds, taken by Ticket.Peek and read
// by Tracer.Describe. The zero Peek holds nothing.
type Peek struct {
	op      cql.Opcode
	version byte // the protocol version
	mode    string
	start   int64
	buf     []byte // the request frame (fast mode, not plain) or its decompressed message
	plain   bool
	comp    cql.Compressor
}

// Held reports whether p holds a request.
func (p Peek) Held() bool { return p.mode != "" }

// Start returns the request's arrival (from Now) as tracing saw it, or 0.
func (p Peek) Start() int64 { return p.start }

// Start returns the arrival (from Now) of the request of t, or 0 for a zero Ticket. Like
// Peek, it needs the caller's guarantee that the request has not ended.
func (t Ticket) Start() int64 {
	if t.r == nil || t.r.seq.Load() != t.seq {
		return 0
	}
	return t.r.start
}

// Peek copies what the record of t holds of its request, at most 16 KiB of it. It is for a
// reader outside the data path, and the caller must guarantee that the request of t has
// not ended while Peek runs: the record is written by Begin before the caller keeps the
// Ticket and reused only after End, so the sidecar calls Peek under the lock of the stream
// table that holds the Ticket, under which its response side takes a request out before
// calling End. Peek of a zero Ticket, or of one whose record was reused, holds nothing.
func (t Ticket) Peek() Peek {
	r := t.r
	if r == nil || r.seq.Load() != t.seq {
		return Peek{}
	}
	p := Peek{op: r.op, version: r.version, mode: r.mode, start: r.start, plain: r.plain, comp: r.comp}
	n := min(len(r.buf), maxPeek)
	if n < len(r.buf) && !p.plain && r.flags&cql.FlagCompression != 0 {
		n = 0 // a cut compressed body cannot be read
	}
	p.buf = append([]byte(nil), r.buf[:n]...)
	return p
}

// InFlight is what tracing can tell of a request in flight from a Peek: the fields of its
// session record so far, redacted as the record would be.
type InFlight struct {
	// Mode is the tracing mode the request is traced in (fast, full, sampled, client).
	Mode string
	// Query is the statement text as the session record shows it (literals replaced by ?
	// unless kept, passwords redacted, cut at the maximum length); a BATCH is "BATCH
	// LOGGED: q0; q1", as statement statistics key it. An EXECUTE of an id this sidecar
	// never saw prepared shows "<prepared statement 0x…>".
	Query string
	// Keyspace and Table are the target, as spans name it: from ks.table in the text, else
	// the keyspace of the prepared statement.
	Keyspace, Table string
	// Consistency is the request's consistency level, such as LOCAL_ONE.
	Consistency string
}

// Describe decodes p, a copy that Peek took, into what the request's session record would
// show. It reads only p's own bytes and the prepared-statement registry, so it is safe for
// concurrent use and runs on the caller's goroutine, away from the data path.
func (t *Tracer) Describe(p Peek) InFlight {
	if !p.Held() {
		return InFlight{}
	}
	var req cql.Request
	if p.plain {
		req.Parse(p.op, p.version, p.buf)
	} else {
		h, err := cql.ParseHeader(p.buf)
		if err != nil {
			return InFlight{Mode: p.mode}
		}
		var f cql.Frame
		f.Reset(h, p.buf, p.comp)
		if _, err := f.Message(); err != nil {
			return InFlight{Mode: p.mode}
		}
		r, _ := f.Request()
		req = *r
	}
	ps := make(map[string]string, 8)
	t.params(ps).request(&req) // a cut request keeps what was read before the cut
	sc := describe(&Session{Command: p.op.String(), Parameters: ps})
	in := InFlight{Mode: p.mode, Keyspace: sc.namespace, Table: sc.collection, Consistency: ps["consistency_level"]}
	if p.op != cql.OpBatch {
		in.Query = queryOrID(ps, -1)
		return in
	}
	var b strings.Builder
	b.WriteString("BATCH " + ps["batch_type"] + ": ")
	for i := 0; ; i++ {
		q := queryOrID(ps, i)
		if q == "" {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(q)
	}
	in.Query = b.String()
	return in
}

// queryOrID returns the text of statement i (or of the request, i < 0) in ps, or a
// placeholder naming the prepared id when the text is not known.
func queryOrID(ps map[string]string, i int) string {
	if q, ok := ps[indexed("query", i)]; ok {
		return q
	}
	if id, ok := ps[indexed("prepared_id", i)]; ok {
		return "<prepared statement " + id + ">"
	}
	return ""
}

// RedactQuery returns q as session records show statement text: literal values replaced
// by ? unless Options.QueryLiterals, passwords redacted, and cut at Options.MaxQueryLen. It
// is safe for concurrent use.
func (t *Tracer) RedactQuery(q string) string {
	text, _ := cql.NormalizeQuery(q, t.opts.QueryLiterals, t.opts.MaxQueryLen)
	return text
}
