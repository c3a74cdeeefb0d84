package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/guardrail"
	"github.com/tracecar/tracecar/logs"
	"github.com/tracecar/tracecar/metrics"
	"github.com/tracecar/tracecar/node"
	"github.com/tracecar/tracecar/nodeapi"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// serveNodeAPI serves the node's REST API: its loggers and its own trace probability, with
// the same handlers as the sidecar's admin API.
func serveNodeAPI(ctx context.Context, ln net.Listener, srv *node.Server, reg *logs.Registry) error {
	tr := admin.ConfigOnly(
		func() tracing.Config {
			c := tracing.DefaultConfig()
			c.Probability = srv.TraceProbability()
			return c
		},
		func(c tracing.Config) error { return srv.SetTraceProbability(c.Probability) },
	)
	api := admin.New(admin.Config{Logger: reg.Logger(logs.Admin)}, tr, reg)
	return api.Serve(ctx, ln)
}

// stackConfig describes a sidecar, with its admin API, in front of a node.
type stackConfig struct {
	Listen, Admin, Node string // Node empty: start an embedded node
	NodeAPI             string
	AdvertiseAddr       string
	PeerPort            int
	DrainTimeout        time.Duration
	AdminToken          string
	AdminTLSCert        string
	AdminTLSKey         string
	AdminInsecure       bool
	OTLPEndpoint        string
	BindValues          bool
	RingSize            int
	CQLSink             bool

	// The runtime guardrail and the node's management API (see guardrail.go).
	Guardrail guardrail.Budget
	NodeKind  string // of NodeAPI; the embedded node's API is "tracecar"
	NodeApply admin.NodeApply
}

// stack is a running sidecar, its admin API and, when embedded, its node.
type stack struct {
	Sidecar, Admin, Node, NodeAPI string // addresses
	tracer                        *tracing.Tracer
	guard                         *guardrail.Controller
	proxy                         *sidecar.Proxy
	closers                       []func(context.Context) error

	// front is the proxy and the admin API; back is the embedded node and its API, which
	// stop last, so that the proxy drains against a live node and the sinks flush into it.
	front, back serverGroup
	exited      chan struct{} // closed when any server returns
	exitOnce    sync.Once
}

// serverGroup is a set of running servers sharing a cancel.
type serverGroup struct {
	cancel context.CancelFunc
	errc   chan error
	n      int
}

// wait returns the first error of the group's servers, once all have returned.
func (g *serverGroup) wait() error {
	var first error
	for ; g.n > 0; g.n-- {
		if err := <-g.errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// startStack starts everything cfg describes on ctx and returns once every listener is
// bound. Stop it with stop.
func startStack(ctx context.Context, cfg stackConfig, reg *logs.Registry, out io.Writer) (*stack, error) {
	backCtx, backCancel := context.WithCancel(context.WithoutCancel(ctx))
	ctx, cancel := context.WithCancel(ctx)
	st := &stack{
		front:  serverGroup{cancel: cancel, errc: make(chan error, 4)},
		back:   serverGroup{cancel: backCancel, errc: make(chan error, 4)},
		exited: make(chan struct{}),
	}
	fail := func(err error) (*stack, error) {
		st.stop()
		return nil, err
	}
	st.Node = cfg.Node
	st.NodeAPI = cfg.NodeAPI
	nodeKind := cfg.NodeKind
	if cfg.Node == "" {
		nln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fail(fmt.Errorf("listen for the embedded node: %w", err))
		}
		aln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			nln.Close()
			return fail(fmt.Errorf("listen for the embedded node's API: %w", err))
		}
		srv := node.New(node.Config{Logger: reg.Logger(logs.Node)})
		st.Node, st.NodeAPI = nln.Addr().String(), "http://"+aln.Addr().String()
		nodeKind = nodeapi.KindTracecar
		st.goServe(&st.back, func() error { return srv.Serve(backCtx, nln) })
		st.goServe(&st.back, func() error { return serveNodeAPI(backCtx, aln, srv, reg) })
		fmt.Fprintf(out, "tracecar: started an embedded node on %s (API %s)\n", st.Node, st.NodeAPI)
	}

	// The OTel SDK reports export failures (a dead collector) through a global handler that
	// prints to stderr; send them to the tracing logger instead, once per process.
	tlog := reg.Logger(logs.Tracing)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		tlog.Warn().Err(err).Msg("OpenTelemetry export")
	}))
	opts := tracing.Options{
		RingSize:   cfg.RingSize,
		BindValues: cfg.BindValues,
		Logger:     *reg.Logger(logs.Tracing),
		SlowLog:    reg.Logger(logs.SlowLog),
	}
	sinks, closeSinks, err := buildSinks(ctx, cfg, st.Node, func() int64 { return st.tracer.Config().TTLSeconds })
	if err != nil {
		return fail(err)
	}
	opts.Sinks = sinks.sinks
	opts.NodeEvents = sinks.nodeEvents
	st.closers = append(st.closers, closeSinks)
	added := new(guardrail.AddedLatency)
	opts.AddedLatency = added.Observe
	st.tracer = tracing.New(opts)
	st.guard = guardrail.NewController(guardrail.Config{Tracer: st.tracer, Source: guardrailSource(st.tracer, added),
		Budget: cfg.Guardrail, Logger: reg.Logger(logs.Tracing)})
	adminOpts := []admin.Option{admin.WithGuardrailControl(st.guard), admin.WithCollector(st.guard.Collector())}
	if st.NodeAPI != "" {
		nc, err := nodeapi.New(nodeapi.Config{Kind: nodeKind, URL: st.NodeAPI})
		if err != nil {
			return fail(err)
		}
		adminOpts = append(adminOpts, admin.WithNode(nc, cfg.NodeApply))
	}
	st.closers = append([]func(context.Context) error{st.tracer.Close}, st.closers...)
	m := metrics.New()
	st.proxy = sidecar.New(sidecar.Config{
		NodeAddr:      st.Node,
		AdvertiseAddr: cfg.AdvertiseAddr,
		PeerPort:      cfg.PeerPort,
		DrainTimeout:  cfg.DrainTimeout,
		NoEventLoop:   os.Getenv("TRACECAR_EVENT_LOOP") == "off", // README: Performance
		Logger:        reg.Logger(logs.Sidecar),
		Metrics:       m,
	}, st.tracer)

	pln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fail(fmt.Errorf("listen %s: %w", cfg.Listen, err))
	}
	st.Sidecar = pln.Addr().String()
	api := admin.New(admin.Config{
		Addr: cfg.Admin, Token: cfg.AdminToken, TLSCert: cfg.AdminTLSCert, TLSKey: cfg.AdminTLSKey, Insecure: cfg.AdminInsecure,
		Logger: reg.Logger(logs.Admin),
	}, st.guard.User(st.tracer), reg, append(adminOpts, admin.WithMetrics(m), admin.WithReady(func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", st.Node)
		if err != nil {
			return err
		}
		return c.Close()
	}))...)
	aln, err := net.Listen("tcp", cfg.Admin)
	if err != nil {
		pln.Close()
		return fail(fmt.Errorf("listen %s: %w", cfg.Admin, err))
	}
	scheme := "http://"
	if cfg.AdminTLSCert != "" {
		scheme = "https://"
	}
	st.Admin = scheme + aln.Addr().String()
	st.goServe(&st.front, func() error { return st.proxy.Serve(ctx, pln) })
	st.goServe(&st.front, func() error { return api.Serve(ctx, aln) })
	st.goServe(&st.front, func() error { st.guard.Run(ctx); return nil })
	return st, nil
}

