package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/tracing"
)

// getSession serves GET /tracecar/sessions/{id}.
func (s *tracingAPI) getSession(ctx *fasthttp.RequestCtx, id string) error {
	sess, ok := s.tr.Session(id)
	if !ok {
		return errorf(http.StatusNotFound, "no session %q: it was never recorded or has left the ring", id)
	}
	return writeJSON(ctx, sessionOf(sess))
}

// Status is the JSON of GET /tracecar/status.
type Status = adminapi.Status

// Counters are the request counters in Status.
type Counters = adminapi.Counters

// getStatus serves GET /tracecar/status.
func (s *opsAPI) getStatus(ctx *fasthttp.RequestCtx, _ string) error {
	st := Status{
		SinkDropped:   map[string]uint64{},
		SinkErrors:    map[string]uint64{},
		Guardrail:     adminapi.Guardrail{State: "none"},
		Loggers:       map[string]string{},
		UptimeSeconds: int64(time.Since(s.started) / time.Second),
		Timers:        s.Timers(),
	}
	if s.tr != nil {
		cfg := s.tr.Config()
		stats := s.tr.Stats()
		sq := slowQueryOf(cfg)
		st.Mode, st.SlowQuery, st.TraceProbability = cfg.Mode(), &sq, cfg.Probability
		st.Counters = Counters{Requests: stats.Requests, Traced: stats.Traced, SlowSessions: stats.SlowSessions}
		for k, v := range stats.Dropped {
			st.SinkDropped[k] = v
		}
		for k, v := range stats.Errors {
			st.SinkErrors[k] = v
		}
		if s.ctxKeys != nil {
			st.TraceContext = &TraceContextStatus{
				TraceContext: TraceContext{FollowClientSampling: cfg.FollowClientSampling, Keys: s.ctxKeys},
				Invalid:      stats.TraceContextInvalid,
			}
		}
	}
	if s.guardrail != nil {
		st.Guardrail = guardrailOf(s.guardrail())
	}
	if s.capture != nil {
		cs := captureOf(s.capture.Status())
		st.Capture = &cs
	}
	if s.process != nil {
		p := s.process()
		if p.Build.Version == "" {
			p.Build = build
		}
		st.Process = &p
	}
	if s.shards != nil {
		st.Shards = s.shards()
	}
	if s.nodeLogin != nil {
		l := s.nodeLogin()
		st.NodeLogin = &l
	}
	if s.auditLog != nil {
		a := auditOf(s.auditLog.Status())
		st.Audit = &a
	}
	for _, n := range s.logs.Names() {
		if l, err := s.logs.Level(n); err == nil {
			st.Loggers[n] = l
		}
	}
	return writeJSON(ctx, st)
}

// getHealthz serves GET /healthz: the process serves HTTP. It needs no token.
func (s *opsAPI) getHealthz(ctx *fasthttp.RequestCtx, _ string) error {
	return writeJSON(ctx, adminapi.Health{Status: "ok"})
}

// readyTimeout bounds the Ready check of /readyz.
const readyTimeout = 2 * time.Second

// getReadyz serves GET /readyz: 200 when the Ready check passes, else 503.
func (s *opsAPI) getReadyz(ctx *fasthttp.RequestCtx, _ string) error {
	if s.ready != nil {
		c, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		if err := s.ready(c); err != nil {
			return errorf(http.StatusServiceUnavailable, "not ready: %v", err)
		}
	}
	if s.auditLog != nil {
		// A failing audit sink is never silent: its requests wait (block) or its records
		// are dropped (drop), and either is a reason to take the sidecar out of service.
		if err := s.auditLog.Err(); err != nil {
			return errorf(http.StatusServiceUnavailable, "not ready: %v", err)
		}
	}
	return writeJSON(ctx, adminapi.Health{Status: "ready"})
}

// ConfigOnly adapts a configuration that has no sessions, such as the embedded node's
// trace probability, to Tracer: SlowLog is empty, Session finds nothing and Stats reports
// only the mode. get and set must be safe for concurrent use. A Server given a ConfigOnly
// serves trace_probability and GET slow_query, answers POST slow_query with 501 Not
// Implemented, and has no /tracecar/slow_log or /tracecar/sessions.
func ConfigOnly(get func() tracing.Config, set func(tracing.Config) error) Tracer {
	return configOnly{get, set}
}

type configOnly struct {
	get func() tracing.Config
	set func(tracing.Config) error
}

func (c configOnly) Config() tracing.Config             { return c.get() }
func (c configOnly) SetConfig(cfg tracing.Config) error { return c.set(cfg) }
func (configOnly) SlowLog(int) []tracing.Session        { return nil }
func (configOnly) Session(string) (tracing.Session, bool) {
	return tracing.Session{}, false
}
func (c configOnly) Stats() tracing.Stats { return tracing.Stats{Mode: c.get().Mode()} }

// slowQueryNotApplied answers a change of slow_query on a server that cannot apply it.
func (s *scyllaAPI) slowQueryNotApplied(ctx *fasthttp.RequestCtx, _ string) error {
	return errorf(http.StatusNotImplemented, "slow-query logging is not implemented here; only trace_probability is applied. Set slow_query on the sidecar's admin API")
}
