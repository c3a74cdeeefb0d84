package guardrail

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/tracing"
)

// TestSteppedDownGauge checks that tracecar_guardrail_stepped_down is 1 while a step holds
// tracing down, and 0 before it and once the user's own change is what runs.
func TestSteppedDownGauge(t *testing.T) {
	tr := tracing.New(tracing.Options{})
	if err := tr.SetConfig(fullSampled()); err != nil {
		t.Fatal(err)
	}
	f := newFeed()
	c := NewController(Config{Tracer: tr, Source: fakeSource{f}, Budget: Budget{CPUPercent: 1, Window: time.Second},
		Now: func() time.Time { return f.now }})
	g := c.StateCollector()
	if v := gaugeValue(t, g); v != 0 {
		t.Fatalf("before any step: %v; want 0", v)
	}
	c.Tick()
	f.window(time.Second, 1000, 4*time.Microsecond, 0, 0, 0)
	if a := c.Tick(); a.Kind != "step" {
		t.Fatalf("got %+v; want a step", a)
	}
	if v := gaugeValue(t, g); v != 1 {
		t.Fatalf("stepped down: %v; want 1", v)
	}
	if err := c.User(tr).UpdateConfig(func(c tracing.Config) tracing.Config { return tracing.DefaultConfig() }); err != nil {
		t.Fatal(err)
	}
	if v := gaugeValue(t, g); v != 0 {
		t.Fatalf("after the user's change: %v; want 0", v)
	}
}

func gaugeValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	return mfs[0].GetMetric()[0].GetGauge().GetValue()
}
