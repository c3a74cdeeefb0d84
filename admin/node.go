package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/tracing"
)

// NodeLoggerPrefix marks a logger of the node in /system/logger paths: node:NAME.
const NodeLoggerPrefix = "node:"

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

// nodeTimeout bounds one call to the node's API.
const nodeTimeout = 10 * time.Second

func nodeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), nodeTimeout)
}

// nodeError maps a failure of the node's API: a request the node judged wrong is a 400
// with its message, anything else (no answer, a 5xx) a 502.
func nodeError(what string, err error) *Error {
	var r interface{ Rejected() bool }
	if errors.As(err, &r) && r.Rejected() {
		return errorf(http.StatusBadRequest, "%s: the node refused: %v", what, err)
	}
	return errorf(http.StatusBadGateway, "%s: the node's API failed: %v", what, err)
}

// applyToNode makes a change on the node after the sidecar's change succeeded. When the
// node's change fails it rolls the sidecar's change back with undo, and returns a 502 (or
// the node's 400) whose outcomes say what happened on each side.
func (s *core) applyToNode(what string, apply func(context.Context) error, undo func(tracing.Config) tracing.Config) error {
	ctx, cancel := nodeContext()
	defer cancel()
	err := apply(ctx)
	if err == nil {
		return nil
	}
	e := nodeError(what, err)
	if e.Code == http.StatusBadRequest {
		e.Code = http.StatusBadGateway // the sidecar took it, so the request itself was fine
	}
	sidecar := "applied, then rolled back"
	if _, _, rerr := s.updateConfig(undo); rerr != nil {
		sidecar = "applied; the rollback failed: " + rerr.Error()
	}
	e.Message += "; the sidecar's change was rolled back, nothing is applied"
	e.Outcomes = map[string]string{"sidecar": sidecar, "node": "failed: " + err.Error()}
	s.log.Warn().Str("what", what).Str("sidecar", sidecar).AnErr("node", err).Msg("node change failed")
	return e
}

// nodeName returns the node's logger name of a node:NAME path parameter.
func nodeName(name string) (string, bool) {
	return strings.CutPrefix(name, NodeLoggerPrefix)
}

// noNode is the error for a node: logger on a sidecar without a node API.
func noNode(name string) error {
	return errorf(http.StatusBadRequest, "unknown logger %q: the sidecar has no node API (start it with --node-api URL --node-kind KIND)", name)
}

// nodeLoggers lists the node's loggers as node:NAME, or nothing (logged) when the node's
// API does not answer, so that the sidecar's own loggers stay listed.
func (s *core) nodeLoggers() []string {
	if s.node == nil {
		return nil
	}
	ctx, cancel := nodeContext()
	defer cancel()
	names, err := s.node.Loggers(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("list the node's loggers")
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = NodeLoggerPrefix + n
	}
	return out
}

// getNodeLogger serves GET /system/logger/node:NAME.
func (s *scyllaAPI) getNodeLogger(ctx *fasthttp.RequestCtx, name, nodeLogger string) error {
	if s.node == nil {
		return noNode(name)
	}
	c, cancel := nodeContext()
	defer cancel()
	l, err := s.node.Level(c, nodeLogger)
	if err != nil {
		return nodeError("logger "+name, err)
	}
	return writeJSON(ctx, adminapi.Level(l))
}

// setNodeLogger serves POST /system/logger/node:NAME?level=L.
func (s *scyllaAPI) setNodeLogger(ctx *fasthttp.RequestCtx, name, nodeLogger string) error {
	if s.node == nil {
		return noNode(name)
	}
	level, d, err := requiredLevel(ctx)
	if err != nil {
		return err
	}
	return s.toggle(ctx, "POST /system/logger/"+name, d, func() ([]TimerSetting, bool, error) {
		c, cancel := nodeContext()
		defer cancel()
		old, err := s.node.Level(c, nodeLogger)
		if err != nil {
			return nil, false, nodeError("logger "+name, err)
		}
		if err := s.node.SetLevel(c, nodeLogger, level); err != nil {
			return nil, false, nodeError("logger "+name, err)
		}
		s.audit(ctx, "logger "+name).Str("node", s.node.Kind()).Str("old", old).Str("new", level).Msg("admin change")
		return []TimerSetting{{Setting: settingLoggerPrefix + name, RevertTo: old, SetTo: level}}, costlyLevel(level), nil
	})
}

// getNodeProbability serves GET /tracecar/node/trace_probability: the node's own
// probability, a bare number.
func (s *scyllaAPI) getNodeProbability(ctx *fasthttp.RequestCtx, _ string) error {
	c, cancel := nodeContext()
	defer cancel()
	p, err := s.node.TraceProbability(c)
	if err != nil {
		return nodeError("node trace_probability", err)
	}
	writeProbability(ctx, p)
	return nil
}

// setNodeProbability serves POST /tracecar/node/trace_probability?probability=P: the
// node's own probability only, the sidecar's stays.
func (s *scyllaAPI) setNodeProbability(ctx *fasthttp.RequestCtx, _ string) error {
	prob, _, err := probabilityParam(ctx, false)
	if err != nil {
		return err
	}
	c, cancel := nodeContext()
	defer cancel()
	if err := s.node.SetTraceProbability(c, prob); err != nil {
		return nodeError("node trace_probability", err)
	}
	s.audit(ctx, "node trace_probability").Str("node", s.node.Kind()).Float64("new", prob).Msg("admin change")
	return nil
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
