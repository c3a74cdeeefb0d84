package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/sharding"
)

// nodeFlags are the flags of "tracecar node".
type nodeFlags struct {
	listen, api, auth, token, dcs     *string
	insecure, sameIP, control, scylla *bool
	views                             *bool
	nodes, numTokens, shards          *int
	shardAware                        *string
	serverTLS                         *serverTLSFlags
	maxFrame                          *byteSize
	maxVersion                        *protocolVersion
	memory                            *memoryLimit
	logs                              logFlags
}

func addNodeFlags(fs *flag.FlagSet) nodeFlags {
	return nodeFlags{
		listen:     fs.String("listen", "127.0.0.1:9042", "CQL native protocol address (of node 1 with --nodes)"),
		api:        fs.String("api", "127.0.0.1:10001", "REST API address (loggers, trace_probability; of node 1 with --nodes); empty disables it"),
		auth:       fs.String("auth", "", "USER:PASS turns on PasswordAuthenticator"),
		token:      fs.String("api-token", "", "bearer token required by the REST API (default $TRACECAR_ADMIN_TOKEN)"),
		insecure:   fs.Bool("api-insecure", false, "allow the REST API on a non-loopback address without a token"),
		serverTLS:  addServerTLSFlags(fs),
		nodes:      fs.Int("nodes", 1, "number of nodes: node i listens on the --listen IP + i-1 (127.0.0.<i>), same port, one shared storage"),
		sameIP:     fs.Bool("nodes-same-ip", false, "with --nodes: one IP, consecutive ports, instead of consecutive IPs"),
		numTokens:  fs.Int("num-tokens", node.DefaultNumTokens, "tokens per node; the ring is split evenly between the nodes"),
		dcs:        fs.String("dcs", "", "data centers, as NAME:NODES,… (e.g. dc1:2,dc2:2); racks rack1, rack2, … within each"),
		control:    fs.Bool("allow-node-control", false, "for failover tests only: serve POST /tracecar/node/stop?node=i and /tracecar/node/start?node=i on the API"),
		maxFrame:   maxFrameSizeFlag(fs),
		maxVersion: maxProtocolVersionFlag(fs, "the node speaks"),
		memory:     memoryLimitFlag(fs, "node"),
		scylla:     fs.Bool("scylla-supported", false, "answer OPTIONS with ScyllaDB's SUPPORTED keys too (SCYLLA_SHARD, SCYLLA_NR_SHARDS, SCYLLA_SHARD_AWARE_PORT, …), to test shard-aware drivers; and, as ScyllaDB, speak protocol v4 at most (a client offering v5 gets a ProtocolError and steps down)"),
		shards:     fs.Int("shards", 0, "with --scylla-supported: emulate ScyllaDB's sharding with N shards (1 to 4096): a shard-aware port, SCYLLA_SHARD per connection, cross-shard requests counted in /metrics; 0 means none"),
		shardAware: fs.String("shard-aware-listen", "", "with --shards: the shard-aware port's address (of node 1 with --nodes); default the --listen IP on port 19042 (19142 with TLS), or port 0 when --listen's is 0"),
		logs:       addLogFlags(fs),
		views:      fs.Bool("materialized-views", true, "materialized views, on as in ScyllaDB; false refuses CREATE MATERIALIZED VIEW as a stock Cassandra 4.1 does"),
	}
}

