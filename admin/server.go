package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/guardrail"
)

// DefaultAddr is where the API listens when Config.Addr is empty: loopback only, on Scylla's
// API port.
const DefaultAddr = "127.0.0.1:10000"

// ErrOpen is returned by Serve for a listener reachable from other machines when there is
// no token and Config.Insecure is not set: a toggle can hurt a production node, so the API
// is never open by accident.
var ErrOpen = errors.New("admin API on a non-loopback address needs a token (or Insecure)")

// Config configures a Server: where it listens, how it is secured, and what it serves.
// The zero value works: it listens on DefaultAddr without a token or TLS, logs nothing,
// and serves the loggers (none), /tracecar/status, /metrics, /healthz and /readyz; each
// part set adds its endpoints.
type Config struct {
	// Addr is the host:port that ListenAndServe listens on; empty means DefaultAddr.
	Addr string
	// Token, when set, must come with every request but /healthz as
	// "Authorization: Bearer TOKEN"; other requests get 401.
	Token string
	// TLSCert and TLSKey are PEM files; with both set the API speaks HTTPS only.
	TLSCert, TLSKey string
	// Insecure allows serving without a token on an address other machines can reach.
	Insecure bool
	// Logger is the admin logger: changes, refusals and server errors. Nil logs nothing.
	Logger *zerolog.Logger

	// Tracer is the tracing engine; nil serves no tracing endpoints (they are 404), and
	// ConfigOnly serves only the trace probability (the embedded node).
	Tracer Tracer
	// Loggers is the logger registry; nil serves an empty logger list.
	Loggers Loggers
	// Ready makes /readyz call it, typically a dial of the node, and answer 503 when it
	// fails. Nil: /readyz answers 200 as soon as the server runs.
	Ready func(ctx context.Context) error
	// Metrics' series are served on /metrics, besides those the server collects itself,
	// and those of Collectors.
	Metrics    *metrics.Metrics
	Collectors []prometheus.Collector
	// Guardrail makes /tracecar/status report the guardrail state it returns.
	Guardrail func() Guardrail
	// GuardrailControl serves GET and POST /tracecar/guardrail, and reports its state in
	// /tracecar/status (unless Guardrail is set).
	GuardrailControl GuardrailControl
	// NodeLogin makes /tracecar/status report the node login it returns.
	NodeLogin func() NodeLogin
	// Queries serves GET /tracecar/queries.
	Queries QueriesFunc
	// Process makes /tracecar/status report the process it describes, and the binary it
	// runs (Process.Build, unless it sets it).
	Process func() Process
	// Shards makes /tracecar/status report the shard figures it returns (nil: none yet).
	Shards func() *Shards
	// WriteGate makes every request ask it first: while it returns an error, requests
	// other than GET (and HEAD) get 503 with its message, and every response closes its
	// connection. A sidecar that hands itself over to a new process refuses changes this
	// way, so that no change is made to the state it has handed over.
	WriteGate func() error
	// Audit serves GET and POST /tracecar/audit, reports its state in /tracecar/status,
	// makes /readyz fail while one of its sinks fails, and makes every change through the
	// API (any method but GET) an ADMIN record.
	Audit AuditLog
	// Statements serves /tracecar/statement_stats, /tracecar/statements and
	// /tracecar/statements/reset, and with a Tracer /tracecar/trace_floor.
	Statements Statements
	// Capture serves GET and POST /tracecar/capture, and reports its state in
	// /tracecar/status.
	Capture Capture
	// TraceFilter serves GET, POST and DELETE /tracecar/trace_filter.
	TraceFilter TraceFilter
	// TraceContextKeys are the custom payload keys that the tracer reads a traceparent
	// from (tracing.Tracer.TraceContextKeys), shown by GET and POST
	// /tracecar/trace_context and in /tracecar/status; nil: tracing.TraceparentKey.
	// Following the client's sampling decision is part of the tracer's configuration, so
	// that the guardrail steps it down with the probability.
	TraceContextKeys []string
	// Node is the node's management API: /system/logger serves the node's loggers as
	// node:NAME, /tracecar/node/trace_probability serves the node's probability, and the
	// changes that NodeApply names are made on the node too, all or nothing.
	Node      Node
	NodeApply NodeApply
	// NodeControl serves POST /tracecar/node/stop?node=i, POST /tracecar/node/start?node=i
	// and GET /tracecar/nodes, with nodes numbered from 1 as in 127.0.0.<i>: for tests of
	// failover (a stop looks like a crash to clients). NodeStateErr reports whether an
	// error means that the node is already stopped or started, answered with 409.
	NodeControl  NodeControl
	NodeStateErr func(error) bool
	// ToggleMaxDuration gives a costly toggle sent without for (full mode, a probability
	// above 0, a debug or trace level, a threshold of 0) a timer of this duration, and says
	// so in its answer (TimerHeader). 0 leaves such toggles on until changed.
	ToggleMaxDuration time.Duration
}

