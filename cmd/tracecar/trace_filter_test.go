package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
)

const filterPassword = "Pa55-w0rd-zqxj"

// filterScript loads tables t1 and t2 through the sidecar, authenticated with SASL PLAIN.
const filterScript = `
import os
from cassandra.cluster import Cluster
from cassandra.auth import PlainTextAuthProvider
cluster = Cluster([os.environ["CQL_HOST"]], port=int(os.environ["CQL_PORT"]), compression="lz4",
                  auth_provider=PlainTextAuthProvider("alice", os.environ["CQL_PASS"]),
                  connect_timeout=20, control_connection_timeout=20)
s = cluster.connect()
s.execute("CREATE KEYSPACE IF NOT EXISTS fk WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE IF NOT EXISTS fk.t1 (k int PRIMARY KEY, v int)")
s.execute("CREATE TABLE IF NOT EXISTS fk.t2 (k int PRIMARY KEY, v int)")
i1 = s.prepare("INSERT INTO fk.t1 (k, v) VALUES (?, ?)")
i2 = s.prepare("INSERT INTO fk.t2 (k, v) VALUES (?, ?)")
for i in range(40):
    s.execute(i1, (i, i))
    s.execute(i2, (i, i))
    s.execute("SELECT v FROM fk.t1 WHERE k = %d" % i)
    s.execute("SELECT v FROM fk.t2 WHERE k = %d" % i)
cluster.shutdown()
`

// TestTraceFilterAndUsername: full mode with threshold 0 and trace_filter?table=t1, a
// Python-driver load on t1 and t2 through a sidecar in front of a node with password
// authentication. Only t1 sessions are recorded, each carries the username (in the ring,
// the spans and the CQL sink's rows), and the password appears in none of the log, the
// ring, the spans or the sink's rows.
func TestTraceFilterAndUsername(t *testing.T) {
	drivertest.RequirePythonModules(t, "python3-cassandra, python3-lz4", "cassandra", "lz4")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := node.New(node.Config{Auth: "alice:" + filterPassword})
	nln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, nln)

	logBuf, spans := new(lockedBuffer), new(lockedBuffer)
	// The "stdout" span exporter writes to os.Stdout: read it through a pipe.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = pw
	copied := make(chan struct{})
	go func() { io.Copy(spans, pr); close(copied) }()
	restore := sync.OnceFunc(func() { os.Stdout = stdout; pw.Close(); <-copied })
	defer restore()
	reg, err := logs.New(logs.Config{Writer: logBuf, Level: "trace"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	st, err := startStack(ctx, stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", Node: nln.Addr().String(),
		RingSize: 10000, OTLPEndpoint: "stdout", CQLSink: true, NodeUsername: "alice", NodePassword: filterPassword}, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	var posts atomic.Int64
	c := newAdminClient(st.Admin, &posts)
	defer c.close()
	if err := c.post("/tracecar/trace_filter?table=t1"); err != nil {
		t.Fatal(err)
	}
	var f tracing.Filter
	if err := c.get("/tracecar/trace_filter", &f); err != nil || f.Table != "t1" {
		t.Fatalf("GET filter: %+v %v", f, err)
	}

	script := filepath.Join(t.TempDir(), "filter.py")
	if err := os.WriteFile(script, []byte(filterScript), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(st.Sidecar)
	cmd := exec.Command(drivertest.Python, script)
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port, "CQL_PASS="+filterPassword)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python workload: %v\n%s", err, out)
	}

	sessions := st.tracer.SlowLog(10000)
	var t1 int
	for _, s := range sessions {
		q := s.Parameters["query"]
		if !strings.Contains(q, "fk.t1") {
			t.Errorf("recorded a session outside the filter: %s %q", s.Command, q)
			continue
		}
		t1++
		if s.Username != "alice" {
			t.Errorf("session %s has username %q, want alice", s.ID, s.Username)
		}
	}
	// 40 INSERT EXECUTEs and 40 SELECT QUERYs on t1, and the PREPARE of its INSERT.
	if t1 < 80 {
		t.Errorf("%d t1 sessions recorded, want at least 80", t1)
	}
	ring, _ := json.Marshal(sessions)
	if err := st.stop(); err != nil { // flushes the spans
		t.Fatal(err)
	}
	restore()
	if !strings.Contains(spans.String(), `"db.user","Value":{"Type":"STRING","Value":"alice"}`) {
		t.Errorf("no span carries db.user alice")
	}
	if !strings.Contains(spans.String(), "fk.t1") {
		t.Errorf("no span for t1 reached the stdout exporter: %.500s", spans.String())
	}
	sinkRows := readSinkRows(t, nln.Addr().String(), filterPassword)
	if n := strings.Count(sinkRows, `"username":"alice"`); n < 80 {
		t.Errorf("%d CQL sink session rows carry username alice; want at least 80", n)
	}
	for what, s := range map[string]string{"log": logBuf.String(), "ring": string(ring), "spans": spans.String(), "CQL sink": sinkRows} {
		if strings.Contains(s, filterPassword) {
			t.Errorf("the password appears in the %s", what)
		}
	}
}

// readSinkRows reads every row of the CQL sink's sessions and events tables from the node
// at addr, logging in as alice, as JSON lines.
func readSinkRows(tb testing.TB, addr, password string) string {
	tb.Helper()
	host, port, _ := strings.Cut(addr, ":")
	c := gocql.NewCluster(host)
	c.Port = atoi(tb, port)
	c.Authenticator = gocql.PasswordAuthenticator{Username: "alice", Password: password}
	s, err := c.CreateSession()
	if err != nil {
		tb.Fatalf("gocql to the node %s: %v", addr, err)
	}
	defer s.Close()
	var b strings.Builder
	for _, table := range []string{"sessions", "events", "node_slow_log"} {
		iter := s.Query("SELECT * FROM tracecar_traces." + table).Iter()
		for {
			row := map[string]any{}
			if !iter.MapScan(row) {
				break
			}
			line, _ := json.Marshal(row)
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := iter.Close(); err != nil {
			tb.Fatalf("read tracecar_traces.%s: %v", table, err)
		}
	}
	return b.String()
}
