package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/tracing"
)

// embedNode builds the embedded node, and its API, that a sidecar without --node runs in
// its own process, on loopback ports; they serve in the stack's back.
func (st *stack) embedNode(cfg stackConfig, out io.Writer) error {
	nln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the embedded node: %w", err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		nln.Close()
		return fmt.Errorf("listen for the embedded node's API: %w", err)
	}
	st.unserved = append(st.unserved, nln, aln)
	srv := node.New(node.Config{Logger: st.reg.Logger(logs.Node), MaxFrameSize: cfg.MaxFrameSize, MaxProtocolVersion: byte(cfg.MaxProtocolVersion),
		MemoryLimit: cfg.NodeMemory.n})
	st.Node, st.NodeAPI = nln.Addr().String(), "http://"+aln.Addr().String()
	st.nodeAPI = newNodeAPI(srv, st.reg, admin.Config{Token: cfg.AdminToken}) // the sidecar's token: one for every admin surface
	st.back = append(st.back,
		func(ctx context.Context) error { return srv.Serve(ctx, nln) },
		func(ctx context.Context) error { return st.nodeAPI.Serve(ctx, aln) })
	fmt.Fprintf(out, "tracecar: started an embedded node on %s (API %s), %s\n", st.Node, st.NodeAPI, cfg.NodeMemory.describe())
	return nil
}

// newNodeAPI returns the node's REST API: its loggers and its own trace probability, with
// the same handlers, token and loopback rule as the sidecar's admin API. An empty token
// leaves it open, which only a loopback address or insecure allows. cfg holds the token, the
// insecure flag and what else the caller serves (a test cluster's node control).
func newNodeAPI(srv *node.Server, reg *logs.Registry, cfg admin.Config) *admin.Server {
	tr := admin.ConfigOnly(
		func() tracing.Config {
			c := tracing.DefaultConfig()
			c.Probability = srv.TraceProbability()
			return c
		},
		func(c tracing.Config) error { return srv.SetTraceProbability(c.Probability) },
	)
	accepted := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracecar_node_connections_accepted_total",
		Help: "Client connections the node accepted."}, func() float64 { return float64(srv.Accepted()) })
	cfg.Collectors = append(cfg.Collectors, accepted)
	cfg.Collectors = append(cfg.Collectors, nodeMemoryCollectors(srv)...)
	if shards := srv.ShardConnections(); shards != nil {
		cross := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracecar_node_cross_shard_requests_total",
			Help: "EXECUTEs whose partition key another shard owns than their connection's (with --shards)."},
			func() float64 { return float64(srv.CrossShardRequests()) })
		cfg.Collectors = append(cfg.Collectors, cross)
		for i := range shards {
			g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tracecar_node_shard_connections",
				Help: "Open client connections per shard (with --shards).", ConstLabels: prometheus.Labels{"shard": strconv.Itoa(i)}},
				func() float64 { return float64(srv.ShardConnections()[i]) })
			cfg.Collectors = append(cfg.Collectors, g)
		}
	}
	cfg.Logger, cfg.Tracer, cfg.Loggers = reg.Logger(logs.Admin), tr, reg
	return admin.New(cfg)
}

// nodeMemoryCollectors are the node's memory metrics: what its tables hold, its limit, and
// the writes the limit refused.
func nodeMemoryCollectors(srv *node.Server) []prometheus.Collector {
	engine := func(f func(*node.Engine) float64) func() float64 {
		return func() float64 {
			if e := srv.Engine(); e != nil {
				return f(e)
			}
			return 0
		}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tracecar_node_memory_held_bytes",
			Help: "Bytes the node's tables hold, as the memory limit counts them (an estimate of their data, runtime overhead not included)."},
			engine(func(e *node.Engine) float64 { return float64(e.Memory().Held()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tracecar_node_memory_limit_bytes",
			Help: "The node's --memory-limit in bytes; 0 means none."},
			engine(func(e *node.Engine) float64 { return float64(e.Memory().Limit()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracecar_node_memory_refused_writes_total",
			Help: "Writes the node refused with Overloaded because its tables held their share (7/8) of --memory-limit."},
			engine(func(e *node.Engine) float64 { return float64(e.Memory().Refused()) })),
	}
}
