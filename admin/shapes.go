package admin

import (
	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/guardrail"
	"github.com/tracecar/tracecar/tracing/statements"
)

// The engine's values as the API's shapes: every body the API writes is a type of package
// adminapi (writeJSON takes only those), and these convert the engine's state into them.
// Where the two types have the same fields, in the same order, a Go conversion does it, so
// that a field added to one and not the other fails to compile here.

// sessionOf returns a recorded session as the API shows it.
func sessionOf(s tracing.Session) adminapi.Session {
	events := make([]adminapi.Event, len(s.Events))
	for i, e := range s.Events {
		events[i] = adminapi.Event(e)
	}
	if s.Events == nil {
		events = nil
	}
	return adminapi.Session{ID: s.ID, StartedAt: s.StartedAt, DurationUS: s.DurationUS, Client: s.Client,
		Username: s.Username, Coordinator: s.Coordinator, Command: s.Command, Request: s.Request, Mode: s.Mode,
		Parameters: s.Parameters, Events: events, Error: s.Error,
		TraceID: s.TraceID, ParentSpanID: s.ParentSpanID, TraceState: s.TraceState}
}

// sessionsOf returns sessions as the API shows them.
func sessionsOf(ss []tracing.Session) adminapi.Sessions {
	out := make(adminapi.Sessions, len(ss))
	for i, s := range ss {
		out[i] = sessionOf(s)
	}
	if ss == nil {
		out = nil
	}
	return out
}

// statementsOf returns statement statistics as the API shows them.
func statementsOf(sts []statements.Statement) adminapi.Statements {
	if sts == nil {
		return nil
	}
	out := make(adminapi.Statements, len(sts))
	for i, st := range sts {
		out[i] = adminapi.Statement(st)
	}
	return out
}

// guardrailOf returns the guardrail's state as the API shows it.
func guardrailOf(g guardrail.Status) adminapi.Guardrail {
	return adminapi.Guardrail{State: g.State, Detail: g.Detail, Budget: (*adminapi.GuardrailBudget)(g.Budget),
		Level: g.Level, UserLevel: g.UserLevel, LastAction: (*adminapi.GuardrailAction)(g.LastAction),
		Reason: g.Reason, Figures: (*adminapi.GuardrailFigures)(g.Figures), RestoreDue: g.RestoreDue, Windows: g.Windows}
}

// captureOf returns the capture's state as the API shows it.
func captureOf(c capture.Status) adminapi.Capture {
	return adminapi.Capture{State: c.State, Dir: c.Dir, File: c.File, Values: c.Values, StartedAt: c.StartedAt,
		DurationMS: c.DurationMS, MaxBytes: c.MaxBytes, Records: c.Records, Bytes: c.Bytes, Dropped: c.Dropped,
		Warning: c.Warning, Last: (*adminapi.CaptureResult)(c.Last)}
}

// auditOf returns the audit log's state as the API shows it.
func auditOf(a audit.Status) adminapi.Audit {
	sinks := make([]adminapi.AuditSink, len(a.Sinks))
	for i, s := range a.Sinks {
		sinks[i] = adminapi.AuditSink(s)
	}
	if a.Sinks == nil {
		sinks = nil
	}
	return adminapi.Audit{AuditSettings: adminapi.AuditSettings(a.View), Policy: a.Policy, Records: a.Records,
		Dropped: a.Dropped, Sinks: sinks, Error: a.Error}
}

// filterOf returns a trace filter as the API shows it.
func filterOf(f tracing.Filter) adminapi.TraceFilter {
	return adminapi.TraceFilter{Keyspace: f.Keyspace, Table: f.Table, User: f.User, Client: f.Client,
		Statement: f.Statement, Opcode: f.Opcode}
}

func slowQueryOf(c tracing.Config) adminapi.SlowQuery {
	return adminapi.SlowQuery{Enable: c.Enable, TTL: c.TTLSeconds, Threshold: c.ThresholdMicros, Fast: c.Fast}
}
