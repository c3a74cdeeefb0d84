package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/nodeapi"
	"github.com/tracecar/tracecar/internal/schedpolicy"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/guardrail"
	"github.com/tracecar/tracecar/tracing/statements"
)

// newNodeAPI returns the node's REST API: its loggers and its own trace probability, with
// the same handlers, token and loopback rule as the sidecar's admin API. An empty token
// leaves it open, which only a loopback address or insecure allows.
func newNodeAPI(srv *node.Server, reg *logs.Registry, token string, insecure bool, opts ...admin.Option) *admin.Server {
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
	opts = append(opts, admin.WithCollector(accepted))
	return admin.New(admin.Config{Token: token, Insecure: insecure, Logger: reg.Logger(logs.Admin)}, tr, reg, opts...)
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
	OTLPEndpoint        string // "" with OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT set: the SDK reads the environment
	OTLPProtocol        string // "" means OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, else http/protobuf
	BindValues          bool
	RingSize            int
	CQLSink             bool
	QueryLiterals       bool // keep literal values in recorded query text
	MaxQueryLen         int  // bound on recorded query text, bytes
	// TraceContextKeys are the custom payload keys of a request's W3C traceparent; nil
	// means "traceparent". FollowClientSampling starts with parent-based sampling on.
	TraceContextKeys     []string
	FollowClientSampling bool
	// TLS is the client-facing CQL listener's TLS; nil means plaintext.
	TLS *tls.Config
	// NodeUsername and NodePassword log in to a node with PasswordAuthenticator, for what
	// the sidecar itself sends it (node events, the CQL sink). The password is never logged.
	NodeUsername, NodePassword string
	// NodeTLS is the TLS of everything that dials the node: the proxy's connections, the
	// CQL sink and the node-event fetch. Nil means plaintext.
	NodeTLS            *tls.Config
	MaxFrameSize       int // bytes, header included; zero means the default
	MaxProtocolVersion int // the highest version the proxy lets through; zero means 5
	MaxConnections     int // zero means no limit
	MaxRequestInFlight int // bytes of client frames held whole; zero means the default

	// The runtime guardrail and the node's management API (see guardrail.go).
	Guardrail guardrail.Budget
	NodeKind  string // of NodeAPI; the embedded node's API is "tracecar"
	NodeApply admin.NodeApply

	// Peers maps peer nodes to their sidecars (--cluster-file, --peers); nil: the convention.
	Peers *sidecar.PeerMap

	Statements statementsConfig // per-statement statistics (see statements.go)

	// CaptureDir is where workload captures are written; "" refuses them (see capture.go).
	CaptureDir string
	// The handover (takeover.go): what a predecessor handed over (nil: started afresh),
	// and the control socket, for the status.
	inherit       *inheritance
	controlSocket string
	// controlDefault says controlSocket is the default path, not one given with
	// --control-socket: a sidecar that cannot serve it (a FROM scratch image has no
	// temporary folder) runs on without one, and says so.
	controlDefault bool
	// schedPolicy is the scheduling policy the process's threads run under, as
	// --sched-policy names it, for the status; "" when none was set (applySchedPolicy).
	schedPolicy string
}

