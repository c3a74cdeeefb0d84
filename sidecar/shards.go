package sidecar

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/sidecar/pipeline"
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

// ShardStats returns the proxy's shard figures. It is safe for concurrent use.
func (p *Proxy) ShardStats() ShardStats {
	st := ShardStats{Requests: map[int]uint64{}, AddedLatency: map[int]time.Duration{}, Paired: p.shards.paired.Load(),
		Fallbacks: map[string]uint64{}, MalformedSupported: p.sh.MalformedSupported()}
	p.mu.Lock()
	for s, n := range p.shards.retiredShards {
		st.Requests[s] += n.requests
		st.CrossShard += n.cross
		st.AddedLatency[s] += time.Duration(n.addedNanos)
	}
	for c := range p.conns {
		if sc, ok := c.Shard().Counts(); ok {
			st.Requests[sc.Shard] += total(&c.Counters)
			st.CrossShard += sc.Cross
			st.AddedLatency[sc.Shard] += time.Duration(sc.AddedNanos)
		}
	}
	p.mu.Unlock()
	for i := range p.shards.fallbacks {
		st.Fallbacks[FallbackReasons[i]] = p.shards.fallbacks[i].Load()
	}
	return st
}

// retireShard moves c's shard counters to the totals; p.mu is held.
func (p *Proxy) retireShard(c *conn) {
	sc, ok := c.Shard().Counts()
	if !ok {
		return
	}
	if p.shards.retiredShards == nil {
		p.shards.retiredShards = map[int]shardCounts{}
	}
	n := p.shards.retiredShards[sc.Shard]
	n.requests += total(&c.Counters)
	n.cross += sc.Cross
	n.addedNanos += sc.AddedNanos
	p.shards.retiredShards[sc.Shard] = n
}

// total returns a connection's requests, all opcodes.
func total(c *pipeline.Counters) uint64 {
	var n uint64
	for i := range c.Requests {
		n += c.Requests[i].Load()
	}
	return n
}

// ServeShardAware is Serve for the proxy's shard-aware port: a connection accepted on ln
// from source port p gets a node connection on the node's shard-aware port from a local
// port q with q % nr_shards == p % nr_shards, and so the shard it asked for. When the node
// does not shard, or says so in a way the proxy cannot use, or no such local port is free,
// the connection gets an ordinary node connection: the reason is logged and counted
// (ShardStats.Fallbacks), and the connection works as one on the ordinary port. SUPPORTED
// names ln's port as the shard-aware port (SCYLLA_SHARD_AWARE_PORT_SSL with Config.TLS).
func (p *Proxy) ServeShardAware(ctx context.Context, ln net.Listener) error {
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		p.sh.SetShardAwarePort(ta.Port, p.cfg.TLS != nil)
	}
	return p.serve(ctx, ln, true)
}

// ServeShardAwareAuto serves the shard-aware port that Config.ShardAwareHost asks for,
// once the proxy has learnt the node's shard-aware port from a SUPPORTED that a client's
// OPTIONS brought, until ctx is done. It returns nil when ctx ends before any port was
// learnt (or without Config.ShardAwareHost, when ctx ends).
func (p *Proxy) ServeShardAwareAuto(ctx context.Context) error {
	if p.cfg.ShardAwareHost == "" {
		<-ctx.Done() // an actor of a group that ends with the first to return
		return nil
	}
	select {
	case ln := <-p.shards.auto:
		return p.ServeShardAware(ctx, ln)
	case <-ctx.Done():
		return nil
	}
}

