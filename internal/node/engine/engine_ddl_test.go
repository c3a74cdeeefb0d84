package engine

import (
	"fmt"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
)

// TestAlterEvents checks the SCHEMA_CHANGE of each ALTER, that schema_version changes with
// it, and that a prepared statement of an altered table is forgotten (Unprepared) while one
// of a table whose options alone changed is kept.
func TestAlterEvents(t *testing.T) {
	e, s := newTestEngine(t, "CREATE TABLE t (k int PRIMARY KEY, v int)", "CREATE TABLE u (k int PRIMARY KEY, v int)")
	var got []string
	e.OnSchemaChange(func(c cql.SchemaChange) { got = append(got, c.ChangeType+" "+c.Target+" "+c.Keyspace+" "+c.Name) })
	pt := mustPrepare(t, e, s, "SELECT * FROM t WHERE k = ?")
	pu := mustPrepare(t, e, s, "SELECT * FROM u WHERE k = ?")
	steps := []string{
		"ALTER TABLE t ADD w int",
		"ALTER TABLE u WITH comment = 'x'",
		"ALTER KEYSPACE ks WITH durable_writes = false",
		"ALTER TABLE IF EXISTS nope ADD x int", // no change, no event
	}
	for _, q := range steps {
		v := e.SchemaVersion()
		m := mustExec(t, e, s, q)
		_, changed := m.(cql.SchemaChangeResult)
		if changed == (v == e.SchemaVersion()) {
			t.Errorf("%s: result %T, and schema_version changed: %v", q, m, v != e.SchemaVersion())
		}
	}
	want := []string{"UPDATED TABLE ks t", "UPDATED TABLE ks u", "UPDATED KEYSPACE ks "}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n got  %q\n want %q", got, want)
	}
	one := &cql.QueryParams{Values: []cql.Value{{Bytes: cqlvalue.EncInt(1)}}}
	if _, err := e.Execute(s, pt.ID, one, nil); cqlErr(err) == nil || cqlErr(err).Code != cql.ErrCodeUnprepared {
		t.Errorf("EXECUTE after ALTER TABLE ADD: got %v; want Unprepared", err)
	}
	if _, err := e.Execute(s, pu.ID, one, nil); err != nil {
		t.Errorf("EXECUTE after ALTER TABLE WITH: %v", err)
	}
	again := mustPrepare(t, e, s, "SELECT * FROM t WHERE k = ?")
	if n := len(again.ResultMetadata.Columns); n != 3 {
		t.Errorf("prepared again: %d result columns; want 3", n)
	}
}

// TestTypeEvents checks the events of CREATE, ALTER and DROP TYPE: ALTER TYPE also updates,
// with their own events, the types and tables that use the type.
func TestTypeEvents(t *testing.T) {
	e, s := newTestEngine(t, "CREATE TYPE a (x int)", "CREATE TYPE b (y frozen<a>)",
		"CREATE TABLE t (k int PRIMARY KEY, v frozen<b>)", "CREATE TABLE u (k int PRIMARY KEY, v int)")
	var got []string
	e.OnSchemaChange(func(c cql.SchemaChange) { got = append(got, c.ChangeType+" "+c.Target+" "+c.Keyspace+" "+c.Name) })
	mustExec(t, e, s, "ALTER TYPE a ADD z int")
	mustExec(t, e, s, "CREATE TYPE c (x int)")
	mustExec(t, e, s, "DROP TYPE c")
	want := []string{"UPDATED TYPE ks a", "UPDATED TYPE ks b", "UPDATED TABLE ks t", "CREATED TYPE ks c", "DROPPED TYPE ks c"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n got  %q\n want %q", got, want)
	}
	pr := mustPrepare(t, e, s, "SELECT v FROM t WHERE k = ?")
	if f := pr.ResultMetadata.Columns[0].Type.Fields[0].Type.Fields; len(f) != 2 || f[1].Name != "z" {
		t.Errorf("the column's type after ALTER TYPE: %v; want b's field y of type a with x and z", pr.ResultMetadata.Columns[0].Type)
	}
}

// TestFunctionEvents checks the events of function and aggregate DDL, which carry the
// argument types.
func TestFunctionEvents(t *testing.T) {
	e, s := newTestEngine(t)
	var got []string
	e.OnSchemaChange(func(c cql.SchemaChange) {
		got = append(got, fmt.Sprint(c.ChangeType, " ", c.Target, " ", c.Keyspace, " ", c.Name, " ", c.ArgTypes))
	})
	mustExec(t, e, s, "CREATE FUNCTION f(a int, b list<text>) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'return a;'")
	mustExec(t, e, s, "CREATE OR REPLACE FUNCTION f(a int, b list<text>) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'return 0;'")
	mustExec(t, e, s, "CREATE FUNCTION g(s int, v int) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'return s;'")
	mustExec(t, e, s, "CREATE AGGREGATE a(int) SFUNC g STYPE int")
	mustExec(t, e, s, "DROP AGGREGATE a(int)")
	mustExec(t, e, s, "DROP FUNCTION f")
	want := []string{"CREATED FUNCTION ks f [int list<text>]", "UPDATED FUNCTION ks f [int list<text>]",
		"CREATED FUNCTION ks g [int int]", "CREATED AGGREGATE ks a [int]", "DROPPED AGGREGATE ks a [int]",
		"DROPPED FUNCTION ks f [int list<text>]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n got  %q\n want %q", got, want)
	}
}
