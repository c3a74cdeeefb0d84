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

// Config configures a Server. The zero value listens on DefaultAddr without a token or TLS
// and logs nothing.
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

// Option sets an optional part of a Server.
type Option func(*Server)

// WithReady makes /readyz call ready, typically a dial of the node, and answer 503 when
// it fails. Without it /readyz answers 200 as soon as the server runs.
func WithReady(ready func(ctx context.Context) error) Option {
	return func(s *Server) { s.ready = ready }
}

// WithMetrics serves m's series on /metrics, besides those the server collects itself.
func WithMetrics(m *metrics.Metrics) Option {
	return func(s *Server) { s.metrics = m }
}

// WithGuardrail makes /tracecar/status report the guardrail state that f returns.
func WithGuardrail(f func() Guardrail) Option {
	return func(s *Server) { s.guardrail = f }
}

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

// WithGuardrailControl serves GET and POST /tracecar/guardrail for g, and reports its
// state in /tracecar/status.
func WithGuardrailControl(g GuardrailControl) Option {
	return func(s *Server) {
		s.guardCtl = g
		s.guardrail = g.Status
	}
}

// NodeLogin is the state of the sidecar's own login to its node, for node events, the CQL
// sink and the audit table, as /tracecar/status reports it: State is not_tried, ok,
// refused or failed; Refused counts the refusals since start.
type NodeLogin struct {
	State   string `json:"state"`
	User    string `json:"user"`
	Error   string `json:"error,omitempty"`
	Refused uint64 `json:"refused"`
}

// WithNodeLogin makes /tracecar/status report the node login that f returns.
func WithNodeLogin(f func() NodeLogin) Option {
	return func(s *Server) { s.nodeLogin = f }
}

// WithCollector serves c's series on /metrics too.
func WithCollector(c prometheus.Collector) Option {
	return func(s *Server) { s.collectors = append(s.collectors, c) }
}

// Server is the admin API. Create it with New; it is safe for concurrent use, and Serve
// may be called more than once, on different listeners.
type Server struct {
	cfg        Config
	tr         Tracer // nil: no tracing endpoints
	logs       Loggers
	log        *zerolog.Logger
	ready      func(context.Context) error
	metrics    *metrics.Metrics
	guardrail  func() Guardrail
	guardCtl   GuardrailControl
	stmts      Statements  // nil: no statement statistics endpoints
	capture    Capture     // nil: no capture endpoints
	filter     TraceFilter // nil: no trace filter endpoints
	ctxKeys    []string    // the tracer's trace context keys; nil: no trace context endpoint
	node       Node        // nil: no node: loggers, nothing applied to the node
	apply      NodeApply
	collectors []prometheus.Collector
	gatherer   prometheus.Gatherer
	token      [sha256.Size]byte // hash of cfg.Token, compared in constant time
	started    time.Time
	addr       atomic.Pointer[string]

	queries   QueriesFunc    // nil: no /tracecar/queries
	process   func() Process // nil: no process in the status (see WithProcess)
	shards    func() *Shards // nil: no shards in the status (see WithShards)
	writeGate func() error   // nil: changes always allowed (see WithWriteGate)

	auditLog AuditLog // nil: no audit endpoint, no ADMIN records (see WithAudit)

	nodeLogin func() NodeLogin // nil: no node_login in the status (see WithNodeLogin)
	timers    timers           // the toggles' for= timers (timers.go)

	nodes        NodeControl // nil: no node control endpoints (see WithNodeControl)
	nodeStateErr func(error) bool

	// cfgMu serialises read-modify-write of the tracer's configuration when the tracer
	// cannot do it under its own lock.
	cfgMu sync.Mutex

	exact  map[string]route // by path
	prefix []prefixRoute    // paths with a trailing parameter
}

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

