package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tracecar/tracecar/tracing"
)

// Calls to the node's own management API (Config.Node): their timeout and errors, a change
// made on the node after the sidecar's and rolled back when the node fails, and the node's
// loggers named node:NAME. The node's endpoints are system.go's (its loggers),
// storage_service.go's (the changes applied to it too) and node_probability.go's.

// NodeLoggerPrefix marks a logger of the node in /system/logger paths: node:NAME.
const NodeLoggerPrefix = "node:"

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
