package sidecar

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// The requests in flight, as GET /tracecar/queries lists them (Cassandra's
// system_views.queries, CASSANDRA-15241): read on demand from the connections' stream
// tables, where each request already waits for its response. The data path does nothing
// for it; the reader takes each table's lock for a copy of its entries, as the data path
// does for a put or a take, and decodes what it found on its own goroutine.

// Where a Query's statement was read from (Query.From).
const (
	// FromTracing: the request's tracing record, which holds a copy of the request in
	// fast, full, sampled and client modes.
	FromTracing = "tracing"
	// FromStatements: its statement statistics entry, while statistics are on.
	FromStatements = "statement_stats"
)

// Query is a request in flight, as Queries reports it.
type Query struct {
	Client netip.AddrPort // the client connection's remote address
	User   string         // the username the connection authenticated with, or ""
	Opcode cql.Opcode
	Stream int16
	// Elapsed is the time since the request arrived, or -1 when the proxy keeps no
	// arrival time for it (no Metrics, statement statistics or tracing).
	Elapsed time.Duration
	// Statement is the statement text as trace records show it (literals replaced by ?,
	// passwords redacted), and Keyspace and Table its target; Consistency is its
	// consistency level when its tracing record holds it. All are empty when neither
	// tracing nor statement statistics kept the request: see From.
	Statement, Keyspace, Table, Consistency string
	// From is where the statement was read: FromTracing, FromStatements, or "".
	From string
	// TraceMode is the tracing mode of the request (fast, full, sampled, client), or "".
	TraceMode string
}

// Queries returns the requests in flight whose elapsed time is at least min, longest
// first, at most limit of them (limit ≤ 0: all). It is safe for concurrent use, and meant
// for an admin API: it takes each connection's stream table lock twice, briefly, and the
// data path's work per request is unchanged. A request answered between the two is left
// out.
func (p *Proxy) Queries(min time.Duration, limit int) []Query {
	now := tracing.Now()
	all := p.inFlight(now, min)
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}

	out := make([]Query, 0, len(all))
	for _, f := range all {
		pk, still := f.c.pipe.Streams.Recheck(f.req)
		if !still {
			continue // answered since the first pass
		}
		q := Query{Client: f.c.pipe.ClientAddr, Opcode: f.req.Op, Stream: f.req.Stream, Elapsed: -1}
		if f.start != 0 {
			q.Elapsed = max(time.Duration(now-f.start), 0)
		}
		if f.tr != nil {
			q.User = f.tr.User()
		}
		if pk.Held() {
			in := p.env.sh.Tracer.Describe(pk)
			q.TraceMode = in.Mode
			if in.Query != "" {
				q.Statement, q.Keyspace, q.Table, q.Consistency = in.Query, in.Keyspace, in.Table, in.Consistency
				q.From = FromTracing
			}
		}
		if q.From == "" {
			if text, ks, table, ok := f.req.Statement(); ok {
				q.Statement, q.Keyspace, q.Table, q.From = p.redact(text), ks, table, FromStatements
			}
		}
		out = append(out, q)
	}
	return out
}

// foundQuery is a request in flight found by the first pass of Queries.
type foundQuery struct {
	c     *conn
	tr    *tracing.Conn
	req   pipeline.Inflight
	start int64 // 0: unknown
}

// inFlight is the first pass of Queries: the requests in flight for at least min at now
// (those of unknown start only when min is 0), oldest first, unknown last.
func (p *Proxy) inFlight(now int64, min time.Duration) []foundQuery {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()

	var all []foundQuery
	for _, c := range conns {
		tr := c.pipe.Tracing()
		c.pipe.Streams.InFlight(now, min, func(req pipeline.Inflight, start int64) {
			all = append(all, foundQuery{c: c, tr: tr, req: req, start: start})
		})
	}
	slices.SortFunc(all, func(a, b foundQuery) int {
		switch {
		case a.start == b.start:
			return cmp.Compare(a.req.Stream, b.req.Stream)
		case a.start == 0:
			return 1
		case b.start == 0:
			return -1
		}
		return cmp.Compare(a.start, b.start)
	})
	return all
}

// redact normalizes statement text as the tracer's session records do: a prepared
// statement's entry keeps the text its PREPARE sent.
func (p *Proxy) redact(q string) string {
	if p.env.sh.Tracer != nil {
		return p.env.sh.Tracer.RedactQuery(q)
	}
	text, _ := cql.NormalizeQuery(q, false, tracing.DefaultMaxQueryLen)
	return text
}