// listenShardAware checks --shards and --shard-aware-listen and listens on each node's
// shard-aware port; nil without --shards.
func (f nodeFlags) listenShardAware(nodes int, tlsOn bool) ([]net.Listener, error) {
	n := *f.shards
	switch {
	case n == 0:
		if *f.shardAware != "" {
			return nil, usageErrorf("--shard-aware-listen needs --shards")
		}
		return nil, nil
	case n < 0 || n > sharding.MaxShards:
		return nil, usageErrorf("--shards must be from 1 to %d, got %d", sharding.MaxShards, n)
	case !*f.scylla:
		return nil, usageErrorf("--shards needs --scylla-supported: only a ScyllaDB node has shards")
	}
	addr := *f.shardAware
	if addr == "" {
		ap, err := netip.ParseAddrPort(*f.listen)
		if err != nil {
			return nil, usageErrorf("--shards: --listen %q must be IP:PORT, or give --shard-aware-listen", *f.listen)
		}
		port := uint16(19042)
		if tlsOn {
			port = 19142
		}
		if ap.Port() == 0 {
			port = 0
		}
		addr = netip.AddrPortFrom(ap.Addr(), port).String()
	}
	return listenNodes(addr, nodes, *f.sameIP)
}

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node", stderr)
	f := addNodeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tokenFromEnv(f.token)
	nodeGC()
	nodeGCMemoryLimit(f.memory.n)
	tlsCfg, err := f.serverTLS.config()
	if err != nil {
		return err
	}
	version, err := f.maxVersion.check()
	if err != nil {
		return err
	}
	if *f.scylla {
		// ScyllaDB does not speak v5: an emulated one negotiates clients down to v4.
		given := false
		fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "max-protocol-version" })
		switch {
		case !given:
			version = int(cql.V4)
		case version > int(cql.V4):
			return usageErrorf("--max-protocol-version %d with --scylla-supported: ScyllaDB does not speak v5; give 3 or 4", version)
		}
	}
	if *f.auth != "" && !strings.Contains(*f.auth, ":") {
		return usageErrorf("--auth must be USER:PASS, got %q", *f.auth)
	}
	layout, err := nodeLayout(fs, *f.nodes, *f.numTokens, *f.dcs)
	if err != nil {
		return err
	}
	reg, err := f.logs.registry(stderr)
	if err != nil {
		return err
	}
	defer reg.Close()

	lns, err := listenNodes(*f.listen, layout.nodes, *f.sameIP)
	if err != nil {
		return err
	}
	awareLns, err := f.listenShardAware(layout.nodes, tlsCfg != nil)
	if err != nil {
		closeAll(lns)
		return err
	}
	lns = append(lns, awareLns...)
	var alns []net.Listener
	if *f.api != "" {
		if alns, err = listenNodes(*f.api, layout.nodes, *f.sameIP); err != nil {
			closeAll(lns)
			return err
		}
	}
	cluster, err := node.NewCluster(node.ClusterConfig{
		NumTokens: *f.numTokens, DCs: layout.dcs, Auth: *f.auth, TLS: tlsCfg, Logger: reg.Logger(logs.Node),
		MaxFrameSize: f.maxFrame.n, ScyllaSupported: *f.scylla, MaxProtocolVersion: byte(version),
		NoMaterializedViews: !*f.views, Shards: *f.shards, ShardAware: awareLns, MemoryLimit: f.memory.n,
	}, lns[:layout.nodes])
	if err != nil {
		closeAll(lns)
		closeAll(alns)
		return usageErrorf("%v", err)
	}
	return serveNodes(ctx, cluster, lns[:layout.nodes], alns, f, reg, stdout)
}

// serveNodes serves the cluster and each node's API in one lifecycle group: every server
// ends when the first one does, and the node returns once all have, so that none logs after
// the log files are closed. A shutdown (ctx done) returns nil.
func serveNodes(ctx context.Context, cluster *node.Cluster, lns, alns []net.Listener, f nodeFlags, reg *logs.Registry, stdout io.Writer) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g lifecycle.Group
	g.Add(func() error { return cluster.Serve(ctx) }, func(error) { cancel() })
	apiCfg := admin.Config{Token: *f.token, Insecure: *f.insecure}
	if *f.control {
		apiCfg.NodeControl, apiCfg.NodeStateErr = cluster, func(err error) bool { return errors.Is(err, node.ErrNodeState) }
	}
	fmt.Fprintf(stdout, "tracecar node: %s\n", f.memory.describe())
	for i := range lns {
		who := "tracecar node"
		if len(lns) > 1 {
			who = fmt.Sprintf("tracecar node %d", i+1)
		}
		fmt.Fprintf(stdout, "%s: CQL on %s\n", who, lns[i].Addr())
		if a := cluster.ShardAwareAddr(i); a != "" {
			fmt.Fprintf(stdout, "%s: shard-aware port on %s (%d shards)\n", who, a, *f.shards)
		}
		if alns != nil {
			fmt.Fprintf(stdout, "%s: API on http://%s\n", who, alns[i].Addr())
			srv, aln := cluster.Node(i), alns[i]
			api := newNodeAPI(srv, reg, apiCfg)
			g.Add(func() error { return api.Serve(ctx, aln) }, func(error) { cancel() })
		}
	}
	err := g.Run()
	if parent.Err() != nil {
		return nil
	}
	return err
}

