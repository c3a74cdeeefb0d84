package engine

import (
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestCompileErrors checks the compiler's refusals, one or more per concern it is split
// into: the WHERE clause's relations (where.go), the selectors, restrictions and ORDER BY
// of a SELECT, the assignments and deletions of UPDATE and DELETE, the literals with
// markers inside, and a view's definition, each with the message the node answered before
// the split (Cassandra 4.1's where the node has one). A helper that stops checking what it
// checked, or checks it with another message, fails it.
func TestCompileErrors(t *testing.T) {
	e, s := newTestEngine(t,
		"CREATE TYPE u (a int)",
		"CREATE TABLE t (k int, c int, d int, v text, s int static, l list<int>, st set<int>, m map<int, text>, fl frozen<list<int>>, dur duration, tp tuple<int, int>, fu frozen<u>, PRIMARY KEY (k, c, d))",
		"CREATE TABLE cn (k int PRIMARY KEY, n counter)")
	tests := []struct {
		name, query, msg string
	}{
		// where.go: relations.
		{"= twice", "SELECT * FROM t WHERE k = 1 AND k = 2", "k cannot be restricted by more than one relation if it includes an Equal"},
		{"IN after =", "SELECT * FROM t WHERE k = 1 AND k IN (1, 2)", "k cannot be restricted by more than one relation if it includes a IN"},
		{"two start bounds", "SELECT * FROM t WHERE k = 1 AND c > 1 AND c >= 2", "More than one restriction was found for the start bound on c"},
		{"two end bounds", "SELECT * FROM t WHERE k = 1 AND c < 1 AND c <= 2", "More than one restriction was found for the end bound on c"},
		{"slice of duration", "SELECT * FROM t WHERE k = 1 AND dur > 1d ALLOW FILTERING", "Slice restrictions are not supported on duration columns"},
		{"token order", "SELECT * FROM t WHERE token(c) > 0", "The token function arguments must be in the partition key order: k"},
		{"CONTAINS of text", "SELECT * FROM t WHERE v CONTAINS 'a' ALLOW FILTERING", "Cannot use CONTAINS on non-collection column v"},
		{"CONTAINS KEY of list", "SELECT * FROM t WHERE l CONTAINS KEY 1 ALLOW FILTERING", "Cannot use CONTAINS KEY on non-map column l"},
		{"list as map", "SELECT * FROM t WHERE l[1] = 2 ALLOW FILTERING", `Column "l" cannot be used as a map`},
		// engine_select.go: selectors, restrictions, ORDER BY.
		{"writetime of key", "SELECT writetime(c) FROM t", "Cannot use selection function writeTime on PRIMARY KEY part c"},
		{"ttl of collection", "SELECT ttl(l) FROM t", "Cannot use selection function ttl on non-frozen collection l"},
		{"token arity", "SELECT token(k, c) FROM t", "Invalid number of arguments in call to function system.token: 1 required but 2 provided"},
		{"token argument", "SELECT token(c) FROM t", "Type error: c cannot be passed as argument 0 of function system.token"},
		{"field of text", "SELECT v.a FROM t", "Invalid field selection: v of type text is not a user type"},
		{"no such field", "SELECT fu.b FROM t", "fu of type frozen<u> has no field b"},
		{"DISTINCT clustering", "SELECT DISTINCT c FROM t", "SELECT DISTINCT queries must only request partition key columns and/or static columns"},
		{"unknown aggregate column", "SELECT max(nope) FROM t", "Undefined column name nope in table ks.t"},
		{"= and token", "SELECT * FROM t WHERE k = 1 AND token(k) > 0", "Only EQ and IN relation are supported on the partition key (unless you use the token() function)"},
		{"ORDER BY regular", "SELECT * FROM t WHERE k = 1 ORDER BY v", "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got v"},
		{"ORDER BY out of order", "SELECT * FROM t WHERE k = 1 ORDER BY d", "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY"},
		{"ORDER BY mixed", "SELECT * FROM t WHERE k = 1 ORDER BY c ASC, d DESC", "Unsupported order by relation"},
		// engine_write.go: assignments.
		{"SET of key", "UPDATE t SET c = 1 WHERE k = 1 AND c = 1 AND d = 1", "PRIMARY KEY part c found in SET part"},
		{"SET of counter", "UPDATE cn SET n = 1 WHERE k = 1", "Cannot set the value of counter column n (counters can only be incremented/decremented, not set)"},
		{"prepend to counter", "UPDATE cn SET n = 1 + n WHERE k = 1", "Invalid operation (n = ? + n) for counter column n"},
		{"prepend to set", "UPDATE t SET st = {1} + st WHERE k = 1 AND c = 1 AND d = 1", "Invalid operation (st = ? + st) for non list column st"},
		{"add to text", "UPDATE t SET v = v + 'a' WHERE k = 1 AND c = 1 AND d = 1", "Invalid operation (v = v + ?) for non counter column v"},
		{"append to frozen", "UPDATE t SET fl = fl + [1] WHERE k = 1 AND c = 1 AND d = 1", "Invalid operation (fl = fl + ?) for frozen collection column fl"},
		{"element of text", "UPDATE t SET v[1] = 'a' WHERE k = 1 AND c = 1 AND d = 1", "Invalid operation (v[?] = ?) for non list/map column v"},
		{"field of frozen", "UPDATE t SET fu.a = 1 WHERE k = 1 AND c = 1 AND d = 1", "Invalid operation (fu.a = 1) for frozen UDT column fu"},
		{"static, part of the key", "UPDATE t SET s = 1 WHERE k = 1 AND c = 1", "Some clustering keys are missing: d"},
		// engine_write.go: deletions.
		{"DELETE of key", "DELETE c FROM t WHERE k = 1", "Invalid identifier c for deletion (should not be a PRIMARY KEY part)"},
		{"DELETE element of text", "DELETE v[1] FROM t WHERE k = 1 AND c = 1 AND d = 1", "Invalid element access syntax for non-collection column v"},
		{"DELETE column, part of the key", "DELETE v FROM t WHERE k = 1 AND c = 1", "Some clustering keys are missing: d"},
		{"DELETE = and a range", "DELETE FROM t WHERE k = 1 AND c = 1 AND c > 0", "c cannot be restricted by both an equality and an inequality relation"},
		{"DELETE range after a gap", "DELETE FROM t WHERE k = 1 AND d > 0", `PRIMARY KEY column "d" cannot be restricted as preceding column "c" is not restricted`},
		// engine_expr.go: literals with markers inside.
		{"tuple too long", "UPDATE t SET tp = (1, ?, 3) WHERE k = 1 AND c = 1 AND d = 1", "Invalid tuple literal for tp: too many elements. Type frozen<tuple<int, int>> expects 2 but got 3"},
		{"unknown field", "UPDATE t SET fu = {a: ?, b: 1} WHERE k = 1 AND c = 1 AND d = 1", "Unknown field 'b' in value of user defined type u"},
		{"list for a map", "UPDATE t SET m = [?] WHERE k = 1 AND c = 1 AND d = 1", "literal for m of type map<int, text>"},
		{"unknown function", "SELECT nofn() FROM t", "Unknown function ks.nofn"},
		{"unknown function of a constant", "SELECT nofn(1) FROM t", "Unknown function"},
		// view.go: a view's definition.
		{"view of counters", "CREATE MATERIALIZED VIEW mv AS SELECT * FROM cn WHERE k IS NOT NULL PRIMARY KEY (k)", "Materialized views are not supported on counter tables"},
		{"view of a static", "CREATE MATERIALIZED VIEW mv AS SELECT k, c, d, s FROM t WHERE k IS NOT NULL AND c IS NOT NULL AND d IS NOT NULL PRIMARY KEY (c, k, d)", "Cannot include static column 's' in materialized view 'mv'"},
		{"view of no column", "CREATE MATERIALIZED VIEW mv AS SELECT k, nope FROM t WHERE k IS NOT NULL AND c IS NOT NULL AND d IS NOT NULL PRIMARY KEY (c, k, d)", "Undefined column name nope in table"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Query(s, tc.query, &cql.QueryParams{}, nil)
			ce := cqlErr(err)
			if ce == nil {
				t.Fatalf("%s: got %v; want Invalid containing %q", tc.query, err, tc.msg)
			}
			if ce.Code != cql.ErrCodeInvalid || !strings.Contains(ce.Message, tc.msg) {
				t.Errorf("%s: got 0x%04x %q; want 0x%04x containing %q", tc.query, ce.Code, ce.Message, cql.ErrCodeInvalid, tc.msg)
			}
		})
	}
}
