package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// auditSink keeps the records the audit log writes, for a test to read while it runs.
type auditSink struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *auditSink) Name() string { return "mem" }
func (m *auditSink) Write(_ context.Context, recs []audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, recs...)
	return nil
}
func (m *auditSink) Sync(context.Context) error  { return nil }
func (m *auditSink) Close(context.Context) error { return nil }

// since returns the records from the n-th on.
func (m *auditSink) since(n int) []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Record(nil), m.recs[min(n, len(m.recs)):]...)
}

func (m *auditSink) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

const auditMarker = "AUDIT-MARKER-5c1e"

var everyCategory = audit.Settings{Enabled: true,
	Categories: 1<<audit.AUTH | 1<<audit.DDL | 1<<audit.DCL | 1<<audit.DML | 1<<audit.QUERY | 1<<audit.ADMIN}

// TestAuditDrivers: with the node requiring a login, the Python driver (at v5), the Node.js
// driver and gocql run through the sidecar a failed login and the statements of each audit
// category; each gives its records, with its category, keyspace, table and user, a failed
// login its username and error, a BATCH's children one batch_id; and neither the marker
// literal nor a password is in any record. A missing driver skips its case, or fails it
// under TRACECAR_REQUIRE_DRIVERS (drivertest's checks).
func TestAuditDrivers(t *testing.T) {
	n := mustNode(t, node.Config{Auth: "cassandra:s3cret"}, nodeAddr)
	sink := &auditSink{}
	log := audit.New(audit.Block, 1024, sink)
	t.Cleanup(func() { log.Close(context.Background()) })
	log.Set(everyCategory)
	tp := mustProxyApart(t, Config{Audit: log}, nil, n)
	o := sidecarOptions(tp, "none")
	o.User, o.Pass = "cassandra", "s3cret"
	for _, drv := range []struct {
		name string
		run  func(t *testing.T, o drivertest.Options, env []string)
	}{
		{"python", func(t *testing.T, _ drivertest.Options, env []string) {
			drivertest.RequirePython(t)
			runDriver(t, env, drivertest.Python, drivertest.ScriptPath("audit_workload.py"))
		}},
		{"nodejs", func(t *testing.T, _ drivertest.Options, env []string) {
			drivertest.RequireNodeJS(t)
			runDriver(t, env, "node", drivertest.ScriptPath("audit_workload.js"))
		}},
		{"gocql", func(t *testing.T, o drivertest.Options, _ []string) { gocqlAuditWorkload(t, o) }},
	} {
		t.Run(drv.name, func(t *testing.T) {
			from := sink.len()
			ks := "audit_" + drv.name
			o := o
			o.Keyspace = ks
			env := append(os.Environ(), "CQL_HOST="+o.Host, fmt.Sprintf("CQL_PORT=%d", o.Port), "CQL_USER="+o.User,
				"CQL_PASS="+o.Pass, "CQL_KEYSPACE="+ks, "CQL_MARKER="+auditMarker, "CQL_BAD_USER=intruder_"+drv.name)
			drv.run(t, o, env)
			waitFor(t, "the records of DROP KEYSPACE", func() bool {
				return hasRecord(sink.since(from), "DDL", "DROP KEYSPACE "+ks, ks, "")
			})
			checkAuditRecords(t, sink.since(from), ks, "intruder_"+drv.name, n.addr)
		})
	}
}

// runDriver runs a driver's workload script (checked by the caller through drivertest),
// failing the test when the script fails.
func runDriver(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	t.Logf("%s", out)
}

