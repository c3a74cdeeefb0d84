package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/internal/testkit/shardaware"
	"github.com/tracecar/tracecar/internal/testkit/tlstest"
)

// TestNodeShards runs "tracecar node --shards 4 --scylla-supported": a shard-aware client
// gets one connection per shard, its token-routed requests cross no shard, and the node's
// /metrics says so.
func TestNodeShards(t *testing.T) {
	cqls, apis := startNodes(t, 1, "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--scylla-supported", "--shards", "4")
	sa := shardaware.Dial(t, cqls[0], shardaware.Config{})
	sa.Query(t, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	sa.Query(t, "CREATE TABLE ks.kv (k int PRIMARY KEY, v int)")
	pr := sa.Prepare(t, "INSERT INTO ks.kv (k, v) VALUES (?, 1)")
	for i := range 100 {
		sa.Execute(t, pr, binary.BigEndian.AppendUint32(nil, uint32(i)))
	}
	if got := scrape(t, apis[0], "tracecar_node_cross_shard_requests_total"); got[""] != 0 || len(got) != 1 {
		t.Errorf("tracecar_node_cross_shard_requests_total %v; want 0", got)
	}
	conns := scrape(t, apis[0], "tracecar_node_shard_connections")
	for _, s := range []string{"0", "1", "2", "3"} {
		if conns[`{shard="`+s+`"}`] < 1 {
			t.Errorf("tracecar_node_shard_connections %v; want at least 1 on shard %s", conns, s)
		}
	}
}

// TestNodeShardsUsage checks the usage errors of --shards and --shard-aware-listen.
func TestNodeShardsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "4"}, "--shards needs --scylla-supported"},
		{[]string{"--shards", "-1", "--scylla-supported"}, "--shards must be from 1 to 4096, got -1"},
		{[]string{"--shards", "5000", "--scylla-supported"}, "--shards must be from 1 to 4096, got 5000"},
		{[]string{"--shard-aware-listen", "127.0.0.1:0"}, "--shard-aware-listen needs --shards"},
	} {
		var out bytes.Buffer
		code := run(t.Context(), append([]string{"node", "--listen", "127.0.0.1:0", "--api", ""}, tc.args...), &out, &out)
		if code != 2 || !bytes.Contains(out.Bytes(), []byte(tc.want)) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, out.String(), tc.want)
		}
	}
}