// Tracer is what the API needs from the tracing engine. tracing.Tracer implements it; a
// server with only a trace probability (the embedded node) can use ConfigOnly.
type Tracer interface {
	// Config returns the current configuration.
	Config() tracing.Config
	// SetConfig installs a whole configuration at once, or returns an error and changes
	// nothing.
	SetConfig(tracing.Config) error
	// SlowLog returns up to limit recorded sessions, newest first; limit <= 0 means all.
	SlowLog(limit int) []tracing.Session
	// Session returns one recorded session.
	Session(id string) (tracing.Session, bool)
	// Stats returns the tracer's counters.
	Stats() tracing.Stats
}

// configUpdater is implemented by a Tracer, such as tracing.Tracer, that can apply a
// read-modify-write under its own lock, so that no writer outside this server can slip in
// between the read and the write.
type configUpdater interface {
	UpdateConfig(func(tracing.Config) tracing.Config) error
}

// Loggers is what the API needs from the logger registry; logs.Registry implements it.
type Loggers interface {
	// Names returns the names of the loggers.
	Names() []string
	// Level returns a logger's level.
	Level(name string) (string, error)
	// SetLevel sets one logger's level.
	SetLevel(name, level string) error
	// SetAll sets every logger's level.
	SetAll(level string) error
}

// Guardrail is the runtime guardrail's state as /tracecar/status reports it: State is
// "none" when no budget is set, else "ok" or "stepped_down", and Detail says why.
type Guardrail = guardrail.Status

// GuardrailControl is what the API needs from the runtime guardrail;
// guardrail.Controller implements it.
type GuardrailControl interface {
	// Status returns the guardrail's state.
	Status() guardrail.Status
	// Budget returns the budget in force.
	Budget() guardrail.Budget
	// SetBudget installs a budget, or returns an error wrapping guardrail.ErrInvalidBudget
	// and changes nothing.
	SetBudget(guardrail.Budget) error
}

// NodeLogin is the state of the sidecar's own login to its node, as /tracecar/status
// reports it.
type NodeLogin = adminapi.NodeLogin

// Server is the admin API. Create it with New; it is safe for concurrent use, and Serve
// may be called more than once, on different listeners. Its handlers are grouped by
// concern in types over the state they share (core): scyllaAPI, tracingAPI and opsAPI.
type Server struct {
	*core
	addr atomic.Pointer[string]
}

// core is what the API's handlers share: the configuration and the parts it names, the
// admin logger, the toggles' timers and the routes. Its methods are the helpers every group
// of handlers uses: audit (audit.go), toggle and the timers (timers.go), updateConfig
// (storage_service.go), applyToNode and nodeLoggers (node.go).
type core struct {
	cfg       Config
	tr        Tracer // nil: no tracing endpoints
	logs      Loggers
	log       *zerolog.Logger
	ready     func(context.Context) error
	metrics   *metrics.Metrics
	guardrail func() Guardrail
	guardCtl  GuardrailControl
	stmts     Statements  // nil: no statement statistics endpoints
	capture   Capture     // nil: no capture endpoints
	filter    TraceFilter // nil: no trace filter endpoints
	ctxKeys   []string    // the tracer's trace context keys; nil: no trace context endpoint
	node      Node        // nil: no node: loggers, nothing applied to the node
	apply     NodeApply
	gatherer  prometheus.Gatherer
	token     [sha256.Size]byte // hash of cfg.Token, compared in constant time
	started   time.Time

	queries   QueriesFunc    // nil: no /tracecar/queries
	process   func() Process // nil: no process in the status
	shards    func() *Shards // nil: no shards in the status
	writeGate func() error   // nil: changes always allowed

	auditLog AuditLog // nil: no audit endpoint, no ADMIN records

	nodeLogin func() NodeLogin // nil: no node_login in the status
	timers    timers           // the toggles' for= timers (timers.go)

	nodes        NodeControl // nil: no node control endpoints
	nodeStateErr func(error) bool

	// cfgMu serialises read-modify-write of the tracer's configuration when the tracer
	// cannot do it under its own lock.
	cfgMu sync.Mutex

	exact  map[string]route // by path
	prefix []prefixRoute    // paths with a trailing parameter
}

