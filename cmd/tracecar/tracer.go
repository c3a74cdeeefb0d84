package main

import (
	"context"
	"net"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/internal/nodeapi"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/guardrail"
)

// startTracer builds the stack's tracer, with its sinks, the workload capture and the
// guardrail. The sinks' closer joins the stack's closers.
func (st *stack) startTracer(ctx context.Context, cfg stackConfig, m *metrics.Metrics) (*capture.Capture, error) {
	// The OTel SDK reports export failures (a dead collector) through a global handler that
	// prints to stderr; send them to the tracing logger instead, once per process.
	tlog := st.reg.Logger(logs.Tracing)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		tlog.Warn().Err(err).Msg("OpenTelemetry export")
	}))
	opts := tracing.Options{
		RingSize:      cfg.RingSize,
		BindValues:    cfg.BindValues,
		QueryLiterals: cfg.QueryLiterals,
		MaxQueryLen:   cfg.MaxQueryLen,
		NoNodeTracing: cfg.NoNodeTracing,
		Logger:        *st.reg.Logger(logs.Tracing),
		SlowLog:       st.reg.Logger(logs.SlowLog),

		TraceContextKeys: cfg.TraceContextKeys,
	}
	opts.Exemplar = m.Exemplar
	if cfg.QueryLiterals {
		tlog.Warn().Msg("--trace-query-literals: recorded query text keeps its literal values, which may hold personal data or secrets (role and user passwords are still redacted)")
	}
	sinks, closeSinks, err := buildSinks(ctx, cfg, st.Node, func() int64 { return st.tracer.Config().TTLSeconds }, *tlog)
	if err != nil {
		return nil, err
	}
	opts.Sinks = sinks.sinks
	opts.NodeEvents = sinks.nodeEvents
	st.nodeSession = sinks.node
	st.closers = append(st.closers, closeSinks)
	added := new(guardrail.AddedLatency)
	opts.AddedLatency = added.Observe
	work := new(guardrail.Meter)
	opts.Work = work
	st.stmts = newStatements(cfg.Statements)
	opts.Floor = st.stmts
	st.tracer = tracing.New(opts)
	capt, err := newCapture(cfg, st.Node, st.tracer.Statements(), sinks.schema, st.reg)
	if err != nil {
		return nil, err
	}
	if cfg.FollowClientSampling || cfg.TraceFloor > 0 {
		if err := st.tracer.UpdateConfig(func(c tracing.Config) tracing.Config {
			c.FollowClientSampling = c.FollowClientSampling || cfg.FollowClientSampling
			c.FloorInterval = cfg.TraceFloor
			return c
		}); err != nil {
			return nil, err
		}
	}
	st.guard = guardrail.NewController(guardrail.Config{Tracer: st.tracer, Source: guardrailSource(st.tracer, added, work),
		Budget: cfg.Guardrail, Logger: st.reg.Logger(logs.Tracing)})
	return capt, nil
}

// adminConfig returns what the admin API serves besides the tracer: the guardrail, the
// node's API, the statement statistics, the trace filter, the capture and the handover's
// status. The tracer and the capture join the stack's closers.
func (st *stack) adminConfig(cfg stackConfig, nodeKind string, capt *capture.Capture) (admin.Config, error) {
	ac := admin.Config{GuardrailControl: st.guard, TraceContextKeys: st.tracer.TraceContextKeys(), Audit: st.audit,
		NodeLogin: st.nodeLogin, ToggleMaxDuration: cfg.ToggleMaxDuration, TraceFilter: st.tracer, Capture: capt}
	ac.Collectors = []prometheus.Collector{st.guard.Collector(), st.guard.StateCollector(), st.audit.Collector(),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tracecar_node_login_refused_total",
			Help: "Logins of the sidecar's own session to the node (node events, --cql-sink, the audit table) that the node refused.",
		}, func() float64 { return float64(st.nodeSession.Login().Refused) })}
	if st.NodeAPI != "" {
		nodeCfg := nodeapi.Config{Kind: nodeKind, URL: st.NodeAPI}
		if nodeKind == nodeapi.KindTracecar {
			nodeCfg.Token = cfg.AdminToken // one token for every tracecar admin surface
		}
		nc, err := nodeapi.New(nodeCfg)
		if err != nil {
			return admin.Config{}, err
		}
		ac.Node, ac.NodeApply = nc, cfg.NodeApply
	}
	st.closers = append([]func(context.Context) error{st.tracer.Close}, st.closers...)
	serveStatements(&ac, st.stmts)
	// The capture ends first, once the proxy has drained: its file is complete before
	// the node session that reads the schema closes.
	st.closers = append([]func(context.Context) error{capt.Close}, st.closers...)
	st.ho = newHandoverState(st, cfg)
	st.ho.adminConfig(&ac)
	st.shardConfig(&ac)
	return ac, nil
}

