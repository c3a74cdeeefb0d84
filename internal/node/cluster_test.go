package node_test

import (
	"bufio"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// onlyHost returns a gocql session that talks to ap alone.
func onlyHost(tb testing.TB, ap netip.AddrPort) *gocql.Session {
	tb.Helper()
	c := drivertest.Cluster(options(ap, "none"))
	c.DisableInitialHostLookup = true
	s, err := c.CreateSession()
	if err != nil {
		tb.Fatalf("gocql to %s: %v", ap, err)
	}
	tb.Cleanup(s.Close)
	return s
}

type peerRow struct {
	peer, rpc   string
	hostID      gocql.UUID
	dc, rack    string
	tokens      []string
	schema      gocql.UUID
	nativePort  int
	nativeAddr  string
	fromPeersV2 bool
}

// TestClusterSystemTables checks that each node of a 3-node cluster describes itself in
// system.local and the two others in system.peers and system.peers_v2, with one token ring
// split evenly between them and one schema version.
func TestClusterSystemTables(t *testing.T) {
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{NumTokens: 8})
	port := int(c.Addr(0).Port())
	var allTokens []string
	hostIDs := map[gocql.UUID]int{}
	var schema gocql.UUID
	for i := 0; i < 3; i++ {
		s := onlyHost(t, c.Addr(i))
		var (
			rpc, bcast, dc, rack string
			hostID, version      gocql.UUID
			tokens               []string
			rpcPort              int
		)
		if err := s.Query("SELECT rpc_address, broadcast_address, data_center, rack, host_id, schema_version, tokens, rpc_port FROM system.local WHERE key='local'").
			Scan(&rpc, &bcast, &dc, &rack, &hostID, &version, &tokens, &rpcPort); err != nil {
			t.Fatalf("node %d: system.local: %v", i+1, err)
		}
		if want := clustertest.IP(i + 1).String(); rpc != want || bcast != want || rpcPort != port {
			t.Errorf("node %d: local rpc_address %s, broadcast_address %s, rpc_port %d; want %s, %s, %d", i+1, rpc, bcast, rpcPort, want, want, port)
		}
		if dc != "datacenter1" || rack != "rack1" || len(tokens) != 8 {
			t.Errorf("node %d: local dc %q rack %q, %d tokens; want datacenter1 rack1 8", i+1, dc, rack, len(tokens))
		}
		if i == 0 {
			schema = version
		} else if version != schema {
			t.Errorf("node %d: schema_version %s; node 1 has %s", i+1, version, schema)
		}
		hostIDs[hostID] = i
		allTokens = append(allTokens, tokens...)

		var peers []peerRow
		it := s.Query("SELECT peer, rpc_address, host_id, data_center, rack, tokens, schema_version FROM system.peers").Iter()
		var r peerRow
		for it.Scan(&r.peer, &r.rpc, &r.hostID, &r.dc, &r.rack, &r.tokens, &r.schema) {
			peers = append(peers, r)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		it = s.Query("SELECT peer, native_address, native_port, host_id, data_center, rack, tokens, schema_version FROM system.peers_v2").Iter()
		r = peerRow{fromPeersV2: true}
		for it.Scan(&r.peer, &r.nativeAddr, &r.nativePort, &r.hostID, &r.dc, &r.rack, &r.tokens, &r.schema) {
			r.rpc = r.nativeAddr
			peers = append(peers, r)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if len(peers) != 4 {
			t.Fatalf("node %d: %d rows in peers and peers_v2; want 2 + 2", i+1, len(peers))
		}
		seen := map[string]bool{}
		for _, p := range peers {
			seen[p.rpc] = true
			if p.rpc == clustertest.IP(i+1).String() || p.peer != p.rpc {
				t.Errorf("node %d: peer row %+v names itself, or peer differs from rpc_address", i+1, p)
			}
			if p.schema != schema || len(p.tokens) != 8 || p.dc != "datacenter1" {
				t.Errorf("node %d: peer row %+v: want schema %s, 8 tokens, datacenter1", i+1, p, schema)
			}
			if p.fromPeersV2 && p.nativePort != port {
				t.Errorf("node %d: peers_v2 native_port %d; want %d", i+1, p.nativePort, port)
			}
		}
		if len(seen) != 2 {
			t.Errorf("node %d: peers name %v; want the two other nodes", i+1, seen)
		}
	}
	if len(hostIDs) != 3 {
		t.Errorf("host ids: %v; want 3 distinct", hostIDs)
	}
	// 24 distinct tokens, evenly spaced: every gap is 2^64/24, give or take the rounding
	// (at most one per token).
	sort.Slice(allTokens, func(a, b int) bool { return atoi64(t, allTokens[a]) < atoi64(t, allTokens[b]) })
	if len(slices.Compact(slices.Clone(allTokens))) != 24 {
		t.Fatalf("tokens: %v; want 24 distinct", allTokens)
	}
	step := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(24))
	for k := 1; k < len(allTokens); k++ {
		gap := new(big.Int).Sub(big.NewInt(atoi64(t, allTokens[k])), big.NewInt(atoi64(t, allTokens[k-1])))
		if d := new(big.Int).Sub(gap, step); d.CmpAbs(big.NewInt(24)) > 0 {
			t.Fatalf("gap between tokens %s and %s is %s; want %s", allTokens[k-1], allTokens[k], gap, step)
		}
	}
}

func atoi64(tb testing.TB, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestClusterDataCenters lays 4 nodes out in two data centers, and checks that a keyspace
// with NetworkTopologyStrategy's replication_factor gets both.
func TestClusterDataCenters(t *testing.T) {
	c := clustertest.StartCluster(t, 4, node.ClusterConfig{DCs: []node.DC{{Name: "dc1", Nodes: 2}, {Name: "dc2", Nodes: 2}}})
	want := [][2]string{{"dc1", "rack1"}, {"dc1", "rack2"}, {"dc2", "rack1"}, {"dc2", "rack2"}}
	for i := range want {
		var dc, rack string
		if err := onlyHost(t, c.Addr(i)).Query("SELECT data_center, rack FROM system.local").Scan(&dc, &rack); err != nil {
			t.Fatal(err)
		}
		if [2]string{dc, rack} != want[i] {
			t.Errorf("node %d: %s/%s; want %s/%s", i+1, dc, rack, want[i][0], want[i][1])
		}
	}
	s := onlyHost(t, c.Addr(0))
	if err := s.Query("CREATE KEYSPACE nts WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 2}").Exec(); err != nil {
		t.Fatal(err)
	}
	var repl map[string]string
	if err := s.Query("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'nts'").Scan(&repl); err != nil {
		t.Fatal(err)
	}
	if repl["dc1"] != "2" || repl["dc2"] != "2" || len(repl) != 3 {
		t.Errorf("replication %v; want class, dc1: 2, dc2: 2", repl)
	}
	if _, err := node.ParseDCs("dc1:2,dc1:1"); err == nil {
		t.Errorf("ParseDCs accepted a data center listed twice")
	}
	if _, err := node.Topology([]netip.AddrPort{c.Addr(0)}, 0, []node.DC{{Name: "dc1", Nodes: 2}}); err == nil {
		t.Errorf("Topology accepted 2 nodes of data centers for a cluster of 1")
	}
}

// eventConn is a raw connection REGISTERed for every event type.
type eventConn struct {
	nc net.Conn
	br *bufio.Reader
}

func registerEvents(tb testing.TB, ap netip.AddrPort) *eventConn {
	tb.Helper()
	nc := dial(tb, ap)
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	ec := &eventConn{nc: nc, br: bufio.NewReader(nc)}
	ec.request(tb, 1, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	ec.request(tb, 2, cql.Register{Events: []string{cql.EventTopologyChange, cql.EventStatusChange, cql.EventSchemaChange}})
	return ec
}

func (ec *eventConn) request(tb testing.TB, stream int16, m cql.Message) {
	tb.Helper()
	if _, err := ec.nc.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: stream, Opcode: m.Opcode()}, m)); err != nil {
		tb.Fatal(err)
	}
	h, _, _, err := cql.ReadFrame(ec.br, nil)
	if err != nil || h.Opcode != cql.OpReady {
		tb.Fatalf("%v: got %v, %v; want READY", m.Opcode(), h.Opcode, err)
	}
}