func (st *stack) goServe(g *serverGroup, f func() error) {
	g.n++
	go func() {
		err := f()
		st.exitOnce.Do(func() { close(st.exited) })
		g.errc <- err
	}()
}

// stop shuts down in order: the proxy (which drains) and the admin API, then the tracer
// and its sinks (flushed), then the embedded node. It returns the first error met.
func (st *stack) stop() error {
	st.front.cancel()
	err := st.front.wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range st.closers {
		if cerr := c(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}
	st.back.cancel()
	if berr := st.back.wait(); berr != nil && err == nil {
		err = berr
	}
	return err
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func runSidecar(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sidecar", stderr)
	var cfg stackConfig
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:9043", "CQL address clients connect to")
	fs.StringVar(&cfg.Node, "node", "", "the node's CQL address; empty starts an embedded node")
	fs.StringVar(&cfg.Admin, "admin", "127.0.0.1:10000", "admin REST API address")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-address", "", "address written into system.local/peers rpc_address (default: the local address of each client connection)")
	fs.IntVar(&cfg.PeerPort, "peer-port", 0, "port of the sidecars beside peer nodes (default: the advertised port)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
	fs.StringVar(&cfg.AdminToken, "admin-token", envOr("TRACECAR_ADMIN_TOKEN", ""), "bearer token required by the admin API (env TRACECAR_ADMIN_TOKEN)")
	fs.StringVar(&cfg.AdminTLSCert, "admin-tls-cert", "", "PEM certificate: serve the admin API over HTTPS")
	fs.StringVar(&cfg.AdminTLSKey, "admin-tls-key", "", "PEM key for --admin-tls-cert")
	fs.BoolVar(&cfg.AdminInsecure, "admin-insecure", false, "allow the admin API on a non-loopback address without a token")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", envOr("OTEL_EXPORTER_OTLP_ENDPOINT", ""), "OTLP/HTTP endpoint URL for trace spans, or \"stdout\"")
	fs.BoolVar(&cfg.BindValues, "trace-bind-values", false, "include bound values in trace records (they may hold PII)")
	fs.IntVar(&cfg.RingSize, "ring-size", tracing.DefaultRingSize, "sessions kept in memory for /tracecar/slow_log")
	fs.BoolVar(&cfg.CQLSink, "cql-sink", false, "also write slow-query records into the node's tracecar_traces keyspace, with TTL")
	lf := addLogFlags(fs)
	gf := addGuardFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := gf.fill(&cfg); err != nil {
		return err
	}
	if (cfg.AdminTLSCert == "") != (cfg.AdminTLSKey == "") {
		return usageErrorf("--admin-tls-cert and --admin-tls-key go together")
	}
	if cfg.RingSize <= 0 {
		return usageErrorf("--ring-size must be positive, got %d", cfg.RingSize)
	}
	if cfg.OTLPEndpoint != "" && cfg.OTLPEndpoint != "stdout" && !strings.Contains(cfg.OTLPEndpoint, "://") {
		return usageErrorf("--otlp-endpoint must be a URL such as http://127.0.0.1:4318 or \"stdout\", got %q", cfg.OTLPEndpoint)
	}
	reg, err := lf.registry(stderr)
	if err != nil {
		return err
	}
	defer reg.Close()
	st, err := startStack(ctx, cfg, reg, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tracecar sidecar: CQL on %s -> node %s, admin API %s\n", st.Sidecar, st.Node, st.Admin)
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "tracecar sidecar: shutting down, draining in-flight requests")
		return st.stop()
	case <-st.exited:
		if err := st.stop(); err != nil {
			return err
		}
		return errors.New("a server stopped unexpectedly")
	}
}
