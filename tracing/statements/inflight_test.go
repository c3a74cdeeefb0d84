package statements

import (
	"slices"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestStatementAntiPatterns checks that each statement lists the anti-patterns its own
// requests showed, and that a merge takes their union in the kinds' order.
func TestStatementAntiPatterns(t *testing.T) {
	a, ca := newStats(t, 0)
	b, cb := newStats(t, 0)
	q := "SELECT v FROM ks.t WHERE v = 1 ALLOW FILTERING"
	call(a, ca, cql.OpQuery, query(q, cql.One, 10), cql.OpResult, rows(0), 1)
	call(b, cb, cql.OpQuery, query(q, cql.All, 10), cql.OpResult, rows(0), 1)
	prepare(t, a, "SELECT v FROM ks.t WHERE k = ?", "ok", 1)
	call(a, ca, cql.OpExecute, body(cql.Execute{ID: []byte("ok"), Params: cql.QueryParams{Consistency: cql.One, Flags: cql.QueryPageSize, PageSize: 10}}), cql.OpResult, rows(1), 1)

	norm := "SELECT v FROM ks.t WHERE v = ? ALLOW FILTERING"
	if got := find(t, a.List("calls", 0, false), norm, false).AntiPatterns; !slices.Equal(got, []string{"unprepared", "allow_filtering", "full_scan"}) {
		t.Errorf("sidecar a: antipatterns %q; want unprepared, allow_filtering, full_scan", got)
	}
	if got := find(t, a.List("calls", 0, false), "SELECT v FROM ks.t WHERE k = ?", true).AntiPatterns; got != nil {
		t.Errorf("a paged, prepared SELECT at ONE: antipatterns %q; want none", got)
	}
	merged, ok := merge(b.List("calls", 0, true), a.List("calls", 0, true))
	if !ok {
		t.Fatal("Merge said a histogram is missing")
	}
	if got := find(t, merged, norm, false).AntiPatterns; !slices.Equal(got, []string{"unprepared", "allow_filtering", "cl_all", "full_scan"}) {
		t.Errorf("merged: antipatterns %q; want unprepared, allow_filtering, cl_all, full_scan", got)
	}
}

// TestTicketStatement checks what a request in flight tells of its statement: the entry's
// text with its target, a PREPARE's own text, nothing when statistics are off.
func TestTicketStatement(t *testing.T) {
	s, _ := newStats(t, 0)
	tk := s.Request(cql.NewFrame(reqHeader(cql.OpQuery), query("SELECT v FROM ks.t WHERE k = 42", cql.One, 10)), 7)
	if text, ks, table, ok := tk.Statement(); !ok || text != "SELECT v FROM ks.t WHERE k = ?" || ks != "ks" || table != "t" || tk.Start() != 7 {
		t.Errorf("QUERY: %q %q %q %v start %d", text, ks, table, ok, tk.Start())
	}
	tk = s.Request(cql.NewFrame(reqHeader(cql.OpPrepare), body(cql.Prepare{Query: "INSERT INTO ks.u (k) VALUES (?)"})), 8)
	if text, ks, table, ok := tk.Statement(); !ok || text != "INSERT INTO ks.u (k) VALUES (?)" || ks != "ks" || table != "u" {
		t.Errorf("PREPARE: %q %q %q %v", text, ks, table, ok)
	}
	s.SetEnabled(false)
	tk = s.Request(cql.NewFrame(reqHeader(cql.OpQuery), query("SELECT v FROM ks.t", cql.One, 10)), 9)
	if _, _, _, ok := tk.Statement(); ok {
		t.Error("statistics off: the Ticket knows a statement")
	}
}
