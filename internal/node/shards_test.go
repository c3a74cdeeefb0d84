package node_test

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/internal/testkit/rawcql"
	"github.com/tracecar/tracecar/internal/testkit/shardaware"
)

func intKey(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i)) }

// shardedNode starts one node with four shards and a shard-aware port, and a keyspace ks
// with a table kv (k int, c int, v text, PRIMARY KEY ((k, c))) whose key is composite.
func shardedNode(t *testing.T) *node.Cluster {
	t.Helper()
	c := clustertest.StartCluster(t, 1, node.ClusterConfig{ScyllaSupported: true, Shards: 4})
	rc := rawcql.Dial(t, c.Addr(0).String(), cql.V4, "")
	rc.Query(t, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	rc.Query(t, "CREATE TABLE ks.kv (k int, c int, v text, PRIMARY KEY ((k, c)))")
	rc.Query(t, "CREATE TABLE ks.one (k int PRIMARY KEY, v text)")
	rc.Net().Close()
	return c
}

// TestShardAwarePort checks the node's emulation of ScyllaDB's sharding with a client that
// follows "Intranode sharding": one connection per shard on the shard-aware port, each
// told its shard in SUPPORTED, and token-routed EXECUTEs that never cross a shard; and a
// client that is not shard-aware, three quarters of whose requests do.
func TestShardAwarePort(t *testing.T) {
	c := shardedNode(t)
	srv := c.Node(0)
	sa := shardaware.Dial(t, c.Addr(0).String(), shardaware.Config{})
	if sa.Info.NrShards != 4 || sa.Info.IgnoreMSB != 12 || sa.Info.AwarePort == 0 {
		t.Fatalf("sharding %+v; want 4 shards, ignore_msb 12 and a shard-aware port", sa.Info)
	}
	for _, st := range []struct {
		q    string
		vals int
	}{{"INSERT INTO ks.kv (k, c, v) VALUES (?, ?, 'x')", 2}, {"INSERT INTO ks.one (k, v) VALUES (?, 'x')", 1}} {
		pr := sa.Prepare(t, st.q)
		if len(pr.Metadata.PKIndexes) != st.vals {
			t.Fatalf("%s: partition key indexes %v", st.q, pr.Metadata.PKIndexes)
		}
		for i := range 200 {
			vals := [][]byte{intKey(i), intKey(i * 7)}
			sa.Execute(t, pr, vals[:st.vals]...)
		}
	}
	if got := srv.CrossShardRequests(); got != 0 {
		t.Errorf("shard-aware client: %d cross-shard requests; want 0 (sent per shard %v)", got, sa.Sent)
	}
	for s, n := range sa.Sent {
		if n < 50 {
			t.Errorf("shard %d got %d of 400 requests; want about 100", s, n)
		}
	}
	if got := srv.ShardConnections(); len(got) != 4 || slices.Min(got) < 1 {
		t.Errorf("connections per shard %v; want at least one on each of 4", got)
	}

	plain := shardaware.Dial(t, c.Addr(0).String(), shardaware.Config{Ordinary: true})
	pr := plain.Prepare(t, "SELECT v FROM ks.one WHERE k = ?")
	for i := range 400 {
		plain.Execute(t, pr, intKey(i))
	}
	t.Logf("a client that is not shard-aware: %d of 400 requests cross-shard", srv.CrossShardRequests())
	if got := srv.CrossShardRequests(); got < 200 || got > 380 {
		t.Errorf("a client that is not shard-aware: %d of 400 requests cross-shard; want about 300", got)
	}
}

// TestShardOrdinaryPortLeastLoaded checks that connections on the ordinary port go to the
// shard with the fewest connections, and that each is told its shard.
func TestShardOrdinaryPortLeastLoaded(t *testing.T) {
	c := clustertest.StartCluster(t, 1, node.ClusterConfig{ScyllaSupported: true, Shards: 3})
	var got []string
	for range 6 {
		rc := rawcql.DialOnly(t, c.Addr(0).String(), cql.V4)
		opts, err := shardaware.Options(rc)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join(opts[sharding.KeyShard], ","))
		if opts[sharding.KeyNrShards][0] != "3" {
			t.Errorf("SCYLLA_NR_SHARDS %v; want 3", opts[sharding.KeyNrShards])
		}
	}
	if want := "0 1 2 0 1 2"; strings.Join(got, " ") != want {
		t.Errorf("shards of six connections: %v; want %s", got, want)
	}
}

