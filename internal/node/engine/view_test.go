package engine

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
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
	vals := &cql.QueryParams{Values: []cql.Value{{Bytes: cqlvalue.EncInt(1)}, {Bytes: cqlvalue.EncInt(2)}, {Bytes: cqlvalue.EncInt(3)}}}
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

// TestViewConcurrentWrites: writers that move rows between view partitions, and readers of
// the view, at once (run it with -race); at the end the view holds exactly the base's rows,
// each under its last key.
func TestViewConcurrentWrites(t *testing.T) {
	e, s := newTestEngine(t, "CREATE TABLE t (k int, c int, v int, PRIMARY KEY (k, c))",
		"CREATE MATERIALIZED VIEW mv AS SELECT * FROM t WHERE v IS NOT NULL AND k IS NOT NULL AND c IS NOT NULL PRIMARY KEY (v, k, c)")
	const writers, rounds = 4, 100
	done := make(chan struct{})
	errs := make(chan error, writers+1)
	go func() {
		rs := &Session{Keyspace: "ks"}
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if _, err := e.Query(rs, "SELECT * FROM mv WHERE v = 1", &cql.QueryParams{}, nil); err != nil {
				errs <- err
				return
			}
		}
	}()
	for w := 0; w < writers; w++ {
		go func() {
			ws := &Session{Keyspace: "ks"}
			for i := 0; i < rounds; i++ {
				q := fmt.Sprintf("UPDATE t SET v = %d WHERE k = %d AND c = %d", i%5, w, i%3)
				if _, err := e.Query(ws, q, &cql.QueryParams{}, nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	base := mustExec(t, e, s, "SELECT v, k, c FROM t").(cql.RowsResult).Rows
	view := mustExec(t, e, s, "SELECT v, k, c FROM mv").(cql.RowsResult).Rows
	key := func(r [][]byte) string { return fmt.Sprint(r) }
	seen := map[string]bool{}
	for _, r := range view {
		seen[key(r)] = true
	}
	if len(view) != len(base) || len(base) != writers*3 {
		t.Fatalf("base %d rows, view %d; want %d each", len(base), len(view), writers*3)
	}
	for _, r := range base {
		if !seen[key(r)] {
			t.Errorf("base row (v, k, c) %v is not in the view", r)
		}
	}
}

// BenchmarkEngineInsertView compares a write to cassandra-stress's table with no view
// ("none") and with one view keyed by a regular column ("view"), the bound being 2×:
// writes of new rows ("new", 100,000 keys: both maps grow), and overwrites of 1,000 rows
// ("overwrite": the view row is replaced in place).
func BenchmarkEngineInsertView(b *testing.B) {
	for _, keys := range []int{100000, 1000} {
		for _, withView := range []bool{false, true} {
			name := map[bool]string{false: "none", true: "view"}[withView] + map[int]string{100000: "/new", 1000: "/overwrite"}[keys]
			b.Run(name, func(b *testing.B) { benchInsertView(b, withView, keys) })
		}
	}
}

func benchInsertView(b *testing.B, withView bool, keys int) {
	e, s := newStressEngine(b)
	if withView {
		mustExec(b, e, s, `CREATE MATERIALIZED VIEW keyspace1.by_c0 AS SELECT * FROM keyspace1.standard1 WHERE "C0" IS NOT NULL AND key IS NOT NULL PRIMARY KEY ("C0", key)`)
	}
	pr := mustPrepare(b, e, s, stressInsert)
	key := make([]byte, 10)
	cols := stressCols()
	p := &cql.QueryParams{Flags: cql.QueryValues, Values: stressValues(0, key, cols)}
	if keys < 100000 {
		for i := 0; i < keys; i++ {
			binary.BigEndian.PutUint64(key[2:], uint64(i))
			copy(cols[0], key)
			if _, err := e.Execute(s, pr.ID, p, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint64(key[2:], uint64(i%keys))
		copy(cols[0], key) // a view partition per key
		if _, err := e.Execute(s, pr.ID, p, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The process's CPU time per write, the garbage collector's included: on a busy machine
	// it varies less than the time per write, which waits for a CPU.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process used so far, user and system, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
