package admin

// The parts that a Server serves, each as the API sees it: what it needs from the tracing
// engine, the loggers, the guardrail, the node, the audit log, the statement statistics,
// the capture and the trace filter. Config names one of each; a part left nil has no
// endpoints.

import (
	"context"
	"strings"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/guardrail"
	"github.com/tracecar/tracecar/tracing/statements"
)

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

// Node is what the API needs from the node's own management API; nodeapi.Client
// implements it for ScyllaDB, Cassandra through Jolokia and the embedded node.
type Node interface {
	// Kind names the node's API: scylla, cassandra-jolokia or tracecar.
	Kind() string
	// TraceProbability and SetTraceProbability read and set the node's trace probability.
	TraceProbability(ctx context.Context) (float64, error)
	SetTraceProbability(ctx context.Context, p float64) error
	// SetSlowQuery sets the node's slow-query logging (ScyllaDB only).
	SetSlowQuery(ctx context.Context, enable, fast bool, thresholdMicros, ttlSeconds int64) error
	// Loggers, Level and SetLevel list, read and set the node's loggers.
	Loggers(ctx context.Context) ([]string, error)
	Level(ctx context.Context, name string) (string, error)
	SetLevel(ctx context.Context, name, level string) error
}

// NodeApply says which sidecar changes are applied to the node as well.
type NodeApply struct {
	SlowQuery        bool
	TraceProbability bool
}

// String names the changes applied to the node, for messages.
func (a NodeApply) String() string {
	var p []string
	if a.SlowQuery {
		p = append(p, "slow_query")
	}
	if a.TraceProbability {
		p = append(p, "trace_probability")
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ",")
}

// NodeControl stops and starts the nodes of an embedded test cluster. node.Cluster
// implements it, with nodes numbered from 0.
type NodeControl interface {
	// Len returns the number of nodes.
	Len() int
	// Up reports whether node i is serving.
	Up(i int) bool
	// Stop stops node i; Start starts it again.
	Stop(i int) error
	Start(i int) error
}

// Query is one request in flight, as GET /tracecar/queries shows it.
type Query = adminapi.Query

// QueriesFunc returns the requests in flight for at least min, longest first, at most
// limit of them. It must be safe for concurrent use.
type QueriesFunc func(min time.Duration, limit int) []Query

// AuditLog is what the API needs from the audit log; *audit.Log implements it.
type AuditLog interface {
	// Settings returns the settings in force; Set replaces them.
	Settings() *audit.Settings
	Set(audit.Settings)
	// HasSinks reports whether the log writes anywhere.
	HasSinks() bool
	// Wants reports whether a record is audited.
	Wants(c audit.Category, keyspace, table, user string) bool
	// Submit queues a record, waiting (under the block policy) until ctx is done at most.
	Submit(ctx context.Context, r audit.Record) error
	// Status returns the log's state; Err says which sinks fail, or nil.
	Status() audit.Status
	Err() error
}

// auditSubmitTimeout bounds how long an admin change waits for room for its record in a
// sink that is behind or failing (the block policy), so that an operator can always
// change the sidecar, the audit included; a record that does not fit in time is dropped
// and counted, and the admin log says so.
const auditSubmitTimeout = 2 * time.Second

// Statements is what the API needs from per-statement statistics; *statements.Stats
// implements it.
type Statements interface {
	Enabled() bool
	SetEnabled(bool)
	List(order string, limit int, withHistogram bool) []statements.Statement
	Reset()
	Max() int
	Evicted() uint64
}

// Capture is what the API needs from the workload capture; *capture.Capture implements
// it.
type Capture interface {
	Start(capture.Options) (capture.Status, error)
	Stop(ctx context.Context) (capture.Status, error)
	Status() capture.Status
}

// TraceFilter is what the API needs to narrow tracing; *tracing.Tracer implements it.
type TraceFilter interface {
	Filter() tracing.Filter
	SetFilter(tracing.Filter)
}