// TestScyllaSupportedWithoutShards keeps the one-shard SUPPORTED of --scylla-supported
// alone, which the sidecar's tests of the shard-aware port's removal rely on.
func TestScyllaSupportedWithoutShards(t *testing.T) {
	c := clustertest.StartCluster(t, 1, node.ClusterConfig{ScyllaSupported: true})
	rc := rawcql.DialOnly(t, c.Addr(0).String(), cql.V4)
	opts, err := shardaware.Options(rc)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range node.ScyllaSupportedOptions {
		if !slices.Equal(opts[k], v) {
			t.Errorf("%s = %v; want %v", k, opts[k], v)
		}
	}
}

// TestScyllaExtensions checks the CQL that ScyllaDB's drivers and tools send once they see
// a ScyllaDB node: USING TIMEOUT on every statement that takes it, alone and with TTL and
// TIMESTAMP, and BYPASS CACHE on SELECT.
func TestScyllaExtensions(t *testing.T) {
	c := shardedNode(t)
	rc := rawcql.Dial(t, c.Addr(0).String(), cql.V4, "")
	for _, q := range []string{
		"SELECT * FROM system.local WHERE key='local' USING TIMEOUT 5000ms",
		"SELECT * FROM system.peers USING TIMEOUT 2s",
		"SELECT keyspace_name FROM system_schema.keyspaces USING TIMEOUT 5000ms",
		"INSERT INTO ks.one (k, v) VALUES (1, 'a') USING TIMEOUT 1s",
		"INSERT INTO ks.one (k, v) VALUES (2, 'b') USING TTL 100 AND TIMEOUT 1s AND TIMESTAMP 5",
		"INSERT INTO ks.one (k, v) VALUES (3, 'c') IF NOT EXISTS USING TIMEOUT 1s",
		"UPDATE ks.one USING TIMEOUT 10ms SET v = 'z' WHERE k = 1",
		"UPDATE ks.one USING TIMESTAMP 10 AND TIMEOUT 10ms SET v = 'y' WHERE k = 2",
		"DELETE FROM ks.one USING TIMEOUT 1s WHERE k = 3",
		"BEGIN BATCH USING TIMEOUT 1s INSERT INTO ks.one (k, v) VALUES (4, 'd') APPLY BATCH",
		"SELECT v FROM ks.one WHERE k = 1 BYPASS CACHE",
		"SELECT v FROM ks.one WHERE k = 1 BYPASS CACHE USING TIMEOUT 500ms",
		"SELECT v FROM ks.one ALLOW FILTERING BYPASS CACHE",
		"SELECT v FROM ks.one WHERE k = 1 USING TIMEOUT 500ms",
	} {
		t.Run(q, func(t *testing.T) {
			if _, err := rc.Result(cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One}}); err != nil {
				t.Errorf("%v", err)
			}
		})
	}
	rows := rc.Query(t, "SELECT k, v FROM ks.one WHERE k = 1 USING TIMEOUT 5s").(cql.RowsResult)
	if len(rows.Rows) != 1 || string(rows.Rows[0][1]) != "z" {
		t.Errorf("k=1 after USING TIMEOUT writes: %q; want one row with v z", rows.Rows)
	}
	for _, q := range []string{
		"SELECT v FROM ks.one USING TIMEOUT 5",
		"SELECT v FROM ks.one USING TIMEOUT ?",
		"SELECT v FROM ks.one BYPASS",
	} {
		if _, err := rc.Result(cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One}}); err == nil {
			t.Errorf("%s: no error; want a syntax error", q)
		}
	}
}
