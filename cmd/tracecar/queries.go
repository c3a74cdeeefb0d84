package main

import (
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/sidecar"
)

// queriesOf serves the proxy's requests in flight to the admin API, in its JSON shape.
func queriesOf(p *sidecar.Proxy) admin.QueriesFunc {
	return func(min time.Duration, limit int) []admin.Query {
		qs := p.Queries(min, limit)
		now := time.Now()
		out := make([]admin.Query, len(qs))
		for i, q := range qs {
			a := admin.Query{Client: q.Client.String(), Username: q.User, Opcode: q.Opcode.String(), Stream: q.Stream,
				ElapsedUS: -1, Statement: q.Statement, Keyspace: q.Keyspace, Table: q.Table,
				Consistency: q.Consistency, StatementFrom: q.From, TraceMode: q.TraceMode}
			if q.Elapsed >= 0 {
				a.ElapsedUS = q.Elapsed.Microseconds()
				at := now.Add(-q.Elapsed).UTC()
				a.StartedAt = &at
			}
			out[i] = a
		}
		return out
	}
}
