package auditsink

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing/cqlsink"
)

// python is the interpreter that has Debian's python3-cassandra (drivertest.Python).
const python = "/usr/bin/python3"

// mustNode starts an embedded node on 127.0.0.1:0 and returns its address.
func mustNode(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := node.New(node.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// mustConnector returns the sidecar's kind of node session to addr, closed in Cleanup.
func mustConnector(tb testing.TB, addr string) *cqlsink.Connector {
	tb.Helper()
	c := &cqlsink.Connector{Addr: addr}
	tb.Cleanup(c.Close)
	return c
}

// readBack is what the Python driver reads of audit.audit_log: its schema and its rows.
type readBack struct {
	Replication map[string]string `json:"replication"`
	Columns     map[string]string `json:"columns"`
	Partition   []string          `json:"partition"`
	Clustering  []string          `json:"clustering"`
	Rows        []map[string]any  `json:"rows"`
}

// pythonRead reads audit.audit_log through the Python driver, at its defaults.
const pythonRead = `
import json, os, sys
from cassandra.cluster import Cluster
host, port = os.environ["CQL_HOST"], int(os.environ["CQL_PORT"])
cluster = Cluster([host], port=port)
s = cluster.connect()
out = {"columns": {}, "partition": [], "clustering": [], "rows": []}
ks = s.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'audit'").one()
out["replication"] = dict(ks.replication)
kinds = {}
for c in s.execute("SELECT column_name, type, kind, position FROM system_schema.columns WHERE keyspace_name = 'audit' AND table_name = 'audit_log'"):
    out["columns"][c.column_name] = c.type
    kinds.setdefault(c.kind, []).append((c.position, c.column_name))
out["partition"] = [n for _, n in sorted(kinds.get("partition_key", []))]
out["clustering"] = [n for _, n in sorted(kinds.get("clustering", []))]
for r in s.execute("SELECT * FROM audit.audit_log"):
    row = {}
    for k, v in r._asdict().items():
        if k == "event_time":
            row[k] = str(v)
            row["event_time_ms"] = int((v.time - 0x01B21DD213814000) // 10000)
        elif k == "date":
            row[k] = v.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        elif v is None or isinstance(v, (bool, int, str)):
            row[k] = v
        else:
            row[k] = str(v)
    out["rows"].append(row)
print(json.dumps(out))
cluster.shutdown()
`

func mustPythonRead(t *testing.T, addr string) readBack {
	t.Helper()
	drivertest.RequirePythonModules(t, "python3-cassandra", "cassandra")
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(python, "-c", pythonRead)
	cmd.Env = append(cmd.Environ(), "CQL_HOST="+host, "CQL_PORT="+port)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("the Python driver (%s with python3-cassandra, which .ci/run installs) failed: %v\n%s", python, err, stderr)
	}
	var rb readBack
	if err := json.Unmarshal(out, &rb); err != nil {
		t.Fatalf("read the Python driver's output: %v\n%s", err, out)
	}
	return rb
}

// records returns n records over two days and two nodes, with text that needs quoting,
// an AUTH failure and a BATCH's children.
func records(n int) []audit.Record {
	day := time.Date(2026, 12, 6, 23, 59, 59, 900_000_000, time.UTC)
	recs := make([]audit.Record, n)
	for i := range recs {
		recs[i] = audit.Record{
			EventTime: day.Add(time.Duration(i) * 10 * time.Millisecond), Node: "127.0.0.1:9042",
			Source: fmt.Sprintf("10.0.0.%d:5%04d", i%200+1, i), Username: "élodie", Category: "DML",
			Operation: fmt.Sprintf("INSERT INTO ks.t (k, v) VALUES (?, ?) -- 'n°%d'", i), Keyspace: "ks", Table: "t",
			Consistency: "LOCAL_QUORUM", BatchID: "b-" + fmt.Sprint(i/10),
		}
	}
	if n < 4 {
		return recs
	}
	recs[1].Node = "::1"
	recs[2].Category, recs[2].Operation, recs[2].Error, recs[2].ErrorCode = "AUTH", "LOGIN", true, 0x0100
	recs[2].Keyspace, recs[2].Table, recs[2].Consistency, recs[2].BatchID = "", "", "", ""
	recs[3].Source = "admin-api" // not an address: null
	return recs
}

// TestTableReadsBackThroughPython writes records through the sidecar's node session and
// reads them back from the embedded node with the Python driver: ScyllaDB's schema plus
// error_code and batch_id, every field intact, in order within each partition.
func TestTableReadsBackThroughPython(t *testing.T) {
	addr := mustNode(t)
	sink := NewTable(mustConnector(t, addr))
	ctx := context.Background()
	recs := records(300) // past midnight, so two days, and more than a batch holds
	for i := 0; i < len(recs); i += 100 {
		if err := sink.Write(ctx, recs[i:i+100]); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rb := mustPythonRead(t, addr)

	wantCols := map[string]string{"date": "timestamp", "node": "inet", "event_time": "timeuuid", "category": "text",
		"consistency": "text", "table_name": "text", "keyspace_name": "text", "operation": "text", "source": "inet",
		"username": "text", "error": "boolean", "error_code": "int", "batch_id": "text"}
	if !reflect.DeepEqual(rb.Columns, wantCols) {
		t.Errorf("columns = %v; want %v", rb.Columns, wantCols)
	}
	if fmt.Sprint(rb.Partition, rb.Clustering) != "[date node] [event_time]" {
		t.Errorf("primary key = (%v), %v; want ((date, node), event_time)", rb.Partition, rb.Clustering)
	}
	if rb.Replication["class"] != "org.apache.cassandra.locator.NetworkTopologyStrategy" || rb.Replication["datacenter1"] != "1" {
		t.Errorf("replication = %v; want NetworkTopologyStrategy with datacenter1: 1, the nodes it has", rb.Replication)
	}
	checkRows(t, rb.Rows, recs, true, 3) // two days on 127.0.0.1, one on ::1
}

// checkRows checks that rows hold exactly recs, in order within each partition.
func checkRows(t *testing.T, rows []map[string]any, recs []audit.Record, extra bool, partitions int) {
	t.Helper()
	if len(rows) != len(recs) {
		t.Fatalf("read %d rows; want %d", len(rows), len(recs))
	}
	byOp := map[string]audit.Record{}
	for _, r := range recs {
		byOp[r.Operation] = r
	}
	last := map[string]float64{}
	seen := map[string]bool{}
	for _, row := range rows {
		op, _ := row["operation"].(string)
		r, ok := byOp[op]
		if !ok || seen[op] {
			t.Errorf("row %v: not a record written, or read twice", row)
			continue
		}
		seen[op] = true
		node, src := netip.MustParseAddr("127.0.0.1"), "<nil>"
		if r.Node == "::1" {
			node = netip.MustParseAddr("::1")
		}
		if ap, err := netip.ParseAddrPort(r.Source); err == nil {
			src = ap.Addr().String()
		}
		want := map[string]any{
			"date": r.EventTime.Truncate(24 * time.Hour).Format("2006-01-02T15:04:05.000000Z"), "node": node.String(),
			"category": r.Category, "consistency": r.Consistency, "table_name": r.Table, "keyspace_name": r.Keyspace,
			"operation": r.Operation, "source": src, "username": r.Username, "error": r.Error,
		}
		if extra {
			want["error_code"], want["batch_id"] = float64(r.ErrorCode), r.BatchID
		}
		got := map[string]any{}
		for k, v := range row {
			if k != "event_time" && k != "event_time_ms" {
				if v == nil {
					v = "<nil>"
				}
				got[k] = v
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("row %v; want %v", got, want)
		}
		if ms := row["event_time_ms"].(float64); int64(ms) != r.EventTime.UnixMilli() {
			t.Errorf("%s: event_time at %d ms; want %d, the record's time", op, int64(ms), r.EventTime.UnixMilli())
		}
		part := fmt.Sprint(row["date"], row["node"])
		if ms := row["event_time_ms"].(float64); ms < last[part] {
			t.Errorf("%s: read after a later record of its partition", op)
		}
		last[part] = row["event_time_ms"].(float64)
	}
	parts := make([]string, 0, len(last))
	for p := range last {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	if len(parts) != partitions {
		t.Errorf("partitions %v; want %d", parts, partitions)
	}
}

// TestTableKeepsScyllaDBsTable: a table made by ScyllaDB, without error_code and
// batch_id, is written with ScyllaDB's columns and left as it is.
func TestTableKeepsScyllaDBsTable(t *testing.T) {
	addr := mustNode(t)
	c := mustConnector(t, addr)
	ctx := context.Background()
	s, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE KEYSPACE audit WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3}`,
		`CREATE TABLE audit.audit_log (date timestamp, node inet, event_time timeuuid, category text, consistency text,
			table_name text, keyspace_name text, operation text, source inet, username text, error boolean,
			PRIMARY KEY ((date, node), event_time))`,
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	recs := records(20)
	if err := NewTable(c).Write(ctx, recs); err != nil {
		t.Fatalf("Write: %v", err)
	}
	rb := mustPythonRead(t, addr)
	if _, ok := rb.Columns["error_code"]; ok || len(rb.Columns) != 11 {
		t.Errorf("columns = %v; want ScyllaDB's eleven, unaltered", rb.Columns)
	}
	if rb.Replication["datacenter1"] != "3" {
		t.Errorf("replication = %v; want the keyspace left as it was", rb.Replication)
	}
	checkRows(t, rb.Rows, recs, false, 3)
}

// TestTableErrors: a node that cannot be reached gives an error, never a silent loss.
func TestTableErrors(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if err := NewTable(mustConnector(t, closed)).Write(ctx, records(1)); err == nil || !strings.Contains(err.Error(), closed) {
		t.Errorf("Write to a closed port = %v; want an error naming %s", err, closed)
	}
}

// TestTableNodeFromSystemLocal: a record whose node is not an address is written under
// the node's own address, read from its system.local.
func TestTableNodeFromSystemLocal(t *testing.T) {
	ctx := context.Background()
	addr := mustNode(t)
	rec := records(1)
	rec[0].Node = "node-a"
	if err := NewTable(mustConnector(t, addr)).Write(ctx, rec); err != nil {
		t.Fatalf("Write: %v", err)
	}
	rec[0].Node = "127.0.0.1"
	checkRows(t, mustPythonRead(t, addr).Rows, rec, true, 1)
}

// batchObserver calls after once each batch has been executed.
type batchObserver struct{ after func() }

func (o batchObserver) ObserveBatch(context.Context, gocql.ObservedBatch) { o.after() }

// TestTableRetryWritesOver: a Write that fails after the node applied its first batch,
// retried by the Log with the same records, writes that batch over, not twice.
func TestTableRetryWritesOver(t *testing.T) {
	addr := mustNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	batches := 0
	c := mustConnector(t, addr)
	c.Configure = func(cc *gocql.ClusterConfig) {
		cc.BatchObserver = batchObserver{after: func() {
			if batches++; batches == 1 {
				cancel()
			}
		}}
	}
	sink := NewTable(c)
	recs := records(200)[100:] // one day, one node: batches of 64
	if err := sink.Write(ctx, recs); err == nil {
		t.Fatal("Write with its context cancelled after the first batch returned nil")
	}
	if err := sink.Write(context.Background(), recs); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	checkRows(t, mustPythonRead(t, addr).Rows, recs, true, 1)
}
