//go:build linux

package sidecar

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tracecar/tracecar/internal/testkit/shardaware"
)

// TestHandoverKeepsShards hands a proxy over twice while a shard-aware client sends
// token-routed requests on its one connection per shard: no request fails, no connection
// is made again (the node accepts none, the client needs none), the node counts no
// cross-shard request, and the new proxy counts the moved connections by their shard.
func TestHandoverKeepsShards(t *testing.T) {
	if eventLoopOff() {
		t.Skip("TRACECAR_EVENT_LOOP=off: connections on the goroutine path do not move (TestHandoverGoroutinePathDrains)")
	}
	n := mustShardedNode(t, nil)
	hp := mustHandoverPair(t, Config{}, n.addr)
	aln := listenApart(t, "127.0.0.1", n.addr, n.aware)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hp.old.ServeShardAware(ctx, aln) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the shard-aware port", func() bool { return hp.old.env.sh.ShardAwarePorts()[0] != 0 })

	sa := shardaware.Dial(t, hp.addr, shardaware.Config{})
	sa.Query(t, "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	pr := sa.Prepare(t, "INSERT INTO ks.kv (k, v) VALUES (?, 1)")
	accepted := n.srv.Accepted()

	var ok, failed atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := sa.TryExecute(pr, key(i)); err != nil {
				failed.Add(1)
				lastErr.Store(err.Error())
				return
			}
			ok.Add(1)
		}
	}()
	more := func(k int64) {
		want := ok.Load() + k
		waitFor(t, "requests to succeed", func() bool { return ok.Load() >= want || failed.Load() > 0 })
	}
	more(200)
	for i := range 2 {
		nw, oldRes, newRes := hp.handover(t, Config{})
		if oldRes.Moved != 4 || newRes.Moved != 4 || oldRes.Closed != 0 {
			t.Errorf("handover %d: old moved %d, closed %d; new adopted %d; want the 4 shards' connections moved", i+1, oldRes.Moved, oldRes.Closed, newRes.Moved)
		}
		more(200)
		st := nw.ShardStats()
		for s := range 4 {
			if st.Requests[s] == 0 {
				t.Errorf("handover %d: the new proxy counts no request on shard %d (%v): the moved connections lost their shard", i+1, s, st.Requests)
			}
		}
		if st.CrossShard != 0 {
			t.Errorf("handover %d: the new proxy counts %d cross-shard requests; want 0", i+1, st.CrossShard)
		}
	}
	close(stop)
	<-loadDone
	if f := failed.Load(); f != 0 {
		t.Errorf("%d requests failed (%v); want 0", f, lastErr.Load())
	}
	if got := n.srv.Accepted(); got != accepted {
		t.Errorf("the node accepted %d connections during the handovers; want 0 (no reconnect)", got-accepted)
	}
	if got := n.srv.CrossShardRequests(); got != 0 {
		t.Errorf("node: %d cross-shard requests; want 0", got)
	}
	t.Logf("%d shard-routed requests over 2 handovers, sent per shard %v", ok.Load(), sa.Sent)
}
