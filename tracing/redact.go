package tracing

import (
	"context"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// params returns the parameter collector of a recorded session, filling m.
func (t *Tracer) params(m map[string]string) *params {
	return &params{m: m, bind: t.opts.BindValues, prep: t.prep, queries: t.queries}
}

// query records statement text under key k (query or query[i]), normalized: literal values
// redacted unless kept, passwords always redacted, and cut at the maximum length, which
// sets the matching query_truncated parameter.
func (p *params) query(k string, q []byte) {
	if p.m == nil {
		return
	}
	text, truncated := p.queries.normalizeBytes(q)
	p.setQuery(k, text, truncated)
}

// queryText is query for text the sidecar keeps, a prepared statement's.
func (p *params) queryText(k, q string) {
	if p.m == nil {
		return
	}
	text, truncated := p.queries.normalize(q)
	p.setQuery(k, text, truncated)
}

func (p *params) setQuery(k, text string, truncated bool) {
	p.m[k] = text
	if truncated {
		p.m["query_truncated"+strings.TrimPrefix(k, "query")] = "true"
	}
}

// redactedEvents normalizes the statement text that a node puts in its own trace events
// (Cassandra's "Parsing <statement>"), as the session's query text is.
type redactedEvents struct {
	NodeEventSource
	literals bool
	maxLen   int
}

func (r redactedEvents) Events(ctx context.Context, ids [][16]byte) ([][]Event, error) {
	evs, err := r.NodeEventSource.Events(ctx, ids)
	for _, se := range evs {
		for i := range se {
			if q, ok := strings.CutPrefix(se[i].Activity, "Parsing "); ok {
				q, _ = cql.NormalizeQuery(q, r.literals, r.maxLen)
				se[i].Activity = "Parsing " + q
			}
		}
	}
	return evs, err
}