// The handlers, by concern, each a type over the core.
type (
	// scyllaAPI serves ScyllaDB's endpoints: slow_query, trace_probability, the loggers
	// (storage_service.go, system.go), and the node's, which it applies them to (node.go).
	scyllaAPI struct{ *core }
	// tracingAPI serves tracecar's tracing endpoints: the recorded sessions (tracecar.go,
	// slowlog.go), the trace context, filter and floor, and the guardrail.
	tracingAPI struct{ *core }
	// opsAPI serves what operates the sidecar: the status, health and metrics (tracecar.go,
	// metrics.go), the statement statistics, the capture, the audit log, the requests in
	// flight and the nodes of a test cluster.
	opsAPI struct{ *core }
)

// handler serves one method of a route. arg is the path parameter of a prefix route.
type handler func(ctx *fasthttp.RequestCtx, arg string) error

// route is the handlers of one path, by method. A GET handler serves HEAD too. Every
// method a route has is served, listed by Routes and refused without the token, so that
// no method can be added that the token test does not see.
type route map[string]handler

type prefixRoute struct {
	prefix string
	r      route
}

var nopLogger = zerolog.Nop()

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	c := &core{cfg: cfg, tr: cfg.Tracer, logs: cfg.Loggers, log: cfg.Logger, started: time.Now(), timers: newTimers(),
		ready: cfg.Ready, metrics: cfg.Metrics, guardrail: cfg.Guardrail, guardCtl: cfg.GuardrailControl,
		stmts: cfg.Statements, capture: cfg.Capture, filter: cfg.TraceFilter, ctxKeys: slices.Clone(cfg.TraceContextKeys),
		node: cfg.Node, apply: cfg.NodeApply, queries: cfg.Queries, process: cfg.Process, shards: cfg.Shards,
		writeGate: cfg.WriteGate, auditLog: cfg.Audit, nodeLogin: cfg.NodeLogin, nodes: cfg.NodeControl,
		nodeStateErr: cfg.NodeStateErr}
	c.timers.max = cfg.ToggleMaxDuration
	if c.log == nil {
		c.log = &nopLogger
	}
	if c.logs == nil {
		c.logs = noLoggers{}
	}
	if cfg.Token != "" {
		c.token = sha256.Sum256([]byte(cfg.Token))
	}
	if c.guardrail == nil && c.guardCtl != nil {
		c.guardrail = c.guardCtl.Status
	}
	if _, ok := c.tr.(configOnly); c.tr != nil && !ok && c.ctxKeys == nil {
		c.ctxKeys = []string{tracing.TraceparentKey}
	}
	own := prometheus.NewRegistry()
	if c.tr != nil {
		own.MustRegister(tracerCollector{c.tr})
	}
	own.MustRegister(metrics.RuntimeCollectors()...)
	own.MustRegister(cfg.Collectors...)
	own.MustRegister(opsCollectors(c)...)
	own.MustRegister(c.timers.expired)
	c.gatherer = prometheus.Gatherers{c.metrics.Gatherer(), own}
	addRoutes(c)
	s := &Server{core: c}
	s.addr.Store(&cfg.Addr)
	return s
}

