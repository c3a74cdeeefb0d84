package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/cqlsink"
)

// sinkSet is what buildSinks hands to the tracer.
type sinkSet struct {
	sinks      []tracing.Sink
	nodeEvents tracing.NodeEventSource
	schema     capture.SchemaSource // for the workload capture
	node       *cqlsink.Connector   // the node session they share, for the audit table too
}

// nodeSessionIdle is how long the node session stays open unused: its heartbeats would wake
// an idle sidecar and its node for ever (cqlsink.Connector.IdleClose). Sampling at 0.01
// keeps it open from about 2 op/s up (a sampled session a minute).
const nodeSessionIdle = time.Minute

// buildSinks creates the sinks that cfg asks for, and the source of the node's own trace
// events. Both talk to the node directly (never through the sidecar), connecting on first
// use. ttl gives the current record TTL. The returned closer releases the node session;
// the tracer closes the sinks themselves.
func buildSinks(ctx context.Context, cfg stackConfig, nodeAddr string, ttl func() int64, log zerolog.Logger) (sinkSet, func(context.Context) error, error) {
	conn := &cqlsink.Connector{Addr: nodeAddr, Username: cfg.NodeUsername, Password: cfg.NodePassword, TLS: cfg.NodeTLS, Logger: &log,
		IdleClose: nodeSessionIdle}
	set := sinkSet{nodeEvents: cqlsink.LazyNodeEvents(conn), schema: cqlsink.LazySchema(conn), node: conn}
	closer := func(context.Context) error { conn.Close(); return nil }
	if cfg.OTLPEndpoint != "" || tracing.EnvEndpointSet() {
		s, err := tracing.NewOTelSink(ctx, tracing.OTelOptions{
			Endpoint: cfg.OTLPEndpoint, Protocol: cfg.OTLPProtocol, Logger: log,
		})
		if err != nil {
			return set, closer, fmt.Errorf("OpenTelemetry exporter: %w", err)
		}
		set.sinks = append(set.sinks, s)
	}
	if cfg.CQLSink {
		set.sinks = append(set.sinks, cqlsink.LazyTableSink(conn, ttl))
	}
	return set, closer, nil
}
