package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/audit/auditsink"
	"github.com/tracecar/tracecar/internal/logs"
)

// The stack's audit log: the Log that the --audit-* flags (audit.go) build, with its
// sinks, and its closing once the proxy has drained.

// newAudit builds the audit log and its sinks. Its closer, which writes what is queued and
// syncs the sinks, joins the front of the stack's closers: it runs once the proxy has
// drained, so that the last requests' records are in.
func (st *stack) newAudit(cfg stackConfig) error {
	a := cfg.Audit
	var sinks []audit.Sink
	if a.Dir != "" {
		f, err := audit.NewFile(audit.FileConfig{Dir: a.Dir, MaxSize: int64(a.MaxSize.n), MaxFiles: a.MaxFiles})
		if err != nil {
			return fmt.Errorf("--audit-dir %s: %w", a.Dir, err)
		}
		sinks = append(sinks, f)
	}
	if a.Syslog != "" {
		sinks = append(sinks, audit.NewSyslog(a.syslog))
	}
	if a.Table {
		// The node session the tracing sinks share; the audit log is closed before it.
		sinks = append(sinks, auditsink.NewTable(st.nodeSession))
	}
	st.audit = audit.Open(audit.Config{Policy: a.policy, Queue: a.Queue, Sync: a.Fsync, Node: st.Node,
		Sinks: sinks, Logger: st.reg.Logger(logs.Admin)})
	st.audit.Set(a.settings)
	st.closers = append([]func(context.Context) error{st.closeAudit}, st.closers...)
	return nil
}

// auditCloseTimeout bounds how long the stop waits for an audit sink that still fails,
// so that the closers after it (the tracer's sinks, the node session) keep their time.
const auditCloseTimeout = 5 * time.Second

// closeAudit writes what the audit log holds and syncs its sinks; a sink still failing
// after auditCloseTimeout loses what it holds, counted as dropped and said in the error.
func (st *stack) closeAudit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, auditCloseTimeout)
	defer cancel()
	err := st.audit.Close(ctx)
	if n := st.audit.Dropped(); n > 0 {
		st.reg.Logger(logs.Admin).Error().Uint64("dropped", n).Err(st.audit.Err()).
			Msg("audit log closed: records were dropped since start")
	}
	return err
}
