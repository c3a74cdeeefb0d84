package main

import (
	"context"
	"io"
	"sync"

	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/internal/nodeapi"
	"github.com/tracecar/tracecar/sidecar"
)

// A stack built from its parts, in order (the embedded node, embedded.go; the tracer and
// its sinks, the admin API and the listeners, tracer.go; the audit log, auditlog.go), and
// started in a lifecycle group of its own.

// newStack builds everything cfg describes and binds every listener; nothing serves until
// the group that the stack joins runs. On failure it releases what it built.
func newStack(ctx context.Context, cfg stackConfig, reg *logs.Registry, out io.Writer) (*stack, error) {
	st := &stack{Node: cfg.Node, NodeAPI: cfg.NodeAPI, reg: reg, embedded: cfg.Node == ""}
	nodeKind := cfg.NodeKind
	if st.embedded {
		if err := st.embedNode(cfg, out); err != nil {
			return nil, st.discard(err)
		}
		nodeKind = nodeapi.KindTracecar
	}
	m := metrics.New()
	m.SetConnectionLimit(cfg.MaxConnections)
	capt, err := st.startTracer(ctx, cfg, m)
	if err != nil {
		return nil, st.discard(err)
	}
	if err := st.newAudit(cfg); err != nil {
		return nil, st.discard(err)
	}
	ac, err := st.adminConfig(cfg, nodeKind, capt)
	if err != nil {
		return nil, st.discard(err)
	}
	st.proxy = sidecar.New(st.proxyConfig(cfg, m, capt), st.tracer)
	ac.Metrics = m
	if err := st.listen(cfg, ac); err != nil {
		return nil, st.discard(err)
	}
	return st, nil
}

// startStack starts a stack in a lifecycle group of its own and returns once every
// listener is bound. Stop it with stop. (The sidecar command runs its stack in the
// command's group instead: serveSidecar.)
func startStack(ctx context.Context, cfg stackConfig, reg *logs.Registry, out io.Writer) (*stack, error) {
	st, err := newStack(ctx, cfg, reg, out)
	if err != nil {
		return nil, err
	}
	var g lifecycle.Group
	st.join(ctx, &g)
	quit := make(chan struct{})
	var once sync.Once
	st.quit = func() { once.Do(func() { close(quit) }) }
	g.Add(func() error { <-quit; return nil }, func(error) { st.quit() })
	st.done = make(chan struct{})
	go func() {
		st.err = g.Run()
		close(st.done)
	}()
	return st, nil
}
