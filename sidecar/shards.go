package sidecar

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/sidecar/internal/pipeline"
)

// ScyllaDB's shard-awareness kept through the proxy: a client connection accepted on the
// proxy's shard-aware port (ServeShardAware) from source port p gets a node connection to
// the node's shard-aware port from a local port q with q % nr_shards == p % nr_shards, so
// that it lands on the shard the client chose; the SUPPORTED the node sends names the
// proxy's shard-aware ports instead of its own (rewriteSupported); and each EXECUTE whose
// partition key another shard owns than its connection's is counted (countShard).

// Reasons a shard-aware connection fell back to an ordinary node connection, the index of
// shardProxy.fallbacks.
const (
	fallbackNotScylla = iota // the node's SUPPORTED has no SCYLLA_NR_SHARDS
	fallbackMalformed        // its SCYLLA_* keys are malformed, or name an unknown algorithm
	fallbackNoPort           // it names no shard-aware port (of the TLS kind the proxy dials)
	fallbackPorts            // no local port of the shard's residue was free
	fallbackProbe            // the node could not be asked (OPTIONS failed)
	fallbackListen           // Config.ShardAwareHost: the shard-aware port could not be listened on
	numFallbacks
)

// FallbackReasons name the reasons of ShardStats.Fallbacks, in its order.
var FallbackReasons = [numFallbacks]string{"not_scylla", "malformed_supported", "no_shard_aware_port", "ports_exhausted", "probe_failed", "listen_failed"}

// shardProxy is the Proxy's state of shard-awareness.
type shardProxy struct {
	// node is what the node's SUPPORTED said of its sharding, learnt by probe; nil until
	// then. probed is when a probe last failed (unix nanoseconds), so that a node without
	// sharding is not asked again for every connection.
	mu     sync.Mutex
	node   *sharding.Info
	probed int64
	// portRange returns the local ports to dial the node from; tests replace it.
	portRange func() (lo, hi int)

	// ordinaryPort is the port of the listener Serve accepts on: a connection on the
	// shard-aware port advertises it in system.local and events, not the shard-aware one.
	ordinaryPort atomic.Int32

	paired    atomic.Uint64 // shard-aware connections paired with the shard they asked for
	fallbacks [numFallbacks]atomic.Uint64
	warned    [numFallbacks]atomic.Bool // each reason is logged once at warning level
	// auto is the listener that Config.ShardAwareHost made, for ServeShardAwareAuto;
	// autoDone says it was made, autoLast when it was last tried (unix nanoseconds): a
	// port still held by a predecessor being taken over is tried again, at most once a
	// second.
	auto     chan net.Listener
	autoDone atomic.Bool
	autoLast atomic.Int64
	// retiredShards are the counters of closed connections, by shard; under Proxy.mu.
	retiredShards map[int]shardCounts
}

// shardCounts are one shard's requests, those of them whose partition key another shard
// owns, and the time their responses spent in the proxy.
type shardCounts struct{ requests, cross, addedNanos uint64 }

// ShardStats are the proxy's figures of ScyllaDB's shards.
type ShardStats struct {
	// Requests are the requests of the connections on each shard, by shard; only
	// connections whose node named their shard in SUPPORTED are counted.
	Requests map[int]uint64
	// AddedLatency is the time the responses on each shard's connections spent in the
	// proxy, summed, by shard (with Config.Metrics): divided by Requests, the mean.
	AddedLatency map[int]time.Duration
	// CrossShard counts the EXECUTEs whose partition key (from the bound values at the
	// prepared statement's partition-key indexes) another shard owns than their
	// connection's.
	CrossShard uint64
	// Paired counts the connections on the shard-aware port whose node connection was
	// put on the shard they asked for.
	Paired uint64
	// Fallbacks counts the connections on the shard-aware port that got an ordinary node
	// connection instead, by reason (FallbackReasons).
	Fallbacks map[string]uint64
	// MalformedSupported counts the node's SUPPORTED answers whose SCYLLA_* keys were
	// malformed: their shard-aware ports were removed, not replaced.
	MalformedSupported uint64
}

// retire moves c's shard counters to the totals; Proxy.mu is held.
func (s *shardProxy) retire(c *conn) {
	sc, ok := c.pipe.Shard().Counts()
	if !ok {
		return
	}
	if s.retiredShards == nil {
		s.retiredShards = map[int]shardCounts{}
	}
	n := s.retiredShards[sc.Shard]
	n.requests += total(&c.pipe.Counters)
	n.cross += sc.Cross
	n.addedNanos += sc.AddedNanos
	s.retiredShards[sc.Shard] = n
}

// total returns a connection's requests, all opcodes.
func total(c *pipeline.Counters) uint64 {
	var n uint64
	for i := range c.Requests {
		n += c.Requests[i].Load()
	}
	return n
}

// errProbe wraps an error of asking the node.
type errProbe struct{ err error }

func (e errProbe) Error() string { return "ask the node for SUPPORTED: " + e.err.Error() }
func (e errProbe) Unwrap() error { return e.err }

// learn records the node's sharding from a SUPPORTED, for the shard-aware connections
// that come later, which then need not ask the node themselves.
func (s *shardProxy) learn(in sharding.Info) {
	in.Shard = 0 // the connection's, not the node's
	s.mu.Lock()
	if s.node == nil || *s.node != in {
		s.node = &in
	}
	s.mu.Unlock()
}