// addRoutes fills the route table of c: each group's endpoints, those of the parts c has.
func addRoutes(c *core) {
	sc, tc, ops := &scyllaAPI{c}, &tracingAPI{c}, &opsAPI{c}
	c.exact = map[string]route{
		"/system/logger":                 {http.MethodGet: sc.getLoggers, http.MethodPost: sc.setAllLoggers},
		"/storage_service/logging_level": {http.MethodGet: sc.getLoggingLevels},
		"/tracecar/status":               {http.MethodGet: ops.getStatus},
		"/metrics":                       {http.MethodGet: ops.getMetrics},
		"/healthz":                       {http.MethodGet: ops.getHealthz},
		"/readyz":                        {http.MethodGet: ops.getReadyz},
	}
	c.prefix = []prefixRoute{{"/system/logger/", route{http.MethodGet: sc.getLogger, http.MethodPost: sc.setLogger}}}
	_, configOnly := c.tr.(configOnly)
	if configOnly {
		// A server without sessions (the embedded node) applies only the trace probability.
		// Its slow_query reports that slow-query logging is off, and refuses a change
		// rather than accepting one it would not apply.
		c.exact["/storage_service/slow_query"] = route{http.MethodGet: sc.getSlowQuery, http.MethodPost: sc.slowQueryNotApplied}
		c.exact["/storage_service/trace_probability"] = route{http.MethodGet: sc.getProbability, http.MethodPost: sc.setProbability}
	} else if c.tr != nil {
		c.exact["/storage_service/slow_query"] = route{http.MethodGet: sc.getSlowQuery, http.MethodPost: sc.setSlowQuery}
		c.exact["/storage_service/trace_probability"] = route{http.MethodGet: sc.getProbability, http.MethodPost: sc.setProbability}
		c.exact["/tracecar/slow_log"] = route{http.MethodGet: tc.getSlowLog}
		c.exact["/tracecar/trace_context"] = route{http.MethodGet: tc.getTraceContext, http.MethodPost: tc.setTraceContext}
		c.prefix = append(c.prefix, prefixRoute{"/tracecar/sessions/", route{http.MethodGet: tc.getSession}})
	}
	if c.guardCtl != nil {
		c.exact["/tracecar/guardrail"] = route{http.MethodGet: tc.getGuardrail, http.MethodPost: tc.setGuardrail}
	}
	if c.filter != nil {
		c.exact["/tracecar/trace_filter"] = route{http.MethodGet: tc.getTraceFilter, http.MethodPost: tc.setTraceFilter, http.MethodDelete: tc.clearTraceFilter}
	}
	if c.stmts != nil && c.tr != nil && !configOnly {
		c.exact[adminapi.PathTraceFloor] = tc.floorRoute()
	}
	if c.stmts != nil {
		c.exact["/tracecar/statement_stats"] = route{http.MethodGet: ops.getStatementStats, http.MethodPost: ops.setStatementStats}
		c.exact["/tracecar/statements"] = route{http.MethodGet: ops.getStatements}
		c.exact["/tracecar/statements/reset"] = route{http.MethodPost: ops.resetStatements}
	}
	if c.capture != nil {
		c.exact["/tracecar/capture"] = route{http.MethodGet: ops.getCapture, http.MethodPost: ops.setCapture}
	}
	if c.auditLog != nil {
		c.exact["/tracecar/audit"] = route{http.MethodGet: ops.getAudit, http.MethodPost: ops.setAudit}
	}
	if c.node != nil {
		c.exact["/tracecar/node/trace_probability"] = route{http.MethodGet: sc.getNodeProbability, http.MethodPost: sc.setNodeProbability}
	}
	ops.addNodeRoutes()
	ops.addQueryRoutes()
}

// Addr returns the address the server listens on once Serve has started, and the
// configured address before.
func (s *Server) Addr() string { return *s.addr.Load() }

// ListenAndServe listens on Config.Addr and serves until ctx is done.
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("admin listen %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done, then shuts down gracefully: it stops accepting,
// lets requests in flight finish (for up to 5 s) and returns nil. It closes ln. It returns
// ErrOpen, without serving, when ln is reachable from other machines, there is no token and
// Config.Insecure is false.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.checkOpen(ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	scheme := "http"
	if s.cfg.TLSCert != "" || s.cfg.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("admin TLS key pair: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	addr := ln.Addr().String()
	s.addr.Store(&addr)

	srv := &fasthttp.Server{
		Handler:              s.handle,
		ErrorHandler:         s.handleBadRequest,
		Name:                 "tracecar",
		ReadTimeout:          10 * time.Second,
		WriteTimeout:         10 * time.Second,
		IdleTimeout:          2 * time.Minute,
		MaxRequestBodySize:   64 << 10,
		NoDefaultContentType: true,
		CloseOnShutdown:      true,
		Logger:               fasthttpLogger{s.log},
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(sctx); err != nil {
			s.log.Warn().Err(err).Msg("admin API shutdown")
		}
		// A shutdown that runs before srv.Serve has taken ln (a context cancelled right
		// after start) knows no listener to close: closing it here ends that Serve too.
		ln.Close()
	}()
	s.log.Info().Str("addr", scheme+"://"+addr).Bool("token", s.cfg.Token != "").Msg("admin API listening")
	err := srv.Serve(ln)
	close(done)
	<-stopped
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin serve: %w", err)
	}
	return nil
}

// checkOpen refuses a TCP address other than loopback when there is no token.
func (s *Server) checkOpen(a net.Addr) error {
	if s.cfg.Token != "" || s.cfg.Insecure {
		return nil
	}
	if ta, ok := a.(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
		return fmt.Errorf("%s: %w", a, ErrOpen)
	}
	return nil
}

// handle serves a request, then makes the ADMIN record of a change (audit.go).
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	s.serve(ctx)
	s.auditRequest(ctx)
}

