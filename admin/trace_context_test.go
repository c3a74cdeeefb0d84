package admin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
)

func TestTraceContextEndpoint(t *testing.T) {
	tr := newFakeTracer()
	f := mustServe(t, admin.Config{Tracer: tr, TraceContextKeys: []string{"traceparent", "x-trace"}})
	steps := []struct {
		name       string
		req        request
		wantStatus int
		wantBody   string
		wantFollow bool
		wantInMsg  string
	}{
		{name: "default", req: request{method: "GET", path: "/tracecar/trace_context"},
			wantStatus: 200, wantBody: `{"follow_client_sampling":false,"keys":["traceparent","x-trace"]}`},
		{name: "on", req: request{method: "POST", path: "/tracecar/trace_context?follow_client_sampling=true"},
			wantStatus: 200, wantBody: `{"follow_client_sampling":true,"keys":["traceparent","x-trace"]}`, wantFollow: true},
		{name: "shown", req: request{method: "GET", path: "/tracecar/trace_context"},
			wantStatus: 200, wantBody: `{"follow_client_sampling":true,"keys":["traceparent","x-trace"]}`, wantFollow: true},
		{name: "not a boolean", req: request{method: "POST", path: "/tracecar/trace_context?follow_client_sampling=yes"},
			wantStatus: 400, wantFollow: true, wantInMsg: "follow_client_sampling"},
		{name: "missing", req: request{method: "POST", path: "/tracecar/trace_context"},
			wantStatus: 400, wantFollow: true, wantInMsg: "missing parameter follow_client_sampling"},
		{name: "unknown parameter with a good one", req: request{method: "POST", path: "/tracecar/trace_context?follow_client_sampling=0&keys=foo"},
			wantStatus: 400, wantFollow: true, wantInMsg: `unknown parameter "keys"`},
		{name: "given twice", req: request{method: "POST", path: "/tracecar/trace_context?follow_client_sampling=0&follow_client_sampling=1"},
			wantStatus: 400, wantFollow: true, wantInMsg: "more than once"},
		{name: "GET takes no parameter", req: request{method: "GET", path: "/tracecar/trace_context?follow_client_sampling=0"},
			wantStatus: 400, wantFollow: true},
		{name: "off, in the body", req: request{method: "POST", path: "/tracecar/trace_context", body: "follow_client_sampling=FALSE"},
			wantStatus: 200, wantBody: `{"follow_client_sampling":false,"keys":["traceparent","x-trace"]}`},
		{name: "wrong method", req: request{method: "DELETE", path: "/tracecar/trace_context"}, wantStatus: 405},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			status, body := do(t, client, f.url, st.req)
			if status != st.wantStatus {
				t.Fatalf("%v: status %d, body %q; want %d", st.req, status, body, st.wantStatus)
			}
			if st.wantBody != "" && body != st.wantBody {
				t.Errorf("%v: body %s; want %s", st.req, body, st.wantBody)
			}
			if status >= 400 {
				if e := apiError(t, status, body); !strings.Contains(e.Message, st.wantInMsg) {
					t.Errorf("%v: message %q; want it to say %q", st.req, e.Message, st.wantInMsg)
				}
			}
			if got := tr.Config().FollowClientSampling; got != st.wantFollow {
				t.Errorf("follow_client_sampling = %v; want %v", got, st.wantFollow)
			}
		})
	}
	if !strings.Contains(f.log.String(), `"what":"trace_context"`) {
		t.Errorf("no audit line for trace_context in %s", f.log.String())
	}
}

func TestSlowLogByTraceID(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	tr := newFakeTracer()
	tr.sessions = append([]tracing.Session{
		{ID: "c0000000-0000-1000-8000-000000000003", Mode: "parent", TraceID: traceID, ParentSpanID: "00f067aa0ba902b7"},
		{ID: "c0000000-0000-1000-8000-000000000004", Mode: "full", TraceID: "0af7651916cd43dd8448eb211c80319c", ParentSpanID: "b7ad6b7169203331"},
		{ID: "c0000000-0000-1000-8000-000000000005", Mode: "full", TraceID: traceID, ParentSpanID: "00f067aa0ba902b8"},
	}, tr.sessions...)
	f := mustServe(t, admin.Config{Tracer: tr})
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantIDs    string
	}{
		{"the trace's sessions", "/tracecar/slow_log?trace_id=" + traceID, 200,
			"c0000000-0000-1000-8000-000000000003 c0000000-0000-1000-8000-000000000005"},
		{"with a limit", "/tracecar/slow_log?trace_id=" + traceID + "&limit=1", 200, "c0000000-0000-1000-8000-000000000003"},
		{"no such trace", "/tracecar/slow_log?trace_id=0af7651916cd43dd8448eb211c80319d", 200, ""},
		{"upper case", "/tracecar/slow_log?trace_id=" + strings.ToUpper(traceID), 400, ""},
		{"too short", "/tracecar/slow_log?trace_id=4bf92f", 400, ""},
		{"all zeros", "/tracecar/slow_log?trace_id=" + strings.Repeat("0", 32), 400, ""},
		{"empty", "/tracecar/slow_log?trace_id=", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do(t, client, f.url, request{method: "GET", path: tt.path})
			if status != tt.wantStatus {
				t.Fatalf("GET %s: status %d, body %q; want %d", tt.path, status, body, tt.wantStatus)
			}
			if status != 200 {
				if e := apiError(t, status, body); !strings.Contains(e.Message, "trace_id") {
					t.Errorf("message %q; want it to name trace_id", e.Message)
				}
				return
			}
			var got []struct {
				ID           string `json:"session_id"`
				TraceID      string `json:"trace_id"`
				ParentSpanID string `json:"parent_span_id"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
				if s.TraceID != traceID || s.ParentSpanID == "" {
					t.Errorf("session %s: trace_id %q parent_span_id %q", s.ID, s.TraceID, s.ParentSpanID)
				}
			}
			if strings.Join(ids, " ") != tt.wantIDs {
				t.Errorf("sessions %v; want %s", ids, tt.wantIDs)
			}
		})
	}
}

func TestStatusAndMetricsShowTraceContext(t *testing.T) {
	tr := newFakeTracer()
	tr.cfg.FollowClientSampling = true
	tr.stats.TraceContextInvalid = map[string]uint64{"length": 2, "hex": 1}
	f := mustServe(t, admin.Config{Tracer: tr})
	_, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/status"})
	var st admin.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode != "parent" || st.TraceContext == nil || !st.TraceContext.FollowClientSampling ||
		strings.Join(st.TraceContext.Keys, ",") != "traceparent" || st.TraceContext.Invalid["length"] != 2 {
		t.Errorf("status mode %q trace_context %+v; want parent, following, keys [traceparent], 2 invalid for length", st.Mode, st.TraceContext)
	}
	_, metrics := do(t, client, f.url, request{method: "GET", path: "/metrics"})
	for _, want := range []string{
		`tracecar_tracing_mode{mode="parent"} 1`,
		"tracecar_follow_client_sampling 1",
		`tracecar_trace_context_invalid_total{reason="length"} 2`,
		`tracecar_trace_context_invalid_total{reason="hex"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