// listenAuto listens on Config.ShardAwareHost with the node's shard-aware port number, the
// first time the node names one; a failure is logged and counted, and the proxy then
// advertises no shard-aware port.
func (p *Proxy) listenAuto(in sharding.Info) {
	host := p.cfg.ShardAwareHost
	port := in.AwarePort
	if p.nodeTLS != nil {
		port = in.AwarePortSSL
	}
	// A node of one shard has nothing to route: its shard-aware port is removed instead.
	if host == "" || port == 0 || in.NrShards < 2 || p.shards.autoDone.Load() {
		return
	}
	now := time.Now().UnixNano()
	if last := p.shards.autoLast.Load(); now-last < int64(time.Second) || !p.shards.autoLast.CompareAndSwap(last, now) {
		return
	}
	if p.cfg.TLS != nil && in.AwarePortSSL != 0 {
		port = in.AwarePortSSL // the client side's kind names the number, as ScyllaDB's would
	} else if p.cfg.TLS == nil && in.AwarePort != 0 {
		port = in.AwarePort
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.shards.fallbacks[fallbackListen].Add(1)
		p.sh.Log.Warn().Err(err).Str("addr", addr).Msg("shard-aware port: cannot listen; the node's shard-aware port is not advertised, and shard-aware drivers use the ordinary port")
		return
	}
	p.shards.autoDone.Store(true)
	p.sh.SetShardAwarePort(ln.Addr().(*net.TCPAddr).Port, p.cfg.TLS != nil)
	p.sh.Log.Info().Str("addr", ln.Addr().String()).Int("shards", in.NrShards).Msg("shard-aware port: listening, as the node's SUPPORTED names one")
	p.shards.auto <- ln
}

// NodeSharding asks the node (over an ordinary connection, with OPTIONS) what its
// SUPPORTED says of its sharding, and remembers a good answer. It returns
// sharding.ErrNotScylla for a node that does not shard, and another error when the node
// cannot be asked or its SCYLLA_* keys are malformed.
func (p *Proxy) NodeSharding(ctx context.Context) (sharding.Info, error) {
	p.shards.mu.Lock()
	defer p.shards.mu.Unlock()
	if in := p.shards.node; in != nil {
		return *in, nil
	}
	in, err := p.probeSharding(ctx)
	if err == nil {
		p.shards.node = &in
	}
	return in, err
}

// errProbe wraps an error of asking the node.
type errProbe struct{ err error }

func (e errProbe) Error() string { return "ask the node for SUPPORTED: " + e.err.Error() }
func (e errProbe) Unwrap() error { return e.err }

// probeSharding sends OPTIONS on a new ordinary node connection and parses the answer.
func (p *Proxy) probeSharding(ctx context.Context) (sharding.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	nc, err := p.dial(ctx)
	if err != nil {
		return sharding.Info{}, errProbe{err}
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	if _, err := nc.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4}, cql.Options{})); err != nil {
		return sharding.Info{}, errProbe{err}
	}
	// The probe's OPTIONS counts as a request the proxy sent, so that the node's count of
	// requests served stays the proxy's.
	p.mu.Lock()
	p.retired.Requests[pipeline.RequestSlot(cql.OpOptions)]++
	p.mu.Unlock()
	h, body, _, err := cql.ReadFrameMax(bufio.NewReader(nc), nil, cql.MaxStartupFrameSize)
	if err != nil {
		return sharding.Info{}, errProbe{err}
	}
	if h.Opcode != cql.OpSupported {
		return sharding.Info{}, errProbe{fmt.Errorf("OPTIONS answered with %s", h.Opcode)}
	}
	s, err := cql.DecodeSupported(body)
	if err != nil {
		return sharding.Info{}, errProbe{err}
	}
	return sharding.Parse(s.Options)
}

// probeRetry is how long a failed probe is trusted before the node is asked again.
const probeRetry = 5 * time.Second

// nodeShardingCached is NodeSharding for a connection: a probe that failed less than
// probeRetry ago is not repeated.
func (p *Proxy) nodeShardingCached(ctx context.Context) (sharding.Info, error) {
	p.shards.mu.Lock()
	if in := p.shards.node; in != nil {
		p.shards.mu.Unlock()
		return *in, nil
	}
	recent := time.Now().UnixNano()-p.shards.probed < int64(probeRetry)
	p.shards.mu.Unlock()
	if recent {
		return sharding.Info{}, errProbe{errors.New("the last one failed less than " + probeRetry.String() + " ago")}
	}
	in, err := p.NodeSharding(ctx)
	if err != nil {
		p.shards.mu.Lock()
		p.shards.probed = time.Now().UnixNano()
		p.shards.mu.Unlock()
	}
	return in, err
}

// learnSharding is the pipelines' hook (pipeline.Settings.LearnSharding): the node's
// sharding, from a SUPPORTED a client's OPTIONS brought, for the shard-aware connections
// that come later, and the proxy's own shard-aware port, made when Config.ShardAwareHost
// asks for it.
func (p *Proxy) learnSharding(in sharding.Info) {
	p.shards.learn(in)
	p.listenAuto(in)
}

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
