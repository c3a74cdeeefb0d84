package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// TestSlowLogFiltersWithGocql: at threshold 0, gocql's own system queries (its control
// connection reads system.local, system.peers and system_schema) sit in the slow log
// beside the application's. include_system=false leaves only the application's,
// sort=duration puts the slowest first, keyspace and table narrow them, and the headers
// say how many matched (issue 47, findings 1 and 3).
func TestSlowLogFiltersWithGocql(t *testing.T) {
	st := mustStack(t, stackConfig{RingSize: 5000})
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	mustKeyValueTable(t, s, "slowlog_app", "text")
	const n = 50
	for i := range n {
		if err := s.Query("INSERT INTO slowlog_app.kv (k, v) VALUES (?, ?)", i, "v").Exec(); err != nil {
			t.Fatal(err)
		}
	}
	get := func(query string) ([]tracing.Session, int) {
		t.Helper()
		resp, err := http.Get(st.Admin + "/tracecar/slow_log?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("slow_log?%s: %s", query, resp.Status)
		}
		var out []tracing.Session
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		matched, _ := strconv.Atoi(resp.Header.Get(admin.HeaderMatched))
		return out, matched
	}
	all, total := get("limit=100000")
	system := 0
	for _, sess := range all {
		if ks, _ := sess.Target(); statements.IsSystemKeyspace(ks) {
			system++
		}
	}
	if system == 0 || total != len(all) {
		t.Fatalf("%d sessions (%d matched), %d of them the driver's system queries; want some of those", len(all), total, system)
	}
	app, matched := get("include_system=false&limit=100000")
	if matched != total-system || len(app) != matched {
		t.Errorf("include_system=false: %d sessions, %d matched; want %d", len(app), matched, total-system)
	}
	for _, sess := range app {
		if ks, _ := sess.Target(); statements.IsSystemKeyspace(ks) {
			t.Errorf("include_system=false shows a %s query: %s", ks, sess.Parameters["query"])
		}
	}
	slowest, matched := get("keyspace=slowlog_app&table=kv&sort=duration&limit=10")
	if matched < n || len(slowest) != 10 {
		t.Fatalf("keyspace=slowlog_app&table=kv: %d matched, %d answered; want at least %d, and 10", matched, len(slowest), n)
	}
	for i, sess := range slowest {
		if !strings.Contains(sess.Parameters["query"], "slowlog_app.kv") {
			t.Errorf("table=kv shows %q", sess.Parameters["query"])
		}
		if i > 0 && sess.DurationUS > slowest[i-1].DurationUS {
			t.Errorf("sort=duration: %d µs after %d µs", sess.DurationUS, slowest[i-1].DurationUS)
		}
	}
	resp, err := http.Get(st.Admin + "/tracecar/slow_log?sort=duration&min_duration=100&bogus=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("an unknown parameter: %s; want 400", resp.Status)
	}
}

// mustKeyValueTable creates keyspace ks with a table kv (k int PRIMARY KEY, v of type
// valueType) through s, for a test's application traffic.
func mustKeyValueTable(t *testing.T, s *gocql.Session, ks, valueType string) {
	t.Helper()
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS " + ks + ".kv (k int PRIMARY KEY, v " + valueType + ")",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatal(err)
		}
	}
}
