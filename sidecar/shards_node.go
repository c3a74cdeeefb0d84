package sidecar

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/sidecar/internal/pipeline"
)

// The proxy's part in ScyllaDB's shard-awareness (see shards.go, below, for the state and
// the reasons of a fallback): its figures, the node's sharding asked and cached, and the
// shard-aware port that Config.ShardAwareHost makes once the node names one.

// ShardStats returns the proxy's shard figures. It is safe for concurrent use.
func (p *Proxy) ShardStats() ShardStats {
	st := ShardStats{Requests: map[int]uint64{}, AddedLatency: map[int]time.Duration{}, Paired: p.shards.paired.Load(),
		Fallbacks: map[string]uint64{}, MalformedSupported: p.env.sh.MalformedSupported()}
	p.mu.Lock()
	for s, n := range p.shards.retiredShards {
		st.Requests[s] += n.requests
		st.CrossShard += n.cross
		st.AddedLatency[s] += time.Duration(n.addedNanos)
	}
	for c := range p.conns {
		if sc, ok := c.pipe.Shard().Counts(); ok {
			st.Requests[sc.Shard] += total(&c.pipe.Counters)
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

// listenAuto listens on Config.ShardAwareHost with the node's shard-aware port number, the
// first time the node names one; a failure is logged and counted, and the proxy then
// advertises no shard-aware port.
func (p *Proxy) listenAuto(in sharding.Info) {
	host := p.env.cfg.ShardAwareHost
	port := in.AwarePort
	if p.env.nodeTLS != nil {
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
	if p.env.cfg.TLS != nil && in.AwarePortSSL != 0 {
		port = in.AwarePortSSL // the client side's kind names the number, as ScyllaDB's would
	} else if p.env.cfg.TLS == nil && in.AwarePort != 0 {
		port = in.AwarePort
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.shards.fallbacks[fallbackListen].Add(1)
		p.env.sh.Log.Warn().Err(err).Str("addr", addr).Msg("shard-aware port: cannot listen; the node's shard-aware port is not advertised, and shard-aware drivers use the ordinary port")
		return
	}
	p.shards.autoDone.Store(true)
	p.env.sh.SetShardAwarePort(ln.Addr().(*net.TCPAddr).Port, p.env.cfg.TLS != nil)
	p.env.sh.Log.Info().Str("addr", ln.Addr().String()).Int("shards", in.NrShards).Msg("shard-aware port: listening, as the node's SUPPORTED names one")
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

// probeSharding sends OPTIONS on a new ordinary node connection and parses the answer.
func (p *Proxy) probeSharding(ctx context.Context) (sharding.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, p.env.cfg.DialTimeout)
	defer cancel()
	nc, err := p.env.dial(ctx)
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
