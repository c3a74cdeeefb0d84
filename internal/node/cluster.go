package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/engine"
)

// ClusterConfig configures a Cluster. The zero value is one node with 16 tokens, in
// datacenter1, without auth.
type ClusterConfig struct {
	// NumTokens is the number of tokens of each node; zero means DefaultNumTokens.
	NumTokens int
	// DCs lays the nodes out in data centers; empty means all in datacenter1.
	DCs []engine.DC
	// Auth, TLS, Logger, ClusterName, MaxFrameSize, ScyllaSupported,
	// MaxProtocolVersion and NoMaterializedViews are as in Config, for every node.
	Auth                string
	TLS                 *tls.Config
	Logger              *zerolog.Logger
	ClusterName         string
	MaxFrameSize        int
	ScyllaSupported     bool
	MaxProtocolVersion  byte
	NoMaterializedViews bool
	// Shards is as in Config, for every node. ShardAware, when set, holds each node's
	// shard-aware listener (Server.ServeShardAware), in the order of the CQL listeners.
	Shards     int
	ShardAware []net.Listener
	// ScyllaOverride is as in Config, for every node.
	ScyllaOverride map[string][]string
	// MemoryLimit bounds the shared engine's user tables (EngineConfig.MemoryLimit); zero
	// means none.
	MemoryLimit int64
}

// Cluster is an embedded cluster: one Server per listener, all sharing one Engine, so
// that every node serves every key (in effect, a replication factor of N), on an evenly
// split token ring. Each node's system.local and system.peers describe it and the others;
// schema changes reach the REGISTERed connections of every node, and stopping or starting
// a node sends STATUS_CHANGE DOWN or UP to the others' listeners. It is safe for
// concurrent use.
type Cluster struct {
	engine *engine.Engine
	nodes  []*clusterNode
	startc chan startReq
	quit   chan struct{} // closed when Serve returns

	mu      sync.Mutex // serialises Stop and Start
	serving bool
}

type clusterNode struct {
	srv  *Server
	addr netip.AddrPort

	// Guarded by Cluster.mu.
	ln     net.Listener
	aln    net.Listener // the shard-aware one, or nil
	aaddr  string
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve returns
	up     bool
}

type startReq struct {
	i     int
	reply chan error
}

// ErrNodeState is returned by Stop and Start for a node that is already down or up.
var ErrNodeState = errors.New("node is already in that state")