// nodeLayoutFlags are --nodes and --dcs, checked against each other.
type nodeLayoutFlags struct {
	nodes int
	dcs   []node.DC
}

func nodeLayout(fs *flag.FlagSet, nodes, numTokens int, dcs string) (nodeLayoutFlags, error) {
	out := nodeLayoutFlags{nodes: nodes}
	if nodes < 1 || nodes > 254 {
		return out, usageErrorf("--nodes must be from 1 to 254, got %d", nodes)
	}
	if numTokens < 1 || numTokens > 1536 {
		return out, usageErrorf("--num-tokens must be from 1 to 1536, got %d", numTokens)
	}
	if dcs == "" {
		return out, nil
	}
	var err error
	if out.dcs, err = node.ParseDCs(dcs); err != nil {
		return out, usageErrorf("--dcs: %v", err)
	}
	total := 0
	for _, dc := range out.dcs {
		total += dc.Nodes
	}
	nodesSet := false
	fs.Visit(func(f *flag.Flag) { nodesSet = nodesSet || f.Name == "nodes" })
	switch {
	case !nodesSet:
		out.nodes = total
	case total != nodes:
		return out, usageErrorf("--dcs %s lays out %d nodes, but --nodes is %d", dcs, total, nodes)
	}
	return out, nil
}

// listenNodes listens for n nodes from addr: on consecutive IPs and one port (node i on
// the IP of addr + i-1), or with sameIP on one IP and consecutive ports. Port 0 picks a
// free port: with consecutive IPs, one that is free on all of them.
func listenNodes(addr string, n int, sameIP bool) ([]net.Listener, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		if n == 1 {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, fmt.Errorf("listen %s: %w", addr, err)
			}
			return []net.Listener{ln}, nil
		}
		return nil, usageErrorf("with --nodes, %q must be IP:PORT", addr)
	}
	at := func(i int, port uint16) (netip.AddrPort, error) {
		if sameIP {
			if port != 0 {
				port += uint16(i)
			}
			return netip.AddrPortFrom(ap.Addr(), port), nil
		}
		ip := ap.Addr()
		for range i {
			ip = ip.Next()
		}
		if !ip.IsValid() || ip.Is4() != ap.Addr().Is4() {
			return netip.AddrPort{}, usageErrorf("%s has no room for %d consecutive IPs", ap.Addr(), n)
		}
		return netip.AddrPortFrom(ip, port), nil
	}
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		var lns []net.Listener
		port := ap.Port()
		for i := 0; i < n; i++ {
			a, err := at(i, port)
			if err != nil {
				closeAll(lns)
				return nil, err
			}
			ln, err := net.Listen("tcp", a.String())
			if err != nil {
				last = fmt.Errorf("listen %s: %w", a, err)
				closeAll(lns)
				lns = nil
				break
			}
			if i == 0 && !sameIP {
				port = uint16(ln.Addr().(*net.TCPAddr).Port)
			}
			lns = append(lns, ln)
		}
		if lns != nil {
			return lns, nil
		}
		if ap.Port() != 0 || sameIP {
			break // a fixed port that is taken stays taken
		}
	}
	return nil, last
}

// nodeGCPercent is the embedded node's GOGC unless the environment sets one. The node keeps
// every row in memory, and with Go's default of 100 a write workload made it spend about a
// tenth of its CPU collecting a heap that only grows; at 400 it collects a quarter as often
// (about 1.5 µs less per write on the 2-core VM, for up to twice the RSS), so that the
// fixture leaves the CPU to the sidecar and the clients it is there to measure.
const nodeGCPercent = 400

// nodeGC sets the node's GC percent, unless GOGC is set.
func nodeGC() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(nodeGCPercent)
	}
}
