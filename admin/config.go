package admin

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/metrics"
)

// DefaultAddr is where the API listens when Config.Addr is empty: loopback only, on Scylla's
// API port.
const DefaultAddr = "127.0.0.1:10000"

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