// next returns the next event.
func (ec *eventConn) next(tb testing.TB) cql.Event {
	tb.Helper()
	h, body, _, err := cql.ReadFrame(ec.br, nil)
	if err != nil {
		tb.Fatalf("waiting for an event: %v", err)
	}
	if h.Opcode != cql.OpEvent || h.Stream != -1 {
		tb.Fatalf("got %v on stream %d; want an EVENT on stream -1", h.Opcode, h.Stream)
	}
	ev, err := cql.DecodeEvent(body)
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

// TestClusterEvents checks that DDL on one node reaches the listeners of every node as
// SCHEMA_CHANGE, and that stopping and starting a node sends STATUS_CHANGE DOWN and UP to
// the others' listeners, and that it serves again after.
func TestClusterEvents(t *testing.T) {
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{})
	l2, l3 := registerEvents(t, c.Addr(1)), registerEvents(t, c.Addr(2))
	if err := onlyHost(t, c.Addr(0)).Query("CREATE KEYSPACE ev WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec(); err != nil {
		t.Fatal(err)
	}
	for i, l := range []*eventConn{l2, l3} {
		if ev := l.next(t); ev.Type != cql.EventSchemaChange || ev.Schema.Keyspace != "ev" || ev.Schema.ChangeType != "CREATED" {
			t.Errorf("node %d: got %+v; want SCHEMA_CHANGE CREATED ev", i+2, ev)
		}
	}

	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	if ev := l2.next(t); ev.Type != cql.EventStatusChange || ev.Change != "DOWN" || ev.Addr != c.Addr(2) {
		t.Errorf("after stopping node 3, node 2 sent %+v; want STATUS_CHANGE DOWN %s", ev, c.Addr(2))
	}
	if _, err := net.DialTimeout("tcp", c.Addr(2).String(), 5*time.Second); err == nil {
		t.Errorf("node 3 still accepts connections once stopped")
	}
	if err := c.Stop(2); err == nil {
		t.Errorf("stopping a stopped node: no error")
	}
	if err := c.Start(2); err != nil {
		t.Fatal(err)
	}
	if ev := l2.next(t); ev.Type != cql.EventStatusChange || ev.Change != "UP" || ev.Addr != c.Addr(2) {
		t.Errorf("after starting node 3, node 2 sent %+v; want STATUS_CHANGE UP %s", ev, c.Addr(2))
	}
	var n int
	if err := onlyHost(t, c.Addr(2)).Query("SELECT count(*) FROM system_schema.keyspaces WHERE keyspace_name = 'ev'").Scan(&n); err != nil || n != 1 {
		t.Errorf("node 3 after restart: keyspace ev count %d, %v; want 1 (shared schema)", n, err)
	}
}
