package node

import (
	"fmt"
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

// TestViewEvents checks the SCHEMA_CHANGE events of views (Cassandra sends them with
// target TABLE), and that a write prepared before a view existed maintains it once it does.
func TestViewEvents(t *testing.T) {
	e, s := newTestEngine(t, "CREATE TABLE t (k int, c int, v int, PRIMARY KEY (k, c))")
	var got []string
	e.OnSchemaChange(func(c cql.SchemaChange) { got = append(got, c.ChangeType+" "+c.Target+" "+c.Keyspace+" "+c.Name) })
	ins := mustPrepare(t, e, s, "INSERT INTO t (k, c, v) VALUES (?, ?, ?)")
	for _, q := range []string{
		"CREATE MATERIALIZED VIEW mv AS SELECT * FROM t WHERE v IS NOT NULL AND k IS NOT NULL AND c IS NOT NULL PRIMARY KEY (v, k, c)",
		"ALTER MATERIALIZED VIEW mv WITH comment = 'x'",
	} {
		mustExec(t, e, s, q)
	}
	vals := &cql.QueryParams{Values: []cql.Value{{Bytes: encInt(1)}, {Bytes: encInt(2)}, {Bytes: encInt(3)}}}
	if _, err := e.Execute(s, ins.ID, vals, nil); err != nil {
		t.Fatal(err)
	}
	rows := mustExec(t, e, s, "SELECT k, c FROM mv WHERE v = 3").(cql.RowsResult).Rows
	if len(rows) != 1 || render(cql.TypeInfo{ID: cql.TypeInt}, rows[0][0]) != "1" {
		t.Errorf("the view's rows after a write prepared before it: %v; want k = 1", rows)
	}
	mustExec(t, e, s, "ALTER TABLE t ADD w int") // the view selects every column: it gets w too
	mustExec(t, e, s, "UPDATE t SET w = 7 WHERE k = 1 AND c = 2")
	rows = mustExec(t, e, s, "SELECT w FROM mv WHERE v = 3").(cql.RowsResult).Rows
	if len(rows) != 1 || render(cql.TypeInfo{ID: cql.TypeInt}, rows[0][0]) != "7" {
		t.Errorf("the view's new column: %v; want 7", rows)
	}
	mustExec(t, e, s, "DROP MATERIALIZED VIEW mv")
	want := []string{"CREATED TABLE ks mv", "UPDATED TABLE ks mv", "UPDATED TABLE ks t", "UPDATED TABLE ks mv", "DROPPED TABLE ks mv"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n got  %q\n want %q", got, want)
	}
}
