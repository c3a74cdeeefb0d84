package main

import (
	"context"
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/sidecar"
)

// shardAwareOff is the --shard-aware-listen value that turns the shard-aware port off.
const shardAwareOff = "off"

// checkShardAwareListen checks --shard-aware-listen: empty, off, or an IP:PORT.
func checkShardAwareListen(v string) error {
	if v == "" || v == shardAwareOff {
		return nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return usageErrorf("--shard-aware-listen must be IP:PORT or off, got %q", v)
	}
	return nil
}

// shardAwareHost is the host on which the proxy listens, with the node's shard-aware port
// number, once it learns it: --listen's, when --shard-aware-listen is left to its default.
func shardAwareHost(cfg stackConfig) string {
	if cfg.ShardAwareListen != "" {
		return ""
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return ""
	}
	return host
}

// listenShardAware binds the shard-aware port given as IP:PORT (inherited from a
// predecessor, when there is one), and readies its serving: that port, or the one the
// proxy makes once it learns the node's port number (Proxy.ServeShardAwareAuto).
func (st *stack) listenShardAware(cfg stackConfig) error {
	switch cfg.ShardAwareListen {
	case shardAwareOff:
		return nil
	case "":
		st.front = append(st.front, func(ctx context.Context) error { return st.proxy.ServeShardAwareAuto(ctx) })
		return nil
	}
	ln, err := cfg.inherit.listener("shard-aware", cfg.ShardAwareListen)
	if err != nil {
		return err
	}
	st.awareLn = sidecar.NewListener(ln)
	st.ShardAware = ln.Addr().String()
	st.proxy.AdvertiseShardAware(st.awareLn) // before either port accepts
	st.front = append(st.front, func(ctx context.Context) error { return st.proxy.ServeShardAware(ctx, st.awareLn) })
	return nil
}

// shardConfig makes the admin API serve the shard figures: in /tracecar/status, and in
// /metrics.
func (st *stack) shardConfig(c *admin.Config) {
	c.Shards = st.shardStatus
	c.Collectors = append(c.Collectors, shardCollector{st})
}

// shardStatus is the status's shard figures, nil until there are any.
func (st *stack) shardStatus() *admin.Shards {
	s := st.proxy.ShardStats()
	fallbacks := uint64(0)
	for _, n := range s.Fallbacks {
		fallbacks += n
	}
	if len(s.Requests) == 0 && s.Paired == 0 && fallbacks == 0 && s.MalformedSupported == 0 {
		return nil
	}
	out := &admin.Shards{RequestsByShard: map[string]uint64{}, CrossShardRequests: s.CrossShard,
		ShardAwarePaired: s.Paired, ShardAwareFallbacks: s.Fallbacks, MalformedSupported: s.MalformedSupported}
	for shard, n := range s.Requests {
		out.RequestsByShard[strconv.Itoa(shard)] = n
	}
	return out
}

var (
	shardRequestsDesc = prometheus.NewDesc("tracecar_shard_requests_total",
		"Requests of the client connections on each ScyllaDB shard, as the node named the shard of each in SUPPORTED.", []string{"shard"}, nil)
	shardAddedDesc = prometheus.NewDesc("tracecar_shard_added_latency_seconds_total",
		"Time the responses on each ScyllaDB shard's connections spent in the sidecar itself, summed: divided by tracecar_shard_requests_total, the mean added latency.", []string{"shard"}, nil)
	crossShardDesc = prometheus.NewDesc("tracecar_cross_shard_requests_total",
		"EXECUTEs whose partition key another ScyllaDB shard owns than their connection's: 0 when every driver is shard-aware.", nil, nil)
	shardAwareDesc = prometheus.NewDesc("tracecar_shard_aware_connections_total",
		"Client connections on the sidecar's shard-aware port: outcome paired (a node connection on the shard asked for) or the reason of an ordinary one instead.", []string{"outcome"}, nil)
)

// shardCollector puts the proxy's shard figures in /metrics.
type shardCollector struct{ st *stack }

// Describe sends the descriptions of the shard metrics.
func (c shardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shardRequestsDesc
	ch <- shardAddedDesc
	ch <- crossShardDesc
	ch <- shardAwareDesc
}

// Collect sends the shard metrics.
func (c shardCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.proxy.ShardStats()
	for shard, n := range s.Requests {
		ch <- prometheus.MustNewConstMetric(shardRequestsDesc, prometheus.CounterValue, float64(n), strconv.Itoa(shard))
	}
	for shard, d := range s.AddedLatency {
		ch <- prometheus.MustNewConstMetric(shardAddedDesc, prometheus.CounterValue, d.Seconds(), strconv.Itoa(shard))
	}
	ch <- prometheus.MustNewConstMetric(crossShardDesc, prometheus.CounterValue, float64(s.CrossShard))
	ch <- prometheus.MustNewConstMetric(shardAwareDesc, prometheus.CounterValue, float64(s.Paired), "paired")
	for reason, n := range s.Fallbacks {
		ch <- prometheus.MustNewConstMetric(shardAwareDesc, prometheus.CounterValue, float64(n), reason)
	}
}