// stack is a running sidecar, its admin API and, when embedded, its node.
type stack struct {
	Sidecar, Admin, Node, NodeAPI string // addresses
	tracer                        *tracing.Tracer
	guard                         *guardrail.Controller
	proxy                         *sidecar.Proxy
	closers                       []func(context.Context) error
	api, nodeAPI                  *admin.Server // nodeAPI: the embedded node's, else nil

	// front is the proxy and the admin API; back is the embedded node and its API, which
	// stop last, so that the proxy drains against a live node and the sinks flush into it.
	front, back serverGroup
	exited      chan struct{} // closed when any server returns
	exitOnce    sync.Once

	// For a handover (takeover.go): the listeners it pauses and hands over, the runtime
	// state it hands over, and what /tracecar/status and /metrics say of it.
	cqlLn, adminLn *sidecar.Listener
	reg            *logs.Registry
	stmts          *statements.Stats
	embedded       bool // the node runs in this process: no handover
	ho             *handoverState
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
		front:    serverGroup{cancel: cancel, errc: make(chan error, 4)},
		back:     serverGroup{cancel: backCancel, errc: make(chan error, 4)},
		exited:   make(chan struct{}),
		reg:      reg,
		embedded: cfg.Node == "",
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
		srv := node.New(node.Config{Logger: reg.Logger(logs.Node), MaxFrameSize: cfg.MaxFrameSize, MaxProtocolVersion: byte(cfg.MaxProtocolVersion)})
		st.Node, st.NodeAPI = nln.Addr().String(), "http://"+aln.Addr().String()
		nodeKind = nodeapi.KindTracecar
		st.goServe(&st.back, func() error { return srv.Serve(backCtx, nln) })
		st.nodeAPI = newNodeAPI(srv, reg, cfg.AdminToken, false) // the sidecar's token: one for every admin surface
		st.goServe(&st.back, func() error { return st.nodeAPI.Serve(backCtx, aln) })
		fmt.Fprintf(out, "tracecar: started an embedded node on %s (API %s)\n", st.Node, st.NodeAPI)
	}

	// The OTel SDK reports export failures (a dead collector) through a global handler that
	// prints to stderr; send them to the tracing logger instead, once per process.
	tlog := reg.Logger(logs.Tracing)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		tlog.Warn().Err(err).Msg("OpenTelemetry export")
	}))
	opts := tracing.Options{
		RingSize:      cfg.RingSize,
		BindValues:    cfg.BindValues,
		QueryLiterals: cfg.QueryLiterals,
		MaxQueryLen:   cfg.MaxQueryLen,
		Logger:        *reg.Logger(logs.Tracing),
		SlowLog:       reg.Logger(logs.SlowLog),

		TraceContextKeys: cfg.TraceContextKeys,
	}
	m := metrics.New()
	m.SetConnectionLimit(cfg.MaxConnections)
	opts.Exemplar = m.Exemplar
	if cfg.QueryLiterals {
		tlog.Warn().Msg("--trace-query-literals: recorded query text keeps its literal values, which may hold personal data or secrets (role and user passwords are still redacted)")
	}
	sinks, closeSinks, err := buildSinks(ctx, cfg, st.Node, func() int64 { return st.tracer.Config().TTLSeconds }, *tlog)
	if err != nil {
		return fail(err)
	}
	opts.Sinks = sinks.sinks
	opts.NodeEvents = sinks.nodeEvents
	st.closers = append(st.closers, closeSinks)
	added := new(guardrail.AddedLatency)
	opts.AddedLatency = added.Observe
	work := new(guardrail.Meter)
	opts.Work = work
	st.tracer = tracing.New(opts)
	capt, err := newCapture(cfg, st.Node, st.tracer.Statements(), sinks.schema, reg)
	if err != nil {
		return fail(err)
	}
	if cfg.FollowClientSampling {
		if err := st.tracer.UpdateConfig(func(c tracing.Config) tracing.Config {
			c.FollowClientSampling = true
			return c
		}); err != nil {
			return fail(err)
		}
	}
	st.guard = guardrail.NewController(guardrail.Config{Tracer: st.tracer, Source: guardrailSource(st.tracer, added, work),
		Budget: cfg.Guardrail, Logger: reg.Logger(logs.Tracing)})
	adminOpts := []admin.Option{admin.WithGuardrailControl(st.guard), admin.WithCollector(st.guard.Collector()),
		admin.WithCollector(st.guard.StateCollector()), admin.WithTraceContextKeys(st.tracer.TraceContextKeys())}
	if st.NodeAPI != "" {
		nodeCfg := nodeapi.Config{Kind: nodeKind, URL: st.NodeAPI}
		if nodeKind == nodeapi.KindTracecar {
			nodeCfg.Token = cfg.AdminToken // one token for every tracecar admin surface
		}
		nc, err := nodeapi.New(nodeCfg)
		if err != nil {
			return fail(err)
		}
		adminOpts = append(adminOpts, admin.WithNode(nc, cfg.NodeApply))
	}
	st.closers = append([]func(context.Context) error{st.tracer.Close}, st.closers...)
	stmts, stmtOpts := newStatements(cfg.Statements)
	st.stmts = stmts
	adminOpts = append(adminOpts, append(stmtOpts, admin.WithTraceFilter(st.tracer), admin.WithCapture(capt))...)
	// The capture ends first, once the proxy has drained: its file is complete before
	// the node session that reads the schema closes.
	st.closers = append([]func(context.Context) error{capt.Close}, st.closers...)
	st.ho = newHandoverState(st, cfg)
	adminOpts = append(adminOpts, st.ho.adminOptions()...)
	st.proxy = sidecar.New(sidecar.Config{
		NodeAddr:               st.Node,
		AdvertiseAddr:          cfg.AdvertiseAddr,
		PeerPort:               cfg.PeerPort,
		Peers:                  cfg.Peers,
		DrainTimeout:           cfg.DrainTimeout,
		TLS:                    cfg.TLS,
		NodeTLS:                cfg.NodeTLS,
		MaxFrameSize:           cfg.MaxFrameSize,
		MaxProtocolVersion:     cfg.MaxProtocolVersion,
		MaxConnections:         cfg.MaxConnections,
		MaxRequestDataInFlight: cfg.MaxRequestInFlight,
		Logger:                 reg.Logger(logs.Sidecar),
		LogGate:                reg.Gate(logs.Sidecar),
		Metrics:                m,
		Statements:             stmts,
		Capture:                capt,
		NoEventLoop:            os.Getenv("TRACECAR_EVENT_LOOP") == "off", // README: Performance
	}, st.tracer)

	pln, err := cfg.inherit.listener("cql", cfg.Listen)
	if err != nil {
		return fail(err)
	}
	st.Sidecar = pln.Addr().String()
	st.api = admin.New(admin.Config{
		Addr: cfg.Admin, Token: cfg.AdminToken, TLSCert: cfg.AdminTLSCert, TLSKey: cfg.AdminTLSKey, Insecure: cfg.AdminInsecure,
		Logger: reg.Logger(logs.Admin),
	}, st.guard.User(st.tracer), reg, append(adminOpts, admin.WithMetrics(m), admin.WithQueries(queriesOf(st.proxy)), admin.WithReady(func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", st.Node)
		if err != nil {
			return err
		}
		return c.Close()
	}))...)
	aln, err := cfg.inherit.listener("admin", cfg.Admin)
	if err != nil {
		pln.Close()
		return fail(err)
	}
	scheme := "http://"
	if cfg.AdminTLSCert != "" {
		scheme = "https://"
	}
	st.Admin = scheme + aln.Addr().String()
	if err := st.restore(cfg.inherit); err != nil {
		pln.Close()
		aln.Close()
		return fail(err)
	}
	st.cqlLn, st.adminLn = sidecar.NewListener(pln), sidecar.NewListener(aln)
	st.goServe(&st.front, func() error { return st.proxy.Serve(ctx, st.cqlLn) })
	st.goServe(&st.front, func() error { return st.api.Serve(ctx, st.adminLn) })
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