// NewCluster returns a cluster with one node per listener, node i reporting the address of
// lns[i]. Serve runs it.
func NewCluster(cfg ClusterConfig, lns []net.Listener) (*Cluster, error) {
	addrs := make([]netip.AddrPort, len(lns))
	for i, ln := range lns {
		ap, err := netip.ParseAddrPort(ln.Addr().String())
		if err != nil {
			return nil, fmt.Errorf("node: listener address %s: %w", ln.Addr(), err)
		}
		addrs[i] = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	nodes, err := engine.Topology(addrs, cfg.NumTokens, cfg.DCs)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	e := engine.NewEngine(engine.EngineConfig{RPCAddr: addrs[0], ClusterName: cfg.ClusterName, Nodes: nodes, Auth: cfg.Auth,
		NoMaterializedViews: cfg.NoMaterializedViews, MemoryLimit: cfg.MemoryLimit})
	c := &Cluster{engine: e, startc: make(chan startReq), quit: make(chan struct{})}
	for i, ln := range lns {
		srv := New(Config{Auth: cfg.Auth, TLS: cfg.TLS, Logger: cfg.Logger, MaxFrameSize: cfg.MaxFrameSize, ScyllaSupported: cfg.ScyllaSupported, MaxProtocolVersion: cfg.MaxProtocolVersion, ClusterName: cfg.ClusterName, Engine: e, Node: i, Shards: cfg.Shards, ScyllaOverride: cfg.ScyllaOverride})
		n := &clusterNode{srv: srv, addr: addrs[i], ln: ln}
		if i < len(cfg.ShardAware) && cfg.ShardAware[i] != nil {
			n.aln, n.aaddr = cfg.ShardAware[i], cfg.ShardAware[i].Addr().String()
			// SUPPORTED names the port from the start, before its listener is served.
			srv.awarePort.Store(int32(n.aln.Addr().(*net.TCPAddr).Port))
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node returns node i's server, for i from 0 to Len()-1.
func (c *Cluster) Node(i int) *Server { return c.nodes[i].srv }

// Addr returns node i's CQL address.
func (c *Cluster) Addr(i int) netip.AddrPort { return c.nodes[i].addr }

// ShardAwareAddr returns node i's shard-aware address, empty without one.
func (c *Cluster) ShardAwareAddr(i int) string { return c.nodes[i].aaddr }

// Engine returns the engine the nodes share.
func (c *Cluster) Engine() *engine.Engine { return c.engine }

// Up reports whether node i is serving.
func (c *Cluster) Up(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].up
}

// Serve runs every node until ctx is done, and serves Start meanwhile. It returns nil when
// ctx ended it, or the first error of a node that failed on its own. Call it once.
func (c *Cluster) Serve(ctx context.Context) error {
	errc := make(chan error, 2*len(c.nodes))
	c.mu.Lock()
	c.serving = true
	for i := range c.nodes {
		c.run(ctx, i, errc)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.serving = false
		close(c.quit)
		var wait []chan struct{}
		for _, n := range c.nodes {
			if n.up {
				n.cancel()
				n.up = false
				wait = append(wait, n.done)
			}
		}
		c.mu.Unlock()
		for _, d := range wait {
			<-d
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case r := <-c.startc:
			r.reply <- c.start(ctx, r.i, errc)
		}
	}
}

// run serves node i on its listener; c.mu is held.
func (c *Cluster) run(ctx context.Context, i int, errc chan<- error) {
	n := c.nodes[i]
	nctx, cancel := context.WithCancel(ctx)
	n.cancel, n.done, n.up = cancel, make(chan struct{}), true
	ln, aln, done := n.ln, n.aln, n.done
	var awareDone chan struct{}
	if aln != nil {
		awareDone = make(chan struct{})
		go func() {
			defer close(awareDone)
			if err := n.srv.ServeShardAware(nctx, aln); err != nil {
				errc <- fmt.Errorf("node %d shard-aware port: %w", i+1, err)
			}
		}()
	}
	go func() {
		defer close(done)
		err := n.srv.Serve(nctx, ln)
		if awareDone != nil {
			cancel()
			<-awareDone
		}
		if err != nil {
			errc <- fmt.Errorf("node %d: %w", i+1, err)
		}
	}()
}

// Stop stops node i as a crash would look to clients: it stops listening, closes its
// connections, and the other nodes send STATUS_CHANGE DOWN to their listeners.
func (c *Cluster) Stop(i int) error {
	if i < 0 || i >= len(c.nodes) {
		return fmt.Errorf("node %d: the cluster has nodes 1 to %d", i+1, len(c.nodes))
	}
	c.mu.Lock()
	n := c.nodes[i]
	if !n.up {
		c.mu.Unlock()
		return fmt.Errorf("node %d: %w (down)", i+1, ErrNodeState)
	}
	n.up = false
	n.cancel()
	done := n.done
	c.mu.Unlock()
	<-done
	c.announce(i, "DOWN")
	return nil
}

// Start starts node i again on its address, after Stop; the other nodes send STATUS_CHANGE
// UP to their listeners once it accepts connections. Serve must be running.
func (c *Cluster) Start(i int) error {
	if i < 0 || i >= len(c.nodes) {
		return fmt.Errorf("node %d: the cluster has nodes 1 to %d", i+1, len(c.nodes))
	}
	r := startReq{i: i, reply: make(chan error, 1)}
	c.mu.Lock()
	serving := c.serving
	c.mu.Unlock()
	if !serving {
		return errors.New("node: the cluster is not serving")
	}
	select {
	case c.startc <- r:
	case <-c.quit:
		return errors.New("node: the cluster is not serving")
	}
	if err := <-r.reply; err != nil {
		return err
	}
	c.announce(i, "UP")
	return nil
}

// start runs in Serve's goroutine.
func (c *Cluster) start(ctx context.Context, i int, errc chan<- error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[i]
	if n.up {
		return fmt.Errorf("node %d: %w (up)", i+1, ErrNodeState)
	}
	ln, err := listenAgain(ctx, n.addr.String())
	if err != nil {
		return fmt.Errorf("node %d: listen again on %s: %w", i+1, n.addr, err)
	}
	n.ln = ln
	if n.aln != nil {
		if n.aln, err = listenAgain(ctx, n.aaddr); err != nil {
			ln.Close()
			return fmt.Errorf("node %d: listen again on %s: %w", i+1, n.aaddr, err)
		}
	}
	c.run(ctx, i, errc)
	return nil
}

// relistenTimeout bounds how long a restarted node waits for its port to be free again.
const relistenTimeout = 5 * time.Second

// listenAgain listens on addr, the address a stopped node had. The port was free a moment
// ago, but while the node was down another socket may have taken it for a while (an
// ephemeral port of a connection being set up, a wildcard listener of the same process):
// it is retried until relistenTimeout, then the error is returned.
func listenAgain(ctx context.Context, addr string) (net.Listener, error) {
	deadline := time.Now().Add(relistenTimeout)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return ln, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// announce sends a STATUS_CHANGE about node i to the listeners of the nodes that are up.
func (c *Cluster) announce(i int, change string) {
	ev := cql.Event{Type: cql.EventStatusChange, Change: change, Addr: c.nodes[i].addr}
	c.mu.Lock()
	var to []*Server
	for j, n := range c.nodes {
		if j != i && n.up {
			to = append(to, n.srv)
		}
	}
	c.mu.Unlock()
	for _, s := range to {
		s.BroadcastEvent(ev)
	}
}
