package loadcheck

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tracecar/tracecar/tracing"
)

func TestFillTraceparent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range []struct {
		kind    string
		sampled bool
	}{{TraceContextSampled, true}, {TraceContextUnsampled, false}} {
		tp := newTraceparent(tt.kind)
		seen := map[string]bool{}
		for range 100 {
			fillTraceparent(rng, tp)
			tc, why := tracing.ParseTraceparent(tp)
			if why != 0 || tc.Sampled() != tt.sampled {
				t.Fatalf("%s: %q is %s, sampled %v; want a valid traceparent, sampled %v", tt.kind, tp, why, tc.Sampled(), tt.sampled)
			}
			seen[string(tp)] = true
		}
		if len(seen) != 100 {
			t.Errorf("%s: %d distinct traceparents of 100; want a fresh one per request", tt.kind, len(seen))
		}
	}
	if newTraceparent(TraceContextNone) != nil {
		t.Error("none: a traceparent; want nil")
	}
	if n := testing.AllocsPerRun(100, func() { fillTraceparent(rng, newTraceparentBuf) }); n != 0 {
		t.Errorf("fillTraceparent allocates %v times; want 0", n)
	}
}

var newTraceparentBuf = newTraceparent(TraceContextSampled)

// TestRunParentMode runs the built-in mode parent against the fake sidecar: its workers
// send sampled contexts whatever --trace-context says, the other modes send what it says,
// and follow_client_sampling is put back after the run.
func TestRunParentMode(t *testing.T) {
	api, apiURL := mustFakeAPI(t)
	before := api.state()
	clk := &fakeClock{}
	d := &fakeDriver{clk: clk, costs: map[string]time.Duration{fakeSidecar: time.Millisecond}}
	var out bytes.Buffer
	cfg := Config{Sidecar: fakeSidecar, Admin: apiURL, Modes: []string{"off", "parent"}, Rounds: 1, Ops: 20, Concurrency: 1,
		Warmup: -1, Interval: time.Hour, TraceContext: TraceContextUnsampled, Out: &out}
	if _, err := run(context.Background(), cfg, fakeEnv(d)); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !d.ctxs[TraceContextSampled] || !d.ctxs[TraceContextUnsampled] || len(d.ctxs) != 2 {
		t.Errorf("workers built with contexts %v; want sampled (parent) and unsampled (off, from TraceContext)", d.ctxs)
	}
	posted := false
	for _, p := range api.postLog() {
		posted = posted || p == "/tracecar/trace_context?follow_client_sampling=true"
	}
	if !posted {
		t.Errorf("posts %q; want follow_client_sampling=true for mode parent", api.postLog())
	}
	if got := api.state(); got != before {
		t.Errorf("state after the run %s; want it restored to %s", got, before)
	}
	api.mu.Lock()
	follow := api.follow
	api.mu.Unlock()
	if follow {
		t.Error("follow_client_sampling still on after the run; want it restored to off")
	}
}
