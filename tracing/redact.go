package tracing

import (
	"context"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

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