// TestSidecarShardAware runs `tracecar node --shards 4 --scylla-supported` and `tracecar
// sidecar` in front of it with the default --shard-aware-listen: once a client's OPTIONS
// shows the node's shards, the sidecar listens on the node's shard-aware port number on its
// own address and names it in SUPPORTED; a shard-aware client gets one connection per
// shard through it, and neither the node nor the sidecar counts a cross-shard request; ctl
// status and ctl top say so.
func TestSidecarShardAware(t *testing.T) {
	nodes := startCommand(t, []string{"node", "--listen", "127.0.0.2:0", "--api", "127.0.0.2:0", "--scylla-supported", "--shards", "4"},
		io.Discard, `CQL on (\S+)`, `shard-aware port on (\S+)`, `API on (\S+)`)
	nodeAddr, nodeAware, nodeAPI := nodes[0][1], nodes[1][1], nodes[2][1]
	side := startCommand(t, []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--node", nodeAddr, "--log-level", "warn"},
		io.Discard, `CQL on (\S+) -> node (\S+), admin API (\S+)`)[0]
	sidecarAddr, adminURL := side[1], side[3]

	sa := shardaware.Dial(t, sidecarAddr, shardaware.Config{})
	_, nodePort, _ := net.SplitHostPort(nodeAware)
	if strconv.Itoa(sa.Info.AwarePort) != nodePort {
		t.Errorf("SUPPORTED through the sidecar names shard-aware port %d; want the node's number %s, on the sidecar's address", sa.Info.AwarePort, nodePort)
	}
	sa.Query(t, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	sa.Query(t, "CREATE TABLE ks.kv (k int PRIMARY KEY, v int)")
	pr := sa.Prepare(t, "INSERT INTO ks.kv (k, v) VALUES (?, 1)")
	for i := range 200 {
		sa.Execute(t, pr, binary.BigEndian.AppendUint32(nil, uint32(i)))
	}
	if got := scrape(t, nodeAPI, "tracecar_node_cross_shard_requests_total"); got[""] != 0 {
		t.Errorf("node: tracecar_node_cross_shard_requests_total %v; want 0", got)
	}
	if got := scrape(t, adminURL, "tracecar_cross_shard_requests_total"); len(got) != 1 || got[""] != 0 {
		t.Errorf("sidecar: tracecar_cross_shard_requests_total %v; want 0", got)
	}
	if got := scrape(t, adminURL, "tracecar_shard_aware_connections_total"); got[`{outcome="paired"}`] != 4 {
		t.Errorf("sidecar: tracecar_shard_aware_connections_total %v; want 4 paired", got)
	}
	byShard := scrape(t, adminURL, "tracecar_shard_requests_total")
	added := scrape(t, adminURL, "tracecar_shard_added_latency_seconds_total")
	for s := range 4 {
		label := `{shard="` + strconv.Itoa(s) + `"}`
		if byShard[label] < 10 {
			t.Errorf("sidecar: tracecar_shard_requests_total %v; want requests on each of 4 shards", byShard)
		}
		if added[label] <= 0 {
			t.Errorf("sidecar: tracecar_shard_added_latency_seconds_total %v; want time on each of 4 shards", added)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"ctl", "--hosts", adminURL, "status"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), " cross_shard=0 shard_requests=0:") {
		t.Errorf("ctl status: exit %d, %q %q; want cross_shard=0 and requests by shard", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"ctl", "--hosts", adminURL, "top", "--count", "1"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), " cross_shard=0 shard_requests=") {
		t.Errorf("ctl top: exit %d, %q %q; want the hosts' cross_shard", code, out.String(), errOut.String())
	}
}

// TestShardAwareTLS checks both shard-aware ports over TLS: the node's (named in
// SCYLLA_SHARD_AWARE_PORT_SSL) and the sidecar's, given as --shard-aware-listen.
func TestShardAwareTLS(t *testing.T) {
	pki := tlstest.New(t)
	nodes := startCommand(t, []string{"node", "--listen", "127.0.0.1:0", "--api", "", "--scylla-supported", "--shards", "4",
		"--shard-aware-listen", "127.0.0.1:0", "--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey, "--log-level", "warn"},
		io.Discard, `CQL on (\S+)`)
	side := startCommand(t, []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--node", nodes[0][1],
		"--shard-aware-listen", "127.0.0.1:0", "--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey,
		"--node-tls-ca", pki.CA, "--log-level", "warn"},
		io.Discard, `CQL on (\S+) -> node (\S+), admin API (\S+)`, `shard-aware port on (\S+)`)
	sidecarAddr, adminURL, aware := side[0][1], side[0][3], side[1][1]

	sa := shardaware.Dial(t, sidecarAddr, shardaware.Config{TLS: pki.ClientConfig(t, false)})
	if _, port, _ := net.SplitHostPort(aware); strconv.Itoa(sa.Info.AwarePortSSL) != port || sa.Info.AwarePort != 0 {
		t.Errorf("SUPPORTED names shard-aware ports %d and SSL %d; want only SSL, the sidecar's %s", sa.Info.AwarePort, sa.Info.AwarePortSSL, aware)
	}
	sa.Query(t, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	sa.Query(t, "CREATE TABLE ks.kv (k int PRIMARY KEY, v int)")
	pr := sa.Prepare(t, "INSERT INTO ks.kv (k, v) VALUES (?, 1)")
	for i := range 100 {
		sa.Execute(t, pr, binary.BigEndian.AppendUint32(nil, uint32(i)))
	}
	if got := scrape(t, adminURL, "tracecar_shard_aware_connections_total"); got[`{outcome="paired"}`] != 4 {
		t.Errorf("sidecar: tracecar_shard_aware_connections_total %v; want 4 paired", got)
	}
	if got := scrape(t, adminURL, "tracecar_cross_shard_requests_total"); len(got) != 1 || got[""] != 0 {
		t.Errorf("sidecar: tracecar_cross_shard_requests_total %v; want 0", got)
	}
}

// TestNodeScyllaProtocolV4: ScyllaDB does not speak protocol v5. The Python driver at its
// defaults (which offers v5 first) against `tracecar node --scylla-supported` gets the
// ProtocolError ScyllaDB answers and settles on v4; against the node without it, on v5;
// --max-protocol-version 5 with --scylla-supported is refused, naming both.
func TestNodeScyllaProtocolV4(t *testing.T) {
	drivertest.RequirePython(t)
	script := `import sys
from cassandra.cluster import Cluster
c = Cluster([sys.argv[1]], port=int(sys.argv[2]), connect_timeout=10, control_connection_timeout=10)
c.connect()
print(c.protocol_version)
c.shutdown()`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scylla-supported"}, "4"},
		{nil, "5"},
	} {
		cqls, _ := startNodes(t, 1, append([]string{"--listen", "127.0.0.1:0", "--api", "127.0.0.1:0"}, tc.args...)...)
		host, port, _ := net.SplitHostPort(cqls[0])
		out, err := exec.Command(drivertest.Python, "-c", script, host, port).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("node %v: the Python driver: %v, %s; want protocol %s", tc.args, err, out, tc.want)
		}
	}
	var out bytes.Buffer
	code := run(t.Context(), []string{"node", "--listen", "127.0.0.1:0", "--api", "", "--scylla-supported", "--max-protocol-version", "5"}, &out, &out)
	if want := "--max-protocol-version 5 with --scylla-supported"; code != 2 || !strings.Contains(out.String(), want) {
		t.Errorf("--scylla-supported --max-protocol-version 5: exit %d, %q; want 2 and %q", code, out.String(), want)
	}
}
