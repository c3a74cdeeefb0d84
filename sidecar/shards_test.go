package sidecar

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/internal/testkit/rawcql"
	"github.com/tracecar/tracecar/internal/testkit/shardaware"
)

// shardedNode is an embedded node of four shards, on 127.0.0.2 (apart from the sidecar),
// with its shard-aware port.
type shardedNode struct {
	srv         *node.Server
	addr, aware string
}

func mustShardedNode(tb testing.TB, override map[string][]string) *shardedNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		tb.Fatal(err)
	}
	aln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		tb.Fatal(err)
	}
	c, err := node.NewCluster(node.ClusterConfig{ScyllaSupported: true, Shards: 4, ShardAware: []net.Listener{aln},
		ScyllaOverride: override}, []net.Listener{ln})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("node: %v", err)
		}
	})
	n := &shardedNode{srv: c.Node(0), addr: ln.Addr().String(), aware: aln.Addr().String()}
	rc := rawcql.Dial(tb, n.addr, cql.V4, "")
	rc.Query(tb, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	rc.Query(tb, "CREATE TABLE ks.kv (k int PRIMARY KEY, v int)")
	rc.Net().Close()
	return n
}

// shardProxy is a proxy for n with an ordinary port and a shard-aware one, both on
// 127.0.0.1.
type shardTestProxy struct {
	*testProxy
	aware string
}

func mustShardProxy(tb testing.TB, cfg Config, n *shardedNode, prepare func(*Proxy)) *shardTestProxy {
	tb.Helper()
	cfg.NodeAddr = n.addr
	p := New(cfg, nil)
	if prepare != nil {
		prepare(p)
	}
	aln := listenApart(tb, "127.0.0.1", n.addr, n.aware)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Named before the goroutine serves it, or the first client's OPTIONS can be answered
	// before ServeShardAware starts (seen under CI's load).
	p.AdvertiseShardAware(aln)
	go func() { done <- p.ServeShardAware(ctx, aln) }()
	tb.Cleanup(func() { cancel(); <-done })
	ln := listenApart(tb, "127.0.0.1", n.addr, n.aware)
	return &shardTestProxy{testProxy: serveProxy(tb, p, ln, ln.Addr().String()), aware: aln.Addr().String()}
}

func key(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i)) }

// run sends 400 token-routed (or, for a client that is not shard-aware, round-robin)
// prepared requests.
func runKeys(tb testing.TB, c *shardaware.Client) {
	tb.Helper()
	ins := c.Prepare(tb, "INSERT INTO ks.kv (k, v) VALUES (?, 1)")
	sel := c.Prepare(tb, "SELECT v FROM ks.kv WHERE k = ?")
	for i := range 200 {
		c.Execute(tb, ins, key(i))
		c.Execute(tb, sel, key(i))
	}
}

// TestShardAwareThroughProxy is the acceptance: a client that follows ScyllaDB's
// "Intranode sharding" opens one connection per shard through the sidecar, on the
// sidecar's shard-aware port (which SUPPORTED names in place of the node's), each lands on
// the shard it asked for, and none of its token-routed requests crosses a shard at the
// node; the sidecar's count agrees. A client that is not shard-aware, through the same
// sidecar, crosses shards for about three quarters of its requests, and the sidecar counts
// as many as the node.
func TestShardAwareThroughProxy(t *testing.T) {
	n := mustShardedNode(t, nil)
	tp := mustShardProxy(t, Config{}, n, nil)
	sa := shardaware.Dial(t, tp.addr, shardaware.Config{})
	if got, want := sa.Info.AwarePort, int(mustAddrPort(tp.aware).Port()); got != want {
		t.Fatalf("SUPPORTED names shard-aware port %d; want the sidecar's %d (the node's is %s)", got, want, n.aware)
	}
	runKeys(t, sa)
	st := tp.ShardStats()
	if got := n.srv.CrossShardRequests(); got != 0 {
		t.Errorf("node: %d cross-shard requests from the shard-aware client; want 0 (sent per shard %v)", got, sa.Sent)
	}
	if st.CrossShard != 0 || st.Paired != 4 {
		t.Errorf("sidecar: %d cross-shard, %d paired; want 0 and 4", st.CrossShard, st.Paired)
	}
	for s := range 4 {
		if st.Requests[s] < 50 {
			t.Errorf("sidecar: shard %d carried %d requests; want about 200 (%v)", s, st.Requests[s], st.Requests)
		}
	}
	if conns := n.srv.ShardConnections(); len(conns) != 4 || conns[0] < 1 || conns[1] < 1 || conns[2] < 1 || conns[3] < 1 {
		t.Errorf("node's connections by shard %v; want one at least on each", conns)
	}
	sa.Close()

	plain := shardaware.Dial(t, tp.addr, shardaware.Config{Ordinary: true})
	runKeys(t, plain)
	nodeCross, proxyCross := n.srv.CrossShardRequests(), tp.ShardStats().CrossShard
	t.Logf("a client that is not shard-aware: %d of 400 requests cross-shard at the node, %d counted by the sidecar", nodeCross, proxyCross)
	if nodeCross < 200 || nodeCross > 380 {
		t.Errorf("node: %d of 400 requests cross-shard; want about 300", nodeCross)
	}
	if proxyCross != nodeCross {
		t.Errorf("sidecar counted %d cross-shard requests, the node %d; want them equal", proxyCross, nodeCross)
	}
}