// New returns a Server for tr and logs. A nil tr serves no tracing endpoints (they are
// 404); a nil logs serves an empty logger list.
func New(cfg Config, tr Tracer, logs Loggers, opts ...Option) *Server {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	s := &Server{cfg: cfg, tr: tr, logs: logs, log: cfg.Logger, started: time.Now(), timers: newTimers()}
	if s.log == nil {
		s.log = &nopLogger
	}
	if s.logs == nil {
		s.logs = noLoggers{}
	}
	if cfg.Token != "" {
		s.token = sha256.Sum256([]byte(cfg.Token))
	}
	for _, o := range opts {
		o(s)
	}
	own := prometheus.NewRegistry()
	if tr != nil {
		own.MustRegister(tracerCollector{tr})
	}
	own.MustRegister(metrics.RuntimeCollectors()...)
	own.MustRegister(s.collectors...)
	own.MustRegister(s.opsCollectors()...)
	own.MustRegister(s.timers.expired)
	s.gatherer = prometheus.Gatherers{s.metrics.Gatherer(), own}

	s.exact = map[string]route{
		"/system/logger":                 {http.MethodGet: s.getLoggers, http.MethodPost: s.setAllLoggers},
		"/storage_service/logging_level": {http.MethodGet: s.getLoggingLevels},
		"/tracecar/status":               {http.MethodGet: s.getStatus},
		"/metrics":                       {http.MethodGet: s.getMetrics},
		"/healthz":                       {http.MethodGet: s.getHealthz},
		"/readyz":                        {http.MethodGet: s.getReadyz},
	}
	s.prefix = []prefixRoute{{"/system/logger/", route{http.MethodGet: s.getLogger, http.MethodPost: s.setLogger}}}
	if _, ok := tr.(configOnly); ok {
		// A server without sessions (the embedded node) applies only the trace probability.
		// Its slow_query reports that slow-query logging is off, and refuses a change
		// rather than accepting one it would not apply.
		s.exact["/storage_service/slow_query"] = route{http.MethodGet: s.getSlowQuery, http.MethodPost: s.slowQueryNotApplied}
		s.exact["/storage_service/trace_probability"] = route{http.MethodGet: s.getProbability, http.MethodPost: s.setProbability}
	} else if tr != nil {
		s.exact["/storage_service/slow_query"] = route{http.MethodGet: s.getSlowQuery, http.MethodPost: s.setSlowQuery}
		s.exact["/storage_service/trace_probability"] = route{http.MethodGet: s.getProbability, http.MethodPost: s.setProbability}
		s.exact["/tracecar/slow_log"] = route{http.MethodGet: s.getSlowLog}
		if s.ctxKeys == nil {
			s.ctxKeys = []string{tracing.TraceparentKey}
		}
		s.exact["/tracecar/trace_context"] = route{http.MethodGet: s.getTraceContext, http.MethodPost: s.setTraceContext}
		s.prefix = append(s.prefix, prefixRoute{"/tracecar/sessions/", route{http.MethodGet: s.getSession}})
	}
	if s.guardCtl != nil {
		s.exact["/tracecar/guardrail"] = route{http.MethodGet: s.getGuardrail, http.MethodPost: s.setGuardrail}
	}
	if s.filter != nil {
		s.exact["/tracecar/trace_filter"] = route{http.MethodGet: s.getTraceFilter, http.MethodPost: s.setTraceFilter, http.MethodDelete: s.clearTraceFilter}
	}
	if _, configOnly := tr.(configOnly); s.stmts != nil && tr != nil && !configOnly {
		s.exact[adminapi.PathTraceFloor] = s.floorRoute()
	}
	if s.stmts != nil {
		s.exact["/tracecar/statement_stats"] = route{http.MethodGet: s.getStatementStats, http.MethodPost: s.setStatementStats}
		s.exact["/tracecar/statements"] = route{http.MethodGet: s.getStatements}
		s.exact["/tracecar/statements/reset"] = route{http.MethodPost: s.resetStatements}
	}
	if s.capture != nil {
		s.exact["/tracecar/capture"] = route{http.MethodGet: s.getCapture, http.MethodPost: s.setCapture}
	}
	if s.auditLog != nil {
		s.exact["/tracecar/audit"] = route{http.MethodGet: s.getAudit, http.MethodPost: s.setAudit}
	}
	if s.node != nil {
		s.exact["/tracecar/node/trace_probability"] = route{http.MethodGet: s.getNodeProbability, http.MethodPost: s.setNodeProbability}
	}
	s.addNodeRoutes()
	s.addQueryRoutes()
	s.addr.Store(&cfg.Addr)
	return s
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

	srv := s.httpServer()
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

// idleWorkerCheck is how often the admin server's idle workers are looked for, and how
// long one may stay idle: a few goroutines kept a while longer after a burst of requests,
// for a wake-up every 5 minutes rather than every 10 seconds.
const idleWorkerCheck = 5 * time.Minute

// httpServer returns the fasthttp server that Serve runs: its handlers, timeouts and limits,
// set not to wake the process on its own while no request comes.
func (s *Server) httpServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:              s.handle,
		ErrorHandler:         s.handleBadRequest,
		Name:                 "tracecar",
		ReadTimeout:          10 * time.Second,
		WriteTimeout:         10 * time.Second,
		IdleTimeout:          2 * time.Minute,
		MaxRequestBodySize:   64 << 10,
		NoDefaultContentType: true,
		// No Date header: fasthttp's comes from a goroutine that wakes every second for the
		// life of the process once the first response is written, an idle sidecar's most
		// frequent wake-up, and fasthttp drops a Date set by the handler.
		NoDefaultDate: true,
		// fasthttp's worker pool has a goroutine that wakes every MaxIdleWorkerDuration
		// (10 s by default) to end the workers idle that long, for the life of the server.
		MaxIdleWorkerDuration: idleWorkerCheck,
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{s.log},
	}
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
func (s *Server) audit(ctx *fasthttp.RequestCtx, what string) *zerolog.Event {
	return s.log.Log().Str(zerolog.LevelFieldName, zerolog.LevelInfoValue).
		Str("remote", ctx.RemoteAddr().String()).Str("what", what)
}
