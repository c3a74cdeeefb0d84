package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing/statements"
)

// statementsScript is the Python-driver workload of TestStatementStatsPythonDriver: three
// prepared statements called 1,000, 100 and 10 times, 50 unprepared SELECTs that differ
// only in their literal, and 5 full scans (SELECT count(*)). The driver's own control queries (system.local, system.peers,
// system_schema.*) and the DDL run through the sidecar too.
const statementsScript = `
import os, sys
from cassandra.cluster import Cluster
host, port = os.environ["CQL_HOST"], int(os.environ["CQL_PORT"])
cluster = Cluster([host], port=port, compression="lz4", connect_timeout=20, control_connection_timeout=20)
s = cluster.connect()
s.execute("DROP KEYSPACE IF EXISTS stmt_ks")
s.execute("CREATE KEYSPACE stmt_ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE stmt_ks.t (k int PRIMARY KEY, v int)")
ins = s.prepare("INSERT INTO stmt_ks.t (k, v) VALUES (?, ?)")
sel = s.prepare("SELECT v FROM stmt_ks.t WHERE k = ?")
upd = s.prepare("UPDATE stmt_ks.t SET v = ? WHERE k = ?")
for i in range(1000):
    s.execute(ins, (i, i))
for i in range(100):
    assert s.execute(sel, (i,)).one().v == i
for i in range(10):
    s.execute(upd, (i + 1, i))
for i in range(50):
    s.execute("SELECT v FROM stmt_ks.t WHERE k = %d" % (i + 500))
for i in range(5):
    assert s.execute("SELECT count(*) FROM stmt_ks.t").one()[0] == 1000
cluster.shutdown()
print("done")
`

// TestStatementStatsPythonDriver is the acceptance test of statement statistics: a real
// driver (with lz4 compression) through a real sidecar, statistics turned on over the
// admin API, then /tracecar/statements?sort=calls and the anti-pattern counter.
func TestStatementStatsPythonDriver(t *testing.T) {
	drivertest.RequirePythonModules(t, "python3-cassandra, python3-lz4", "cassandra", "lz4")
	st := mustStack(t, stackConfig{})
	var posts atomic.Int64
	c := newAdminClient(st.Admin, &posts)
	defer c.close()
	if err := c.post("/tracecar/statement_stats?enable=true"); err != nil {
		t.Fatal(err)
	}

	script := filepath.Join(t.TempDir(), "statements.py")
	if err := os.WriteFile(script, []byte(statementsScript), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(st.Sidecar)
	cmd := exec.Command(drivertest.Python, script)
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python workload: %v\n%s", err, out)
	}

	var list []statements.Statement
	if err := c.get("/tracecar/statements?sort=calls&limit=1000", &list); err != nil {
		t.Fatal(err)
	}
	var ours []statements.Statement
	for _, s := range list {
		if s.Keyspace == "stmt_ks" {
			ours = append(ours, s)
		}
	}
	want := []struct {
		text     string
		prepared bool
		calls    uint64
	}{
		{"INSERT INTO stmt_ks.t (k, v) VALUES (?, ?)", true, 1000},
		{"SELECT v FROM stmt_ks.t WHERE k = ?", true, 100},
		{"SELECT v FROM stmt_ks.t WHERE k = ?", false, 50},
		{"UPDATE stmt_ks.t SET v = ? WHERE k = ?", true, 10},
		{"SELECT count(*) FROM stmt_ks.t", false, 5},
	}
	if len(ours) != len(want) {
		t.Fatalf("statements on stmt_ks: %+v, want %d entries", ours, len(want))
	}
	for i, w := range want {
		got := ours[i]
		if got.Statement != w.text || got.Prepared != w.prepared || got.Calls != w.calls {
			t.Errorf("entry %d: %q prepared=%v calls=%d; want %q prepared=%v calls=%d",
				i, got.Statement, got.Prepared, got.Calls, w.text, w.prepared, w.calls)
		}
		if got.Consistency["LOCAL_ONE"] != w.calls || len(got.Errors) != 0 || got.Table != "t" {
			t.Errorf("entry %d: consistency %v errors %v table %q", i, got.Consistency, got.Errors, got.Table)
		}
		if got.TotalTimeUS == 0 || got.P50US == 0 || got.P99US < got.P50US || got.MaxUS < got.P99US {
			t.Errorf("entry %d: times total %d p50 %d p99 %d max %d", i, got.TotalTimeUS, got.P50US, got.P99US, got.MaxUS)
		}
	}
	// Each SELECT returned one row (rows are counted from lz4-compressed responses too).
	if ours[1].Rows != 100 || ours[2].Rows != 50 {
		t.Errorf("rows: prepared SELECT %d, unprepared SELECT %d; want 100 and 50", ours[1].Rows, ours[2].Rows)
	}

	// The anti-pattern counter: every series of kind unprepared, whatever its labels, adds
	// up to the 50 SELECTs. The driver's control queries read system keyspaces, and the
	// DDL and USE are not DML, so none of them counts.
	series := scrape(t, st.Admin, "tracecar_cql_antipatterns_total")
	var unprepared float64
	for labels, v := range series {
		if strings.Contains(labels, `kind="unprepared"`) {
			unprepared += v
		}
	}
	if unprepared != 50 || series[`{keyspace="stmt_ks",kind="unprepared",table="t"}`] != 50 {
		t.Errorf("unprepared anti-patterns: %v, want 50 on stmt_ks.t", series)
	}
	// The five SELECT count(*) read every partition: full scans (issue 47, finding 11).
	if n := series[`{keyspace="stmt_ks",kind="full_scan",table="t"}`]; n != 5 {
		t.Errorf("full_scan anti-patterns on stmt_ks.t: %v; want 5 (the SELECT count(*))", n)
	}

	// Off: nothing more is counted; reset empties the list.
	if err := c.post("/tracecar/statement_stats?enable=false"); err != nil {
		t.Fatal(err)
	}
	if err := c.post("/tracecar/statements/reset"); err != nil {
		t.Fatal(err)
	}
	if err := c.get("/tracecar/statements", &list); err != nil || len(list) != 0 {
		t.Errorf("after reset: %v %+v", err, list)
	}
}

// scrape returns the samples of metric name on /metrics by their label set.
func scrape(t *testing.T, base, name string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q", line)
		}
		out[line[len(name):i]] = v
	}
	return out
}