// TestShardCountGocql checks that the sidecar's cross-shard count agrees with the node's
// for a plain driver, gocql v1.7, which knows nothing of shards.
func TestShardCountGocql(t *testing.T) {
	n := mustShardedNode(t, nil)
	tp := mustShardProxy(t, Config{}, n, nil)
	s, err := drivertest.Cluster(sidecarOptions(tp.testProxy, "none")).CreateSession()
	if err != nil {
		t.Fatalf("gocql through the sidecar: %v", err)
	}
	defer s.Close()
	for i := range 300 {
		if err := s.Query("INSERT INTO ks.kv (k, v) VALUES (?, ?)", i, i).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	nodeCross, proxyCross := n.srv.CrossShardRequests(), tp.ShardStats().CrossShard
	t.Logf("gocql v1.7: %d of 300 requests cross-shard at the node, %d counted by the sidecar", nodeCross, proxyCross)
	if nodeCross == 0 || proxyCross != nodeCross {
		t.Errorf("sidecar counted %d cross-shard requests, the node %d; want them equal, and not 0", proxyCross, nodeCross)
	}
}

// TestShardAwareBadInput checks that what the sidecar cannot pair falls back to an
// ordinary node connection that works, says why in the log and counts it: a malformed
// SCYLLA_NR_SHARDS, an unknown sharding algorithm, and no free local port of the shard's
// residue.
func TestShardAwareBadInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		override map[string][]string
		ports    bool // no free port
		reason   string
	}{
		{"malformed nr_shards", map[string][]string{sharding.KeyNrShards: {"four"}}, false, "malformed_supported"},
		{"unknown algorithm", map[string][]string{sharding.KeyAlgorithm: {"token-range-v2"}}, false, "malformed_supported"},
		{"ports exhausted", nil, true, "ports_exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mustShardedNode(t, tc.override)
			var busy []net.Listener
			tp := mustShardProxy(t, Config{}, n, func(p *Proxy) {
				if !tc.ports {
					return
				}
				// A range of four ports, each held by a listener: no residue is free.
				busy = holdPorts(t, 4)
				lo := busy[0].Addr().(*net.TCPAddr).Port
				p.shards.portRange = func() (int, int) { return lo, lo + 3 }
			})
			_ = busy
			// The first connection's SUPPORTED: malformed sharding gets no shard-aware port.
			rc := rawcql.DialOnly(t, tp.addr, cql.V4)
			opts, err := shardaware.Options(rc)
			if err != nil {
				t.Fatal(err)
			}
			_, hasPort := opts[sharding.KeyAwarePort]
			if want := tc.override == nil; hasPort != want {
				t.Errorf("SUPPORTED names a shard-aware port: %v; want %v (%v)", hasPort, want, opts)
			}
			// A client on the sidecar's shard-aware port all the same still gets a working
			// node connection.
			ac := rawcql.Dial(t, tp.aware, cql.V4, "")
			ac.Query(t, "SELECT v FROM ks.kv WHERE k = 1")
			st := tp.ShardStats()
			if st.Fallbacks[tc.reason] != 1 || st.Paired != 0 {
				t.Errorf("fallbacks %v, paired %d; want 1 %s and 0 paired", st.Fallbacks, st.Paired, tc.reason)
			}
			if tc.override != nil && st.MalformedSupported == 0 {
				t.Errorf("MalformedSupported is 0; want the malformed SUPPORTED counted")
			}
		})
	}
}

