package admin

import (
	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/tracing"
)

// TraceContext is the JSON of GET and POST /tracecar/trace_context.
type TraceContext = adminapi.TraceContext

// TraceContextStatus is the trace context part of /tracecar/status.
type TraceContextStatus = adminapi.TraceContextStatus

// getTraceContext serves GET /tracecar/trace_context.
func (s *tracingAPI) getTraceContext(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return writeJSON(ctx, TraceContext{FollowClientSampling: s.tr.Config().FollowClientSampling, Keys: s.ctxKeys})
}

// setTraceContext serves POST /tracecar/trace_context?follow_client_sampling=true|false and
// answers the settings now in force.
func (s *tracingAPI) setTraceContext(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "follow_client_sampling")
	if err != nil {
		return err
	}
	follow, ok, err := p.boolean("follow_client_sampling")
	if err != nil {
		return err
	}
	if !ok {
		return missing("follow_client_sampling", "true, false, 1 or 0")
	}
	old, cur, err := s.updateConfig(func(c tracing.Config) tracing.Config {
		c.FollowClientSampling = follow
		return c
	})
	if err != nil {
		return err
	}
	s.audit(ctx, "trace_context").
		Bool("old", old.FollowClientSampling).Bool("new", cur.FollowClientSampling).
		Str("mode", cur.Mode()).Msg("admin change")
	return writeJSON(ctx, TraceContext{FollowClientSampling: cur.FollowClientSampling, Keys: s.ctxKeys})
}

// traceIDParam reads the trace_id parameter of /tracecar/slow_log: 32 lower-case hex
// digits, not all zero, as a W3C trace id is written.
func traceIDParam(v []byte) (string, error) {
	want := "a W3C trace id: 32 lower-case hex digits, not all zero"
	if len(v) != 32 {
		return "", badParam("trace_id", string(v), want)
	}
	zero := true
	for _, c := range v {
		switch {
		case c == '0':
		case c >= '1' && c <= '9' || c >= 'a' && c <= 'f':
			zero = false
		default:
			return "", badParam("trace_id", string(v), want)
		}
	}
	if zero {
		return "", badParam("trace_id", string(v), want)
	}
	return string(v), nil
}
