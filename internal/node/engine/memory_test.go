package engine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/storage"
)

func mustOverloaded(tb testing.TB, e *Engine, s *Session, q string) {
	tb.Helper()
	_, err := e.Query(s, q, &cql.QueryParams{}, nil)
	ce := cqlErr(err)
	if ce == nil || ce.Code != cql.ErrCodeOverloaded {
		tb.Fatalf("%s: got %v; want Overloaded", q, err)
	}
	if want := "node memory limit 64 KiB reached (--memory-limit): "; !strings.HasPrefix(ce.Message, want) {
		tb.Fatalf("%s: got message %q; want it to start with %q", q, ce.Message, want)
	}
}

// TestMemoryLimit: writes past the limit get Overloaded naming it, whole batches included,
// while reads, DELETE, TRUNCATE and DROP work, and what they free lets writes in again.
func TestMemoryLimit(t *testing.T) {
	const limit = 64 << 10
	e := NewEngine(EngineConfig{MemoryLimit: limit})
	s := &Session{}
	mustExec(t, e, s, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, e, s, "USE ks")
	mustExec(t, e, s, "CREATE TABLE t (k int, c int, v text, s text static, PRIMARY KEY (k, c))")
	mustExec(t, e, s, "CREATE TABLE other (k int PRIMARY KEY, v text)")
	val := strings.Repeat("x", 1000)
	ins := func(k, c int) string {
		return "INSERT INTO t (k, c, v) VALUES (" + strconv.Itoa(k) + ", " + strconv.Itoa(c) + ", '" + val + "')"
	}
	n := 0
	for ; ; n++ {
		if _, err := e.Query(s, ins(n%7, n), &cql.QueryParams{}, nil); err != nil {
			mustOverloaded(t, e, s, ins(n%7, n))
			break
		}
		if n > 1000 {
			t.Fatalf("%d writes of 1 KB admitted under a limit of 64 KiB", n)
		}
	}
	if held, tables := e.Memory().Held(), int64(limit/8*storage.TableShare); held < tables || held > tables+2000 {
		t.Fatalf("held %d bytes when refused; want the tables' share of the limit, %d, passed by one write at most", held, tables)
	}
	if got := e.Memory().Refused(); got != 2 {
		t.Errorf("refused writes: got %d; want 2", got)
	}

	// Every kind of write is refused, batches whole; reads still work.
	mustOverloaded(t, e, s, "UPDATE t SET v = 'y' WHERE k = 1 AND c = 1")
	mustOverloaded(t, e, s, "UPDATE t SET s = 'y' WHERE k = 1")
	mustOverloaded(t, e, s, "INSERT INTO other (k, v) VALUES (1, 'a')")
	mustOverloaded(t, e, s, "BEGIN BATCH DELETE FROM t WHERE k = 0 AND c = 0; INSERT INTO other (k, v) VALUES (2, 'b') APPLY BATCH")
	if got := rowsText(t, mustExec(t, e, s, "SELECT c FROM t WHERE k = 0 AND c = 0")); got != "0" {
		t.Fatalf("the refused batch's DELETE applied: got %q", got)
	}
	if got := rowsText(t, mustExec(t, e, s, "SELECT count(*) FROM t")); got != strconv.Itoa(n) {
		t.Errorf("count(*) when full: got %s; want %d", got, n)
	}

	// A DELETE gives back the values it purges.
	before := e.Memory().Held()
	mustExec(t, e, s, "DELETE FROM t WHERE k = 0")
	mustExec(t, e, s, "DELETE v FROM t WHERE k = 1 AND c = 1")
	mustExec(t, e, s, "DELETE FROM t WHERE k = 2 AND c = 2")
	mustExec(t, e, s, "DELETE FROM t WHERE k = 3 AND c >= 0")
	if e.Memory().Held() >= before-4000 {
		t.Fatalf("DELETE freed %d bytes; want more than 4000", before-e.Memory().Held())
	}
	mustExec(t, e, s, ins(0, 0))
	mustExec(t, e, s, "UPDATE t SET s = 'static' WHERE k = 0")

	// TRUNCATE gives everything back; so does DROP.
	for e.Memory().Held() < limit/8*storage.TableShare {
		n++
		mustExec(t, e, s, ins(n%7, n))
	}
	mustOverloaded(t, e, s, ins(1, 1))
	mustExec(t, e, s, "TRUNCATE t")
	if got := e.Memory().Held(); got != 0 {
		t.Fatalf("after TRUNCATE: held %d; want 0", got)
	}
	mustExec(t, e, s, ins(1, 1))
	before = e.Memory().Held()
	mustExec(t, e, s, "INSERT INTO other (k, v) VALUES (1, 'a')")
	others := e.Memory().Held() - before
	mustExec(t, e, s, "DROP TABLE t")
	if got := e.Memory().Held(); got != others || got == 0 {
		t.Fatalf("after DROP TABLE: held %d; want %d, the other table's", got, others)
	}
	mustExec(t, e, s, "DROP KEYSPACE ks")
	if got := e.Memory().Held(); got != 0 {
		t.Fatalf("after DROP KEYSPACE: held %d; want 0", got)
	}
}

// TestMemoryNoLimit: with no limit the bytes are counted, and nothing is refused.
func TestMemoryNoLimit(t *testing.T) {
	e, s := newTestEngine(t, "CREATE TABLE t (k int PRIMARY KEY, v text)")
	for i := range 100 {
		mustExec(t, e, s, "INSERT INTO t (k, v) VALUES ("+strconv.Itoa(i)+", '"+strings.Repeat("x", 1000)+"')")
	}
	if got := e.Memory().Held(); got < 100_000 {
		t.Errorf("held %d bytes after 100 KB of values; want more", got)
	}
	if e.Memory().Limit() != 0 || e.Memory().Refused() != 0 {
		t.Errorf("limit %d, refused %d; want 0, 0", e.Memory().Limit(), e.Memory().Refused())
	}
}