// traceContextKeys parses --trace-context-key: custom payload keys, comma-separated, each
// a non-empty [string] of the protocol (at most 65535 bytes) given once.
func traceContextKeys(v string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(v, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			return nil, usageErrorf("--trace-context-key %q: want custom payload keys, comma-separated, such as traceparent,x-traceparent", v)
		case len(k) > 65535:
			return nil, usageErrorf("--trace-context-key: a key of %d bytes; a CQL [string] holds at most 65535", len(k))
		case slices.Contains(keys, k):
			return nil, usageErrorf("--trace-context-key: %q given twice", k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// tokenFromEnv sets an empty token from TRACECAR_ADMIN_TOKEN. The flag's default stays
// empty, so that a usage message never prints the token.
func tokenFromEnv(tok *string) {
	if *tok == "" {
		*tok = os.Getenv("TRACECAR_ADMIN_TOKEN")
	}
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
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 10*time.Second, "how long shutdown, or a handover to a new process (--takeover), waits for in-flight requests")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer token required by the admin API, and by the embedded node's API (default $TRACECAR_ADMIN_TOKEN)")
	fs.StringVar(&cfg.AdminTLSCert, "admin-tls-cert", "", "PEM certificate: serve the admin API over HTTPS")
	fs.StringVar(&cfg.AdminTLSKey, "admin-tls-key", "", "PEM key for --admin-tls-cert")
	fs.BoolVar(&cfg.AdminInsecure, "admin-insecure", false, "allow the admin API on a non-loopback address without a token")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", "OTLP base URL for trace spans, such as http://127.0.0.1:4318 (/v1/traces is appended for http/protobuf), or \"stdout\"; default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT")
	fs.StringVar(&cfg.OTLPProtocol, "otlp-protocol", "", "OTLP protocol: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)")
	fs.StringVar(&cfg.NodeUsername, "node-username", "", "user name for the sidecar's own CQL connections to the node (node events, --cql-sink)")
	fs.StringVar(&cfg.NodePassword, "node-password", "", "password for --node-username (prefer env TRACECAR_NODE_PASSWORD: flags show in ps)")
	fs.BoolVar(&cfg.BindValues, "trace-bind-values", false, "include bound values in trace records (they may hold PII)")
	fs.BoolVar(&cfg.QueryLiterals, "trace-query-literals", false, "keep literal values in recorded query text (they may hold PII); passwords are always redacted")
	fs.IntVar(&cfg.MaxQueryLen, "trace-max-query-len", tracing.DefaultMaxQueryLen, "bytes of query text kept in a trace record; longer text is cut and marked")
	fs.IntVar(&cfg.RingSize, "ring-size", tracing.DefaultRingSize, "sessions kept in memory for /tracecar/slow_log")
	fs.BoolVar(&cfg.CQLSink, "cql-sink", false, "also write slow-query records into the node's tracecar_traces keyspace, with TTL")
	fs.BoolVar(&cfg.FollowClientSampling, "follow-client-sampling", false, "parent-based sampling: trace fully, with the node's own trace, every request whose W3C trace context (custom payload) has the sampled flag (also POST /tracecar/trace_context)")
	ctxKeys := fs.String("trace-context-key", tracing.TraceparentKey, "custom payload `keys` a request's W3C traceparent is read from, comma-separated, tried in order")
	serverTLS := addServerTLSFlags(fs)
	nodeTLS := addNodeTLSFlags(fs)
	clusterFile := fs.String("cluster-file", "", "file mapping peer node addresses to their sidecars', one NODE=SIDECAR a line, when sidecars are not on their nodes' IPs at --peer-port")
	peers := fs.String("peers", "", "the same mapping as --cluster-file, as NODE=SIDECAR,…")
	maxFrame := maxFrameSizeFlag(fs)
	maxVersion := maxProtocolVersionFlag(fs, "the sidecar lets through")
	inFlight := &byteSize{n: sidecar.DefaultMaxRequestDataInFlight, min: 64 << 10, max: 1 << 40}
	fs.Var(inFlight, "max-request-data-in-flight", "bytes of large client frames all connections may hold at once, as a `size`; a frame that does not fit waits, its connection unread (at least --max-frame-size)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", defaultMaxConnections, "client connections held at once; more are closed on accept, with a warning in the log (0: no limit)")
	schedFlag := fs.String("sched-policy", schedpolicy.Batch.String(), "Linux scheduling `policy` of the sidecar's threads: batch (SCHED_BATCH: a packet that wakes the sidecar never preempts the node or the application, which finish their burst of writes first; fewer wake-ups per request) or normal (SCHED_OTHER, the system's default)")
	lf := addLogFlags(fs)
	gf := addGuardFlags(fs)
	addStatementFlags(fs, &cfg.Statements)
	addCaptureFlags(fs, &cfg)
	hf := addHandoverFlags(fs)
	cf, perr := parseSidecarFlags(fs, args)
	if perr != nil {
		return perr
	}
	if err := cfg.Statements.check(); err != nil {
		return err
	}
	tokenFromEnv(&cfg.AdminToken)
	var err error
	if cfg.TLS, err = serverTLS.config(); err != nil {
		return err
	}
	if cfg.NodeTLS, err = nodeTLS.config(cfg.Node); err != nil {
		return err
	}
	if cfg.NodeTLS != nil && cfg.Node == "" {
		return usageErrorf("--node-tls and --node-tls-* need --node: the embedded node speaks plaintext")
	}
	cfg.MaxFrameSize = maxFrame.n
	cfg.MaxRequestInFlight = inFlight.n
	if cfg.MaxProtocolVersion, err = maxVersion.check(); err != nil {
		return err
	}
	if cfg.MaxConnections < 0 {
		return usageErrorf("--max-connections must be 0 (no limit) or more, got %d", cfg.MaxConnections)
	}
	policy, err := schedpolicy.Parse(*schedFlag)
	if err != nil {
		return usageErrorf("--sched-policy: %v", err)
	}
	if err = gf.fill(&cfg); err != nil {
		return err
	}
	if cfg.Peers, err = peerMap(*clusterFile, *peers); err != nil {
		return err
	}
	if (cfg.AdminTLSCert == "") != (cfg.AdminTLSKey == "") {
		return usageErrorf("--admin-tls-cert and --admin-tls-key go together")
	}
	if cfg.MaxQueryLen <= 0 {
		return usageErrorf("--trace-max-query-len must be a positive number of bytes, got %d", cfg.MaxQueryLen)
	}
	if cfg.RingSize <= 0 {
		return usageErrorf("--ring-size must be positive, got %d", cfg.RingSize)
	}
	if cfg.TraceContextKeys, err = traceContextKeys(*ctxKeys); err != nil {
		return err
	}
	if cfg.OTLPEndpoint != "" && cfg.OTLPEndpoint != "stdout" {
		if _, err := tracing.TracesURL(cfg.OTLPEndpoint); err != nil || !strings.Contains(cfg.OTLPEndpoint, "://") {
			return usageErrorf("--otlp-endpoint must be a URL such as http://127.0.0.1:4318 or \"stdout\", got %q", cfg.OTLPEndpoint)
		}
	}
	if _, err := tracing.ResolveProtocol(cfg.OTLPProtocol); err != nil {
		return usageErrorf("--otlp-protocol (or OTEL_EXPORTER_OTLP_PROTOCOL): %v", err)
	}
	if cfg.NodePassword == "" {
		cfg.NodePassword = os.Getenv("TRACECAR_NODE_PASSWORD")
	}
	if cfg.NodePassword != "" && cfg.NodeUsername == "" {
		return usageErrorf("--node-password (or TRACECAR_NODE_PASSWORD) needs --node-username")
	}
	if err := hf.check(&cfg); err != nil {
		return err
	}
	reg, err := lf.registry(stderr)
	if err != nil {
		return err
	}
	defer reg.Close()
	cfg.schedPolicy = applySchedPolicy(policy, reg.Logger(logs.Sidecar))
	live := &liveSettings{logs: lf, stderr: stderr, tls: serverTLS, fs: fs, config: cf}
	if cfg.TLS, err = live.reloadableTLS(cfg.TLS); err != nil {
		return err
	}
	return serveSidecar(ctx, cfg, hf, live, reg, stdout)
}

// applySchedPolicy puts every thread of the process, and so every thread started later,
// under the scheduling policy p (see package schedpolicy), before the sidecar starts its
// event loops. A policy that cannot be set is a warning, not a failure: the sidecar works
// the same under either, at a different cost per request. It returns the policy's name
// once it is set, "" otherwise.
func applySchedPolicy(p schedpolicy.Policy, log *zerolog.Logger) string {
	n, err := schedpolicy.Apply(p)
	switch {
	case errors.Is(err, schedpolicy.ErrUnsupported):
		log.Debug().Str("sched_policy", p.String()).Msg("scheduling policy: not on Linux, left as it is")
		return ""
	case err != nil:
		log.Warn().Err(err).Str("sched_policy", p.String()).Msg("scheduling policy not set; threads keep the system's (--sched-policy)")
		return ""
	}
	log.Info().Str("sched_policy", p.String()).Int("threads", n).Msg("threads run under " + p.KernelName())
	return p.String()
}

// runStack runs a started stack until ctx is done, a server stops, or the process handed
// itself over (handedOver is closed), serving SIGHUP on hup meanwhile.
func runStack(ctx context.Context, st *stack, handedOver <-chan struct{}, hup <-chan os.Signal, live *liveSettings, stdout io.Writer) error {
	for {
		select {
		case <-hup:
			live.reload(st.reg)
		case <-handedOver:
			fmt.Fprintln(stdout, "tracecar sidecar: handed over to the successor; exiting")
			return st.stop()
		case <-ctx.Done():
			fmt.Fprintln(stdout, "tracecar sidecar: shutting down, draining in-flight requests")
			return st.stop()
		case <-st.exited:
			if err := st.stop(); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil // a shutdown that began before this select ran: the servers saw it first
			}
			return errors.New("a server stopped unexpectedly")
		}
	}
}