// holdPorts listens on n consecutive free ports of 127.0.0.1 and the wildcard address.
func holdPorts(tb testing.TB, n int) []net.Listener {
	tb.Helper()
	for attempt := 0; attempt < 100; attempt++ {
		first, err := net.Listen("tcp", ":0")
		if err != nil {
			tb.Fatal(err)
		}
		lns := []net.Listener{first}
		base := first.Addr().(*net.TCPAddr).Port
		for i := 1; i < n; i++ {
			ln, err := net.Listen("tcp", ":"+strconv.Itoa(base+i))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == n {
			tb.Cleanup(func() {
				for _, ln := range lns {
					ln.Close()
				}
			})
			return lns
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	tb.Fatalf("no %d consecutive free ports", n)
	return nil
}

// TestShardAwareProbe checks a connection on the shard-aware port that comes before any
// client's OPTIONS has shown the sidecar the node's sharding (a driver restarted against a
// sidecar restarted): the sidecar asks the node itself, pairs the connection with its
// shard, and counts the OPTIONS it sent, so that the node serves no request the sidecar
// did not forward.
func TestShardAwareProbe(t *testing.T) {
	n := mustShardedNode(t, nil)
	tp := mustShardProxy(t, Config{}, n, nil)
	waitFor(t, "the shard-aware port", func() bool { return tp.env.sh.ShardAwarePorts()[0] != 0 })
	before := n.srv.Requests()
	rc := rawcql.DialOnly(t, tp.aware, cql.V4)
	opts, err := shardaware.Options(rc)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(int(mustAddrPort(rc.Net().LocalAddr().String()).Port()) % 4)
	if got := opts[sharding.KeyShard]; len(got) != 1 || got[0] != want {
		t.Errorf("SCYLLA_SHARD %v; want [%s], the client's source port modulo 4", got, want)
	}
	if st := tp.ShardStats(); st.Paired != 1 {
		t.Errorf("paired %d, fallbacks %v; want 1 paired", st.Paired, st.Fallbacks)
	}
	if served, forwarded := n.srv.Requests()-before, tp.Stats().TotalRequests(); served != forwarded {
		t.Errorf("the node served %d requests, the sidecar forwarded %d; want them equal (its probe counted)", served, forwarded)
	}
}

// TestShardAwareAutoListenFails checks Config.ShardAwareHost when the node's shard-aware
// port number is taken on the sidecar's address: the sidecar logs and counts it, names no
// shard-aware port in SUPPORTED (drivers use the ordinary port, as before), and every
// connection works.
func TestShardAwareAutoListenFails(t *testing.T) {
	n := mustShardedNode(t, nil)
	// Hold the node's port number on the sidecar's address; when another holds it
	// already, the sidecar's listen fails just the same.
	if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(mustAddrPort(n.aware).Port())))); err == nil {
		t.Cleanup(func() { ln.Close() })
	}
	p := New(Config{NodeAddr: n.addr, ShardAwareHost: "127.0.0.1"}, nil)
	ln := listenApart(t, "127.0.0.1", n.addr, n.aware)
	tp := serveProxy(t, p, ln, ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeShardAwareAuto(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	rc := rawcql.DialOnly(t, tp.addr, cql.V4)
	opts, err := shardaware.Options(rc)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := opts[sharding.KeyAwarePort]; ok {
		t.Errorf("SUPPORTED names shard-aware port %v; want none, the sidecar could not listen", v)
	}
	if got := opts[sharding.KeyNrShards]; len(got) != 1 || got[0] != "4" {
		t.Errorf("SCYLLA_NR_SHARDS %v; want [4], passed through", got)
	}
	rc.Startup(t, "")
	rc.Query(t, "SELECT v FROM ks.kv WHERE k = 1")
	if st := tp.ShardStats(); st.Fallbacks["listen_failed"] != 1 {
		t.Errorf("fallbacks %v; want listen_failed 1", st.Fallbacks)
	}
}