// serve authenticates, routes and maps the handler's error to a status.
func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	method := string(ctx.Method())
	if method == http.MethodHead {
		method = http.MethodGet
	}
	// Only a GET of /healthz is open: the exemption is of one method and path, so that a
	// method added to /healthz later is not open with it.
	if !(path == "/healthz" && method == http.MethodGet) && !s.authorized(ctx) {
		s.log.Warn().Str("remote", ctx.RemoteAddr().String()).Str("method", string(ctx.Method())).
			Str("path", path).Msg("admin request refused: missing or wrong token")
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="tracecar"`)
		writeError(ctx, errorf(http.StatusUnauthorized, "missing or wrong token: send the header \"Authorization: Bearer TOKEN\""))
		return
	}
	r, arg := s.lookup(path)
	if r == nil {
		writeError(ctx, errorf(http.StatusNotFound, "no endpoint %s", path))
		return
	}
	h := r[method]
	if h == nil {
		allow := r.allow()
		ctx.Response.Header.Set("Allow", allow)
		writeError(ctx, errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s: allowed are %s", ctx.Method(), path, allow))
		return
	}
	if s.gated(ctx, method) {
		return
	}
	if err := h(ctx, arg); err != nil {
		e := statusOf(err)
		ev := s.log.Info()
		if e.Code >= 500 {
			ev = s.log.Error()
		}
		ev.Str("remote", ctx.RemoteAddr().String()).Str("method", string(ctx.Method())).Str("path", path).
			Int("status", e.Code).Str("error", e.Message).Msg("admin request failed")
		writeError(ctx, e)
	}
}

// handleBadRequest answers a request that fasthttp could not parse.
func (s *Server) handleBadRequest(ctx *fasthttp.RequestCtx, err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// Often a spare connection a client opened and never used: answer 408 and close,
		// never a 400 that a client could take for the answer to its next request.
		ctx.SetConnectionClose()
		writeError(ctx, errorf(http.StatusRequestTimeout, "no complete request within the read timeout"))
		return
	}
	writeError(ctx, errorf(http.StatusBadRequest, "malformed request: %v", err))
}

// lookup finds the route of path and its path parameter.
func (s *Server) lookup(path string) (route, string) {
	if r, ok := s.exact[path]; ok {
		return r, ""
	}
	for _, p := range s.prefix {
		if arg, ok := strings.CutPrefix(path, p.prefix); ok && arg != "" && !strings.Contains(arg, "/") {
			return p.r, arg
		}
	}
	return nil, ""
}

// Route is one method and path that a Server serves. A path that ends in "/" takes one
// more path segment, such as a logger name.
type Route struct {
	Method, Path string
}

// Routes lists every method and path the server serves, sorted, so that a caller (a test
// of the token, say) can check each one. It is read from the table that routes requests, so
// it holds every method a path has; HEAD, served by a path's GET, is not listed.
func (s *Server) Routes() []Route {
	var out []Route
	add := func(path string, r route) {
		for m := range r {
			out = append(out, Route{m, path})
		}
	}
	for p, r := range s.exact {
		add(p, r)
	}
	for _, p := range s.prefix {
		add(p.prefix, p.r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// allow lists the methods of r for the Allow header.
func (r route) allow() string {
	var m []string
	for k := range r {
		m = append(m, k)
		if k == http.MethodGet {
			m = append(m, http.MethodHead)
		}
	}
	sort.Strings(m)
	return strings.Join(m, ", ")
}

// authorized reports whether ctx carries the token, or no token is configured. The
// comparison is of SHA-256 hashes in constant time, so neither the token's bytes nor its
// length leak through timing.
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if s.cfg.Token == "" {
		return true
	}
	h := string(ctx.Request.Header.Peek("Authorization"))
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// fasthttpLogger sends fasthttp's own messages to the admin logger.
type fasthttpLogger struct{ l *zerolog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn().Msgf(format, args...)
}

// noLoggers is the Loggers of a server given none.
type noLoggers struct{}

func (noLoggers) Names() []string { return nil }
func (noLoggers) Level(name string) (string, error) {
	return "", fmt.Errorf("unknown logger %q", name)
}
func (noLoggers) SetLevel(name, level string) error { return fmt.Errorf("unknown logger %q", name) }
func (noLoggers) SetAll(level string) error         { return nil }

// audit starts the log line of a change made by the client of ctx. It is written whatever
// the admin logger's level, so that lowering that level (itself a change, and logged) cannot
// hide later changes: the event has no level for the registry to filter, and carries
// level "info" as a field for readers.
func (s *core) audit(ctx *fasthttp.RequestCtx, what string) *zerolog.Event {
	return s.log.Log().Str(zerolog.LevelFieldName, zerolog.LevelInfoValue).
		Str("remote", ctx.RemoteAddr().String()).Str("what", what)
}
