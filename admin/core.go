package admin

// The core of the server: the state that its handlers share and the types they are grouped
// in, the route table's types, and the helpers that every group uses to log a change and
// to change the tracer's configuration.

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
)

// Server is the admin API. Create it with New; it is safe for concurrent use, and Serve
// may be called more than once, on different listeners. Its handlers are grouped by
// concern in types over the state they share (core): scyllaAPI, tracingAPI and opsAPI.
type Server struct {
	*core
	addr atomic.Pointer[string]
}

// core is what the API's handlers share: the configuration and the parts it names, the
// admin logger, the toggles' timers and the routes. Its methods are the helpers every group
// of handlers uses: audit and updateConfig (this file), applyToNode and nodeLoggers
// (node.go), toggle and the timers (toggle.go).
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
	// (storage_service.go, system.go), and the node's, which it applies them to (node.go,
	// node_probability.go).
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

// audit starts the log line of a change made by the client of ctx. It is written whatever
// the admin logger's level, so that lowering that level (itself a change, and logged) cannot
// hide later changes: the event has no level for the registry to filter, and carries
// level "info" as a field for readers.
func (s *core) audit(ctx *fasthttp.RequestCtx, what string) *zerolog.Event {
	return s.log.Log().Str(zerolog.LevelFieldName, zerolog.LevelInfoValue).
		Str("remote", ctx.RemoteAddr().String()).Str("what", what)
}

// updateConfig applies f to the tracer's configuration as one read-modify-write and
// returns the configurations before and after.
func (s *core) updateConfig(f func(tracing.Config) tracing.Config) (old, cur tracing.Config, err error) {
	if u, ok := s.tr.(configUpdater); ok {
		err = u.UpdateConfig(func(c tracing.Config) tracing.Config {
			old, cur = c, f(c)
			return cur
		})
		return old, cur, err
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	old = s.tr.Config()
	cur = f(old)
	return old, cur, s.tr.SetConfig(cur)
}