// proxyConfig is the configuration of the stack's proxy.
func (st *stack) proxyConfig(cfg stackConfig, m *metrics.Metrics, capt *capture.Capture) sidecar.Config {
	return sidecar.Config{
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
		Logger:                 st.reg.Logger(logs.Sidecar),
		LogGate:                st.reg.Gate(logs.Sidecar),
		Metrics:                m,
		Statements:             st.stmts,
		Capture:                capt,
		Audit:                  st.audit,
		NoEventLoop:            os.Getenv("TRACECAR_EVENT_LOOP") == "off", // README: Performance
		ShardAwareHost:         shardAwareHost(cfg),
	}
}

// listen binds the CQL listener and the admin API's (inherited from a predecessor, when
// there is one), installs the inherited runtime state, and readies the front: the proxy,
// the admin API and the guardrail.
func (st *stack) listen(cfg stackConfig, ac admin.Config) error {
	pln, err := cfg.inherit.listener("cql", cfg.Listen)
	if err != nil {
		return err
	}
	st.Sidecar = pln.Addr().String()
	ac.Addr, ac.Token, ac.TLSCert, ac.TLSKey, ac.Insecure = cfg.Admin, cfg.AdminToken, cfg.AdminTLSCert, cfg.AdminTLSKey, cfg.AdminInsecure
	ac.Logger, ac.Tracer, ac.Loggers = st.reg.Logger(logs.Admin), st.guard.User(st.tracer), st.reg
	ac.Queries, ac.Ready = queriesOf(st.proxy), st.nodeReady
	st.api = admin.New(ac)
	aln, err := cfg.inherit.listener("admin", cfg.Admin)
	if err != nil {
		pln.Close()
		return err
	}
	scheme := "http://"
	if cfg.AdminTLSCert != "" {
		scheme = "https://"
	}
	st.Admin = scheme + aln.Addr().String()
	// The toggles' timers stop with the stack, before the tracer closes (a successor runs
	// them from the state handed over).
	st.closers = append([]func(context.Context) error{func(context.Context) error { st.api.StopTimers(); return nil }}, st.closers...)
	if err := st.restore(cfg.inherit); err != nil {
		pln.Close()
		aln.Close()
		return err
	}
	st.cqlLn, st.adminLn = sidecar.NewListener(pln), sidecar.NewListener(aln)
	if err := st.listenShardAware(cfg); err != nil {
		pln.Close()
		aln.Close()
		return err
	}
	st.front = append(st.front,
		func(ctx context.Context) error { return st.proxy.Serve(ctx, st.cqlLn) },
		func(ctx context.Context) error { return st.api.Serve(ctx, st.adminLn) },
		func(ctx context.Context) error { st.guard.Run(ctx); return nil })
	return nil
}

// nodeReady is the admin API's readiness check: the node accepts a connection, and the
// sidecar's own login to it is not refused.
func (st *stack) nodeReady(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", st.Node)
	if err != nil {
		return err
	}
	c.Close()
	return st.nodeSession.Ready(ctx)
}

// nodeLogin is the state of the sidecar's own login to the node, for /tracecar/status.
func (st *stack) nodeLogin() admin.NodeLogin {
	l := st.nodeSession.Login()
	return admin.NodeLogin{State: l.State, User: l.User, Error: l.Error, Refused: l.Refused}
}
