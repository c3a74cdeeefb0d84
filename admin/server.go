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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
)

// ErrOpen is returned by Serve for a listener reachable from other machines when there is
// no token and Config.Insecure is not set: a toggle can hurt a production node, so the API
// is never open by accident.
var ErrOpen = errors.New("admin API on a non-loopback address needs a token (or Insecure)")

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

// gated answers a request that the write gate refuses, and reports whether it did. While
// the gate is closed every response closes its connection, reads too: the listener is the
// new process's, and a client's next connection reaches it.
func (s *Server) gated(ctx *fasthttp.RequestCtx, method string) bool {
	if s.writeGate == nil {
		return false
	}
	err := s.writeGate()
	if err == nil {
		return false
	}
	ctx.SetConnectionClose()
	if method == http.MethodGet {
		return false
	}
	writeError(ctx, errorf(http.StatusServiceUnavailable, "%v", err))
	return true
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
