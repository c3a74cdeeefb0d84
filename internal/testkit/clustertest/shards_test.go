package clustertest_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/internal/testkit/shardaware"
	"github.com/tracecar/tracecar/sidecar"
)

// TestShardAwareThroughSidecars runs a cluster of three nodes of four shards, each behind a
// sidecar with a shard-aware port: a shard-aware client finds the peers' sidecars in
// system.peers, reads from each sidecar's SUPPORTED its own shard-aware port (never a
// node's), opens one connection per shard on it, and no node counts a cross-shard request.
func TestShardAwareThroughSidecars(t *testing.T) {
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{ScyllaSupported: true, Shards: 4})
	scs := clustertest.StartSidecars(t, c, sidecar.Config{})
	aware := make(map[netip.Addr]int)
	for _, sc := range scs {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(sc.Addr.Addr(), 0).String())
		if err != nil {
			t.Fatal(err)
		}
		aware[sc.Addr.Addr()] = ln.Addr().(*net.TCPAddr).Port
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sc.Proxy.ServeShardAware(ctx, ln) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	first := shardaware.Dial(t, scs[0].Addr.String(), shardaware.Config{})
	first.Query(t, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
	first.Query(t, "CREATE TABLE ks.kv (k int PRIMARY KEY, v int)")
	rows := first.Query(t, "SELECT rpc_address FROM system.peers").(cql.RowsResult)
	if len(rows.Rows) != 2 {
		t.Fatalf("system.peers through sidecar 1: %d rows; want 2", len(rows.Rows))
	}
	hosts := []netip.Addr{scs[0].Addr.Addr()}
	for _, r := range rows.Rows {
		ip, ok := netip.AddrFromSlice(r[0])
		if !ok {
			t.Fatalf("rpc_address %x", r[0])
		}
		hosts = append(hosts, ip.Unmap())
	}
	for _, h := range hosts {
		want, ok := aware[h]
		if !ok {
			t.Fatalf("system.peers names %s, which is no sidecar's address", h)
		}
		sa := shardaware.Dial(t, netip.AddrPortFrom(h, scs[0].Addr.Port()).String(), shardaware.Config{})
		if sa.Info.AwarePort != want {
			t.Errorf("sidecar %s: SUPPORTED names shard-aware port %d; want its own, %d", h, sa.Info.AwarePort, want)
		}
		pr := sa.Prepare(t, "INSERT INTO ks.kv (k, v) VALUES (?, 1)")
		for i := range 100 {
			sa.Execute(t, pr, binary.BigEndian.AppendUint32(nil, uint32(i)))
		}
	}
	for i := range 3 {
		if got := c.Node(i).CrossShardRequests(); got != 0 {
			t.Errorf("node %d: %d cross-shard requests; want 0", i+1, got)
		}
		want := uint64(4)
		if i == 0 {
			want = 8 // the first client's connections too
		}
		if got := scs[i].Proxy.ShardStats(); got.Paired != want || got.CrossShard != 0 {
			t.Errorf("sidecar %d: paired %d, cross-shard %d; want %d and 0", i+1, got.Paired, got.CrossShard, want)
		}
	}
}