// gocqlAuditWorkload is audit_workload.py with gocql.
func gocqlAuditWorkload(t *testing.T, o drivertest.Options) {
	bad := o
	bad.User, bad.Pass = "intruder_gocql", "pw-"+auditMarker
	if s, err := drivertest.Cluster(bad).CreateSession(); err == nil {
		s.Close()
		t.Fatal("the login with a wrong password succeeded")
	}
	s, err := drivertest.Cluster(o).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ks := o.Keyspace
	for _, q := range []string{
		"CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE " + ks + ".t (k int PRIMARY KEY, v text)",
		"ALTER TABLE " + ks + ".t ADD w int",
		"INSERT INTO " + ks + ".t (k, v) VALUES (1, '" + auditMarker + "')",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ins := "INSERT INTO " + ks + ".t (k, v) VALUES (?, ?)"
	if err := s.Query(ins, 2, auditMarker).Exec(); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch(gocql.LoggedBatch)
	b.Query("INSERT INTO " + ks + ".t (k, v) VALUES (3, '" + auditMarker + "')")
	b.Query(ins, 4, auditMarker)
	if err := s.ExecuteBatch(b); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := s.Query("SELECT v FROM " + ks + ".t WHERE k = 1").Scan(&v); err != nil || v != auditMarker {
		t.Fatalf("select: %q, %v", v, err)
	}
	for _, q := range []string{
		"CREATE ROLE " + ks + "_role WITH PASSWORD = '" + auditMarker + "' AND LOGIN = true",
		"GRANT SELECT ON KEYSPACE " + ks + " TO " + ks + "_role",
		"DROP TABLE " + ks + ".t",
		"DROP KEYSPACE " + ks,
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// hasRecord reports whether recs hold one of category cat whose operation starts with op,
// on keyspace ks and table.
func hasRecord(recs []audit.Record, cat, op, ks, table string) bool {
	for _, r := range recs {
		if r.Category == cat && strings.HasPrefix(r.Operation, op) && r.Keyspace == ks && r.Table == table {
			return true
		}
	}
	return false
}

// checkAuditRecords checks the records of one driver's workload on keyspace ks.
func checkAuditRecords(t *testing.T, recs []audit.Record, ks, intruder, node string) {
	t.Helper()
	var failed, loggedIn bool
	for _, r := range recs {
		if r.Category != "AUTH" {
			continue
		}
		switch {
		case r.Username == intruder && r.Error && r.ErrorCode == cql.ErrCodeBadCredentials:
			failed = true
		case r.Username == "cassandra" && !r.Error:
			loggedIn = true
		}
	}
	if !failed || !loggedIn {
		t.Errorf("AUTH records: a failed login of %s %v, a login of cassandra %v; want both", intruder, failed, loggedIn)
	}
	for _, w := range []struct{ cat, op, ks, table string }{
		{"DDL", "CREATE KEYSPACE " + ks, ks, ""},
		{"DDL", "CREATE TABLE " + ks + ".t", ks, "t"},
		{"DDL", "ALTER TABLE " + ks + ".t ADD w int", ks, "t"},
		{"DML", "INSERT INTO " + ks + ".t (k, v) VALUES (?, ?)", ks, "t"},
		{"QUERY", "SELECT", ks, "t"},
		{"DCL", "CREATE ROLE " + ks + "_role WITH PASSWORD = ?", "", ""},
		{"DCL", "GRANT SELECT ON KEYSPACE " + ks, "", ""},
		{"DDL", "DROP TABLE " + ks + ".t", ks, "t"},
	} {
		if !hasRecord(recs, w.cat, w.op, w.ks, w.table) {
			t.Errorf("no %s record %q on %s.%s", w.cat, w.op, w.ks, w.table)
		}
	}
	batches := map[string]int{}
	for _, r := range recs {
		if r.Category != "AUTH" && r.Username != "cassandra" {
			t.Errorf("record %+v: username %q; want the connection's, cassandra", r, r.Username)
		}
		if r.BatchID != "" && r.Keyspace == ks {
			batches[r.BatchID]++
		}
		if !strings.HasPrefix(r.Source, "127.0.0.1:") || r.Node != node {
			t.Errorf("record %+v: source %q, node %q; want 127.0.0.1:port and %s", r, r.Source, r.Node, node)
		}
	}
	if len(batches) != 1 {
		t.Errorf("batch_ids on %s: %v; want one, for the BATCH's two children", ks, batches)
	}
	for id, n := range batches {
		if n != 2 {
			t.Errorf("batch %s: %d records; want 2", id, n)
		}
	}
	js, _ := json.Marshal(recs)
	if strings.Contains(string(js), auditMarker) || strings.Contains(string(js), "s3cret") {
		t.Errorf("the marker or a password in the audit records:\n%s", js)
	}
}

// TestAuditFiltersDriver: through the sidecar, with gocql and the node requiring a login,
// the audit log writes the records its settings ask for and no other: the categories, the
// tables, and the users excluded (whose logins too are left out).
func TestAuditFiltersDriver(t *testing.T) {
	n := mustNode(t, node.Config{Auth: "cassandra:s3cret"}, nodeAddr)
	sink := &auditSink{}
	log := audit.New(audit.Block, 1024, sink)
	t.Cleanup(func() { log.Close(context.Background()) })
	tp := mustProxyApart(t, Config{Audit: log}, nil, n)
	o := sidecarOptions(tp, "none")
	o.User, o.Pass = "cassandra", "s3cret"
	admin, err := drivertest.Cluster(o).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	mustExec := func(s *gocql.Session, qs ...string) {
		t.Helper()
		for _, q := range qs {
			if err := s.Query(q).Exec(); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	mustExec(admin, "CREATE KEYSPACE flt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE flt.a (k int PRIMARY KEY, v text)", "CREATE TABLE flt.b (k int PRIMARY KEY, v text)",
		"CREATE ROLE bot WITH PASSWORD = 'bot-pw' AND LOGIN = true", "GRANT ALL PERMISSIONS ON KEYSPACE flt TO bot")
	log.Set(audit.Settings{Enabled: true, Categories: 1<<audit.AUTH | 1<<audit.DML | 1<<audit.DDL,
		Tables: map[string]bool{"flt.a": true}, ExcludeUsers: map[string]bool{"bot": true}})
	from := sink.len()
	bo := o
	bo.User, bo.Pass = "bot", "bot-pw"
	bot, err := drivertest.Cluster(bo).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Close()
	mustExec(bot, "INSERT INTO flt.a (k, v) VALUES (1, 'bot')")
	mustExec(admin, "INSERT INTO flt.a (k, v) VALUES (2, 'x')", "INSERT INTO flt.b (k, v) VALUES (3, 'x')",
		"SELECT * FROM flt.a", "ALTER TABLE flt.a ADD w int", "CREATE ROLE other", "DROP KEYSPACE flt")
	if err := log.Close(context.Background()); err != nil { // writes what is queued
		t.Fatal(err)
	}
	var got []string
	for _, r := range sink.since(from) {
		got = append(got, r.Category+" "+r.Username+" "+r.Operation)
	}
	want := []string{"DML cassandra INSERT INTO flt.a (k, v) VALUES (?, ?)", "DDL cassandra ALTER TABLE flt.a ADD w int"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
