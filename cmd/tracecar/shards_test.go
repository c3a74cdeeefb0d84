package main

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/tracecar/tracecar/internal/testkit/shardaware"
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
