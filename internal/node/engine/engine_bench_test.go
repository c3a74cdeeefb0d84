package engine

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// mustExec runs a query and fails the test on error.
func mustExec(tb testing.TB, e *Engine, s *Session, query string, vals ...[]byte) cql.Message {
	tb.Helper()
	p := &cql.QueryParams{}
	for _, v := range vals {
		p.Values = append(p.Values, cql.Value{Bytes: v})
	}
	m, err := e.Query(s, query, p, nil)
	if err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return m
}

func mustPrepare(tb testing.TB, e *Engine, s *Session, query string) cql.PreparedResult {
	tb.Helper()
	pr, err := e.Prepare(s, query, nil)
	if err != nil {
		tb.Fatalf("prepare %s: %v", query, err)
	}
	return pr
}

// newStressEngine returns an engine with cassandra-stress's keyspace1.standard1.
func newStressEngine(tb testing.TB) (*Engine, *Session) {
	tb.Helper()
	e := NewEngine(EngineConfig{})
	s := &Session{}
	mustExec(tb, e, s, "CREATE KEYSPACE keyspace1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(tb, e, s, `CREATE TABLE keyspace1.standard1 (key blob PRIMARY KEY, "C0" blob, "C1" blob, "C2" blob, "C3" blob, "C4" blob)`)
	return e, s
}

const stressInsert = `INSERT INTO keyspace1.standard1 (key, "C0", "C1", "C2", "C3", "C4") VALUES (?, ?, ?, ?, ?, ?)`
const stressSelect = `SELECT * FROM keyspace1.standard1 WHERE key = ?`

func stressValues(i int, key []byte, cols [][]byte) []cql.Value {
	binary.BigEndian.PutUint64(key[2:], uint64(i))
	vals := make([]cql.Value, 0, 6)
	vals = append(vals, cql.Value{Bytes: key})
	for _, c := range cols {
		vals = append(vals, cql.Value{Bytes: c})
	}
	return vals
}

func stressCols() [][]byte {
	cols := make([][]byte, 5)
	for i := range cols {
		cols[i] = make([]byte, 34)
		for j := range cols[i] {
			cols[i][j] = byte(i + j)
		}
	}
	return cols
}

func BenchmarkEngineInsert(b *testing.B) {
	e, s := newStressEngine(b)
	pr := mustPrepare(b, e, s, stressInsert)
	key := make([]byte, 10)
	cols := stressCols()
	p := &cql.QueryParams{Flags: cql.QueryValues, Values: stressValues(0, key, cols)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint64(key[2:], uint64(i%100000))
		if _, err := e.Execute(s, pr.ID, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEngineSelect(b *testing.B) {
	e, s := newStressEngine(b)
	ins := mustPrepare(b, e, s, stressInsert)
	key := make([]byte, 10)
	cols := stressCols()
	const n = 10000
	for i := 0; i < n; i++ {
		if _, err := e.Execute(s, ins.ID, &cql.QueryParams{Values: stressValues(i, key, cols)}, nil); err != nil {
			b.Fatal(err)
		}
	}
	sel := mustPrepare(b, e, s, stressSelect)
	p := &cql.QueryParams{Flags: cql.QueryValues | cql.QuerySkipMetadata | cql.QueryPageSize, PageSize: 5000, Values: []cql.Value{{Bytes: key}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint64(key[2:], uint64(i%n))
		m, err := e.Execute(s, sel.ID, p, nil)
		if err != nil {
			b.Fatal(err)
		}
		if rows := m.(cql.RowsResult).Rows; len(rows) != 1 {
			b.Fatalf("got %d rows; want 1", len(rows))
		}
	}
}

func BenchmarkEngineInsertParallel(b *testing.B) {
	e, s := newStressEngine(b)
	pr := mustPrepare(b, e, s, stressInsert)
	cols := stressCols()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := make([]byte, 10)
		p := &cql.QueryParams{Values: stressValues(0, key, cols)}
		s := &Session{}
		i := 0
		for pb.Next() {
			i++
			binary.BigEndian.PutUint64(key[2:], uint64(i%100000))
			if _, err := e.Execute(s, pr.ID, p, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEngineQueryUnprepared(b *testing.B) {
	e, s := newStressEngine(b)
	mustExec(b, e, s, `INSERT INTO keyspace1.standard1 (key, "C0") VALUES (0x01, 0x02)`)
	p := &cql.QueryParams{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Query(s, `SELECT * FROM keyspace1.standard1 WHERE key = 0x01`, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestInsertAllocs holds the write path of an existing partition to one allocation: the
// buffer that owns the written values (writePlan.exec). The cell operations stay on the
// stack (tableData.apply takes them apart from the mutation); they were 512 bytes a write.
func TestInsertAllocs(t *testing.T) {
	e, s := newStressEngine(t)
	pr := mustPrepare(t, e, s, stressInsert)
	key := make([]byte, 10)
	p := &cql.QueryParams{Flags: cql.QueryValues, Values: stressValues(7, key, stressCols())}
	if _, err := e.Execute(s, pr.ID, p, nil); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := e.Execute(s, pr.ID, p, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("an INSERT into an existing partition allocates %v times; want at most 1", allocs)
	}
}

// BenchmarkWriteTrace stores the trace of a sampled write: its session and the events the
// node records for one (TestTraceEventsAreWhatTheNodeDoes), each session a new partition.
func BenchmarkWriteTrace(b *testing.B) {
	e := NewEngine(EngineConfig{})
	src := netip.MustParseAddr("127.0.0.1")
	start := time.Now()
	ts := TraceSession{Client: netip.MustParseAddr("127.0.0.2"), Command: "EXECUTE", Coordinator: src,
		Duration: 300 * time.Microsecond, Parameters: map[string]string{"consistency_level": "ONE"},
		Request: "Execute CQL3 prepared query", StartedAt: start}
	for _, a := range []string{"Parsing", "Preparing statement", "Determining replicas for mutation",
		"Appending to commitlog", "Adding to standard1 memtable", "Applied 1 mutations to standard1", "Request complete"} {
		ts.Events = append(ts.Events, TraceEvent{ID: cql.NewTimeUUID(start), Activity: a, Source: src,
			SourceElapsed: 20 * time.Microsecond, Thread: "Native-Transport-Requests-1"})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		binary.BigEndian.PutUint64(ts.ID[:], uint64(i))
		e.WriteTrace(ts)
	}
}
