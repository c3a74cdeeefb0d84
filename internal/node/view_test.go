package node

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestViewsDisabled: with NoMaterializedViews (tracecar node --materialized-views=false)
// CREATE MATERIALIZED VIEW gets stock Cassandra 4.1's refusal, and none exists to alter or
// drop.
func TestViewsDisabled(t *testing.T) {
	e := NewEngine(EngineConfig{NoMaterializedViews: true})
	s := &Session{}
	mustExec(t, e, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, e, s, "USE ks")
	mustExec(t, e, s, "CREATE TABLE t (k int, c int, PRIMARY KEY (k, c))")
	for q, want := range map[string]string{
		"CREATE MATERIALIZED VIEW v AS SELECT * FROM t WHERE k IS NOT NULL AND c IS NOT NULL PRIMARY KEY (c, k)": "Materialized views are disabled. Enable in cassandra.yaml to use.",
		"DROP MATERIALIZED VIEW v":                     "Materialized view 'ks.v' doesn't exist",
		"ALTER MATERIALIZED VIEW v WITH comment = 'x'": "Materialized view 'ks.v' doesn't exist",
	} {
		_, err := e.Query(s, q, &cql.QueryParams{}, nil)
		if ce := cqlErr(err); ce == nil || ce.Code != cql.ErrCodeInvalid || ce.Message != want {
			t.Errorf("%s: got %v; want Invalid %q", q, err, want)
		}
	}
}
