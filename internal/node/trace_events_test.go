package node_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// traceIDs is a gocql.Tracer that keeps the ids of the sessions it is given, in order: a
// statement gocql prepares has one for the PREPARE and one for the EXECUTE.
type traceIDs struct{ ids [][]byte }

func (t *traceIDs) Trace(id []byte) { t.ids = append(t.ids, id) }

// invented are the activities of a Cassandra node that the embedded node has no work for:
// it has no sstables, memtables, commit log, replicas to pick or tombstones to count.
var invented = []string{"sstable", "memtable", "commitlog", "tombstone", "replicas"}

// TestTraceEventsAreWhatTheNodeDoes traces statements through gocql and reads the node's
// own system_traces.events for each: they are exactly the steps the node took (parsing or
// the statement cache, the read of the in-memory store and the rows it read, the write
// applied), in order, with source_elapsed never decreasing, and nothing a Cassandra node
// would do that this one does not.
func TestTraceEventsAreWhatTheNodeDoes(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	s, err := drivertest.Cluster(options(ap, "none")).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE tev WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE tev.kv (k int PRIMARY KEY, v text)",
		"INSERT INTO tev.kv (k, v) VALUES (2, 'b')",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const (
		ins    = "INSERT INTO tev.kv (k, v) VALUES (?, ?)"
		insLWT = "INSERT INTO tev.kv (k, v) VALUES (?, ?) IF NOT EXISTS"
		one    = "SELECT v FROM tev.kv WHERE k = ?"
		three  = "SELECT v FROM tev.kv WHERE k IN (?, ?, ?)"
		scan   = "SELECT * FROM tev.kv"
		b1, b2 = "INSERT INTO tev.kv (k, v) VALUES (3, 'c')", "INSERT INTO tev.kv (k, v) VALUES (4, 'd')"
	)
	query := func(q string, args ...any) func(gocql.Tracer) error {
		return func(tr gocql.Tracer) error { return s.Query(q, args...).Trace(tr).Exec() }
	}
	// A batch of statements without values is sent unprepared: the node parses each one,
	// or finds it in its statement cache.
	batch := func(tr gocql.Tracer) error {
		b := s.NewBatch(gocql.LoggedBatch)
		b.Query(b1)
		b.Query(b2)
		b.Trace(tr)
		return s.ExecuteBatch(b)
	}
	prepare := func(q string) []string { return []string{"Parsing " + q, "Preparing statement", "Request complete"} }
	for _, tt := range []struct {
		name string
		run  func(gocql.Tracer) error
		want [][]string // the events of each traced session, in order
	}{
		{"write, prepared", query(ins, 1, "a"), [][]string{
			prepare(ins),
			{"Executing prepared statement", "Applied 1 mutations to kv", "Request complete"}}},
		{"write, executed again", query(ins, 1, "a"), [][]string{
			{"Executing prepared statement", "Applied 1 mutations to kv", "Request complete"}}},
		{"conditional write not applied", query(insLWT, 1, "c"), [][]string{
			prepare(insLWT),
			{"Executing prepared statement", "Condition not met on kv: 0 mutations applied", "Request complete"}}},
		{"read of one partition", query(one, 1), [][]string{
			prepare(one),
			{"Executing prepared statement", "Executing single-partition query on kv", "Read 1 live rows", "Request complete"}}},
		{"read of three partitions", query(three, 1, 2, 5), [][]string{
			prepare(three),
			{"Executing prepared statement", "Executing query on 3 partitions of kv", "Read 2 live rows", "Request complete"}}},
		{"scan", query(scan), [][]string{
			prepare(scan),
			{"Executing prepared statement", "Scanning the partitions of kv", "Read 2 live rows", "Request complete"}}},
		{"unprepared batch, parsed", batch, [][]string{{
			"Parsing " + b1, "Preparing statement", "Parsing " + b2, "Preparing statement",
			"Applied 1 mutations to kv", "Applied 1 mutations to kv", "Applied batch of 2 mutations", "Request complete"}}},
		{"unprepared batch, from the cache", batch, [][]string{{
			"Statement found in cache", "Statement found in cache",
			"Applied 1 mutations to kv", "Applied 1 mutations to kv", "Applied batch of 2 mutations", "Request complete"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var tr traceIDs
			if err := tt.run(&tr); err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, b := range tr.ids {
				id, err := gocql.UUIDFromBytes(b)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, events(t, s, id))
			}
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("events of each session:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// events returns the activities of one session's system_traces.events, in order, and
// fails if source_elapsed decreases or an activity is one the node has no work for.
func events(tb testing.TB, s *gocql.Session, id gocql.UUID) []string {
	tb.Helper()
	iter := s.Query("SELECT activity, source_elapsed FROM system_traces.events WHERE session_id = ?", id).Iter()
	var (
		activity string
		elapsed  int
		got      []string
		last     = -1
	)
	for iter.Scan(&activity, &elapsed) {
		got = append(got, activity)
		if elapsed < last {
			tb.Errorf("%q at source_elapsed %d µs, after an event at %d µs", activity, elapsed, last)
		}
		last = elapsed
		for _, w := range invented {
			if strings.Contains(strings.ToLower(activity), w) {
				tb.Errorf("event %q: the node does no such work", activity)
			}
		}
	}
	if err := iter.Close(); err != nil {
		tb.Fatal(err)
	}
	return got
}
