package guardrail

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/tracing"
)

// feed builds cumulative samples window by window.
type feed struct {
	s   Sample
	now time.Time
	// tracing is the CPU per request of the work tracing adds, counted by a Meter; zero
	// leaves it uncounted.
	tracing time.Duration
}

func newFeed() *feed {
	return &feed{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		s: Sample{CPUOK: true, Added: Histogram{Bounds: AddedBounds, Counts: make([]uint64, len(AddedBounds)+1)}}}
}

// window advances the clock by d and adds requests costing cpuPerReq each, n added
// latencies of added each, and drops.
func (f *feed) window(d time.Duration, requests uint64, cpuPerReq time.Duration, n uint64, added time.Duration, drops uint64) (time.Time, Sample) {
	f.now = f.now.Add(d)
	f.s.Requests += requests
	f.s.CPU += cpuPerReq * time.Duration(requests)
	if f.tracing > 0 {
		f.s.TracingCPU += f.tracing * time.Duration(requests)
		f.s.TracingOps += requests / 100
		f.s.TracingCPUOK = true
	}
	f.s.Dropped += drops
	counts := append([]uint64(nil), f.s.Added.Counts...)
	i := 0
	for i < len(AddedBounds) && added > AddedBounds[i] {
		i++
	}
	counts[i] += n
	f.s.Added = Histogram{Bounds: AddedBounds, Counts: counts}
	return f.now, f.s
}

func fullSampled() tracing.Config {
	c := tracing.DefaultConfig()
	c.Enable, c.Probability = true, 0.5
	return c
}

func TestStepsDownOneLevelPerWindow(t *testing.T) {
	g := NewGuard(Budget{CPUPercent: 1, Window: time.Second, Cooldown: time.Minute}, fullSampled())
	f := newFeed()
	f.tracing = 500 * time.Nanosecond
	cur := fullSampled()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	if a := g.Evaluate(now, s, cur); a.Kind != "" {
		t.Fatalf("first sample: got action %+v; want none", a)
	}
	// 4 µs of CPU per request, of which tracing's counted work is 0.5 µs: 12.5% at every
	// level, above 1%.
	var got []string
	for range 5 {
		now, s = f.window(time.Second, 1000, 4*time.Microsecond, 0, 0, 0)
		a := g.Evaluate(now, s, cur)
		if a.Kind == "" {
			continue
		}
		if a.Kind != "step" || a.Reason != "cpu" || !strings.Contains(a.Detail, "budget cpu<=1%") {
			t.Fatalf("action %+v: want a cpu step with the budget in its detail", a)
		}
		got = append(got, a.From+">"+a.To)
		cur = a.Config
	}
	want := "full+sampled>full fast>off"
	if strings.Join(got, " ") != "full+sampled>full full>fast fast>off" {
		t.Fatalf("steps %v; want full+sampled>full, full>fast, fast>off (%s)", got, want)
	}
	if cur.Enable || cur.Probability != 0 {
		t.Fatalf("final config %+v; want off", cur)
	}
	st := g.Status(cur)
	if st.State != "stepped_down" || st.Level != "off" || st.UserLevel != "full+sampled" || st.RestoreDue != nil {
		t.Fatalf("status %+v; want stepped_down from full+sampled to off, no restore due", st)
	}
}

func TestAddedLatencyAndDrops(t *testing.T) {
	tests := []struct {
		name   string
		budget Budget
		n      uint64
		added  time.Duration
		drops  uint64
		want   string
	}{
		{"p99 over budget", Budget{AddedP99: 100 * time.Microsecond}, 100, 400 * time.Microsecond, 0, "added_p99"},
		{"p99 within budget", Budget{AddedP99: time.Millisecond}, 100, 400 * time.Microsecond, 0, ""},
		{"too few samples to judge", Budget{AddedP99: time.Microsecond}, MinLatencySamples - 1, 400 * time.Microsecond, 0, ""},
		{"drops over budget", Budget{DropsPerSec: 5}, 0, 0, 20, "drops"},
		{"drops within budget", Budget{DropsPerSec: 50}, 0, 0, 20, ""},
		{"both", Budget{AddedP99: time.Microsecond, DropsPerSec: 1}, 50, 40 * time.Microsecond, 20, "added_p99+drops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.budget.Window = 2 * time.Second
			g := NewGuard(tt.budget, fullSampled())
			f := newFeed()
			now, s := f.window(0, 0, 0, 0, 0, 0)
			g.Evaluate(now, s, fullSampled())
			now, s = f.window(2*time.Second, 500, 0, tt.n, tt.added, tt.drops)
			a := g.Evaluate(now, s, fullSampled())
			if a.Reason != tt.want {
				t.Fatalf("reason %q (detail %s); want %q", a.Reason, a.Detail, tt.want)
			}
			if tt.drops > 0 && g.figures.DropsPerSec != float64(tt.drops)/2 {
				t.Fatalf("drops %v/s; want %v/s", g.figures.DropsPerSec, float64(tt.drops)/2)
			}
		})
	}
}

func TestCPUBaseline(t *testing.T) {
	g := NewGuard(Budget{CPUPercent: 20}, tracing.DefaultConfig())
	f := newFeed()
	off, full := tracing.DefaultConfig(), tracing.DefaultConfig()
	full.Enable = true
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, off)
	for range MinOffWindows {
		now, s = f.window(10*time.Second, 1000, 4*time.Microsecond, 0, 0, 0)
		g.Evaluate(now, s, off) // the baseline: 4 µs per request with tracing off
	}
	if g.figures.CPUMethod != "measured" || g.figures.CPUPercent != 0 {
		t.Fatalf("off window figures %+v; want a 0%% baseline", g.figures)
	}
	g.UserChanged(full)
	now, s = f.window(time.Millisecond, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, full)
	now, s = f.window(10*time.Second, 1000, 4400*time.Nanosecond, 0, 0, 0) // +10%: within budget
	if a := g.Evaluate(now, s, full); a.Kind != "" || g.figures.CPUMethod != "measured" || !strings.Contains(g.figures.CPUFrom, "against 2 windows with tracing off") {
		t.Fatalf("at +10%%: action %+v, figures %+v; want none, measured against the off window", a, g.figures)
	}
	now, s = f.window(10*time.Second, 1000, 5*time.Microsecond, 0, 0, 0) // 20% of 5 µs is tracing's: at budget, not over
	if a := g.Evaluate(now, s, full); a.Kind != "" {
		t.Fatalf("at the budget: action %+v; want none", a)
	}
	now, s = f.window(10*time.Second, 1000, 6*time.Microsecond, 0, 0, 0) // 33%
	if a := g.Evaluate(now, s, full); a.Kind != "step" || a.To != "fast" {
		t.Fatalf("at 33%%: action %+v; want a step to fast", a)
	}
}

func TestRestoreAfterCooldownWithHysteresis(t *testing.T) {
	b := Budget{DropsPerSec: 10, Window: time.Second, Cooldown: 5 * time.Second, Restore: true}
	g := NewGuard(b, fullSampled())
	f := newFeed()
	cur := fullSampled()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, cur)
	now, s = f.window(time.Second, 100, 0, 0, 0, 50)
	a := g.Evaluate(now, s, cur)
	if a.Kind != "step" {
		t.Fatalf("got %+v; want a step", a)
	}
	stepAt := now
	cur = a.Config
	if st := g.Status(cur); st.RestoreDue == nil || !st.RestoreDue.Equal(stepAt.Add(5*time.Second)) {
		t.Fatalf("status %+v; want a restore due 5s after the step", st)
	}
	// Recovered figures, but within the cooldown: nothing.
	for range 3 {
		now, s = f.window(time.Second, 100, 0, 0, 0, 0)
		if a := g.Evaluate(now, s, cur); a.Kind != "" {
			t.Fatalf("within the cooldown: got %+v; want nothing", a)
		}
	}
	// After the cooldown, 7/s is under the budget but over half of it: no restore, no step.
	for range 3 {
		now, s = f.window(time.Second, 100, 0, 0, 0, 7)
		if a := g.Evaluate(now, s, cur); a.Kind != "" {
			t.Fatalf("at 70%% of the budget: got %+v; want nothing (hysteresis)", a)
		}
	}
	now, s = f.window(time.Second, 100, 0, 0, 0, 4)
	a = g.Evaluate(now, s, cur)
	if a.Kind != "restore" || a.Config != fullSampled() || a.Reason != "recovered" {
		t.Fatalf("got %+v; want a restore of full with probability 0.5", a)
	}
	if st := g.Status(a.Config); st.State != "ok" || st.LastAction == nil || st.LastAction.Kind != "restore" {
		t.Fatalf("status %+v; want ok after a restore", st)
	}
}

func TestUserChangeDuringCooldownWins(t *testing.T) {
	b := Budget{DropsPerSec: 10, Window: time.Second, Cooldown: 3 * time.Second, Restore: true}
	g := NewGuard(b, fullSampled())
	f := newFeed()
	cur := fullSampled()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, cur)
	now, s = f.window(time.Second, 100, 0, 0, 0, 50)
	cur = g.Evaluate(now, s, cur).Config
	user := tracing.DefaultConfig()
	user.Enable, user.Fast = true, true
	g.UserChanged(user)
	cur = user
	for range 10 {
		now, s = f.window(time.Second, 100, 0, 0, 0, 0)
		if a := g.Evaluate(now, s, cur); a.Kind != "" {
			t.Fatalf("after the user's change: got %+v; want nothing (the user's fast mode stays)", a)
		}
	}
	if st := g.Status(cur); st.State != "ok" || st.RestoreDue != nil {
		t.Fatalf("status %+v; want ok without a restore due", st)
	}
}

func TestNoBudgetNoAction(t *testing.T) {
	g := NewGuard(Budget{}, fullSampled())
	f := newFeed()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, fullSampled())
	now, s = f.window(time.Second, 1000, time.Millisecond, 1000, time.Second, 1000)
	if a := g.Evaluate(now, s, fullSampled()); a.Kind != "" {
		t.Fatalf("got %+v; want nothing without a budget", a)
	}
	if st := g.Status(fullSampled()); st.State != "none" {
		t.Fatalf("state %q; want none", st.State)
	}
}

func TestBudgetValidate(t *testing.T) {
	tests := []struct {
		name string
		b    Budget
		want string
	}{
		{"ok", Budget{AddedP99: time.Millisecond, CPUPercent: 5, DropsPerSec: 1, Window: time.Second}, ""},
		{"cpu over 100", Budget{CPUPercent: 101}, "cpu"},
		{"negative drops", Budget{DropsPerSec: -1}, "drops"},
		{"tiny window", Budget{Window: time.Millisecond}, "window"},
		{"negative cooldown", Budget{Cooldown: -time.Second}, "cooldown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidBudget) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an ErrInvalidBudget naming %s", err, tt.want)
			}
		})
	}
}

func TestHistogramQuantile(t *testing.T) {
	var a AddedLatency
	for range 98 {
		a.Observe(7 * time.Microsecond) // (5, 10] µs
	}
	a.Observe(300 * time.Microsecond) // (250, 500] µs
	a.Observe(time.Second)            // above every bound
	h := a.Histogram()
	if got := h.Quantile(0.5); got <= 5*time.Microsecond || got > 10*time.Microsecond {
		t.Fatalf("p50 %v; want within (5µs, 10µs]", got)
	}
	if got := h.Quantile(0.99); got <= 250*time.Microsecond || got > 500*time.Microsecond {
		t.Fatalf("p99 %v; want within (250µs, 500µs]", got)
	}
	if got := h.Quantile(1); got != 100*time.Millisecond {
		t.Fatalf("max %v; want the last bound", got)
	}
	if got := h.Sub(h).Total(); got != 0 {
		t.Fatalf("h-h has %d; want 0", got)
	}
}

// fakeSource returns the feed's current sample.
type fakeSource struct{ f *feed }

func (s fakeSource) Sample() Sample { return s.f.s }

func TestControllerAppliesStepsLogsAndCounts(t *testing.T) {
	tr := tracing.New(tracing.Options{})
	if err := tr.SetConfig(fullSampled()); err != nil {
		t.Fatal(err)
	}
	f := newFeed()
	var logBuf bytes.Buffer
	log := zerolog.New(&logBuf)
	c := NewController(Config{Tracer: tr, Source: fakeSource{f}, Budget: Budget{CPUPercent: 1, Window: time.Second, Restore: true, Cooldown: 2 * time.Second},
		Logger: &log, Now: func() time.Time { return f.now }})
	user := c.User(tr)
	c.Tick() // starts the window
	for range 3 {
		f.window(time.Second, 1000, 4*time.Microsecond, 0, 0, 0)
		if a := c.Tick(); a.Kind != "step" {
			t.Fatalf("got %+v; want a step", a)
		}
	}
	if got := tr.Config(); got.Enable || got.Probability != 0 {
		t.Fatalf("tracer runs %+v; want off", got)
	}
	for _, l := range [][2]string{{"full+sampled", "full"}, {"full", "fast"}, {"fast", "off"}} {
		if n := counterValue(t, c, l[0], l[1], "cpu"); n != 1 {
			t.Fatalf("steps_total{from=%s,to=%s} = %v; want 1", l[0], l[1], n)
		}
	}
	lines := strings.Split(strings.TrimSpace(logBuf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("log has %d lines; want one per step:\n%s", len(lines), logBuf.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["level"] != "warn" || first["from"] != "full+sampled" || first["budget"] != "cpu<=1%" || first["cpu_pct"] == nil {
		t.Fatalf("first log line %v; want a warning with the figures and the budget", first)
	}
	st := c.Status()
	if st.State != "stepped_down" || st.LastAction == nil || st.LastAction.To != "off" || st.RestoreDue == nil || st.Figures == nil {
		t.Fatalf("status %+v; want stepped_down to off with a restore due and figures", st)
	}
	// A user's change during the cooldown is kept: no restore over it.
	if err := user.UpdateConfig(func(c tracing.Config) tracing.Config { c.Enable, c.Fast = true, true; return c }); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		f.window(time.Second, 0, 0, 0, 0, 0)
		if a := c.Tick(); a.Kind != "" {
			t.Fatalf("after a user change: got %+v; want nothing", a)
		}
	}
	if got := tr.Config(); got.Mode() != "fast" {
		t.Fatalf("tracer runs %s; want the user's fast", got.Mode())
	}
}

func TestControllerSetBudgetValidates(t *testing.T) {
	tr := tracing.New(tracing.Options{})
	f := newFeed()
	c := NewController(Config{Tracer: tr, Source: fakeSource{f}, Now: func() time.Time { return f.now }})
	if err := c.SetBudget(Budget{CPUPercent: 500}); !errors.Is(err, ErrInvalidBudget) {
		t.Fatalf("got %v; want ErrInvalidBudget", err)
	}
	if c.Budget().Enabled() {
		t.Fatal("an invalid budget was installed")
	}
	if err := c.SetBudget(Budget{CPUPercent: 5}); err != nil {
		t.Fatal(err)
	}
	if got := c.Budget(); got.CPUPercent != 5 || got.Window != DefaultWindow {
		t.Fatalf("budget %+v; want cpu 5 with the default window", got)
	}
}

func counterValue(t *testing.T, c *Controller, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.steps.WithLabelValues(labels...).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestIdleWindowCPUIsNotJudged(t *testing.T) {
	g := NewGuard(Budget{CPUPercent: 0.0001, Window: time.Second}, fullSampled())
	f := newFeed()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, fullSampled())
	now, s = f.window(time.Second, MinCPURequests-1, time.Millisecond, 0, 0, 0)
	if a := g.Evaluate(now, s, fullSampled()); a.Kind != "" || g.figures.CPUPercent != -1 {
		t.Fatalf("%d requests: action %+v, cpu %v; want no judgement", MinCPURequests-1, a, g.figures.CPUPercent)
	}
}

func TestSliverOfAWindowIsNotJudged(t *testing.T) {
	g := NewGuard(Budget{CPUPercent: 1, Window: time.Second}, fullSampled())
	f := newFeed()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, fullSampled())
	now, s = f.window(10*time.Millisecond, 0, 0, 0, 0, 0) // no requests yet: judged, it would count as a window
	if a := g.Evaluate(now, s, fullSampled()); a.Kind != "" || g.windows != 0 {
		t.Fatalf("a 10ms sample: action %+v, %d windows; want it ignored", a, g.windows)
	}
	now, s = f.window(time.Second, 1000, 4*time.Microsecond, 0, 0, 0)
	if a := g.Evaluate(now, s, fullSampled()); a.Kind != "step" || g.windows != 1 || g.figures.Requests != 1000 {
		t.Fatalf("action %+v, %d windows, figures %+v; want a step in the first window, over all its requests", a, g.windows, g.figures)
	}
}

// TestParentSamplingStepsWithProbability checks that parent-based sampling (following the
// client's sampled flag) is stepped down in the first step, together with the probability,
// and that the levels name it.
func TestParentSamplingStepsWithProbability(t *testing.T) {
	tests := []struct {
		name  string
		cfg   tracing.Config
		steps string
	}{
		{"parent alone", tracing.Config{FollowClientSampling: true}, "parent>off"},
		{"full and parent", tracing.Config{Enable: true, FollowClientSampling: true}, "full+parent>full full>fast fast>off"},
		{"fast, sampled and parent", tracing.Config{Enable: true, Fast: true, Probability: 0.1, FollowClientSampling: true},
			"fast+sampled+parent>fast fast>off"},
		{"sampled and parent", tracing.Config{Probability: 0.1, FollowClientSampling: true}, "sampled+parent>off"},
		// The trace floor is sampled work: it goes in the first step, with the probability.
		{"floor alone", tracing.Config{FloorInterval: time.Minute}, "floor>off"},
		{"full, sampled and floor", tracing.Config{Enable: true, Probability: 0.1, FloorInterval: time.Minute},
			"full+sampled+floor>full full>fast fast>off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for c := tt.cfg; ; {
				next, more := stepDown(c)
				if !more {
					break
				}
				got = append(got, Level(c)+">"+Level(next))
				c = next
			}
			if s := strings.Join(got, " "); s != tt.steps {
				t.Errorf("steps %q; want %q", s, tt.steps)
			}
		})
	}
}

// TestAttributedCPU starts a guardrail with tracing on, probability 0.01, never having
// seen a window with tracing off: tracing's share is what its counted work says, 1.3 µs
// of each request's 10 µs (1% of requests recorded at 130 µs each, as with console
// logs), 13%, not the 0.67 µs (6.7%) that the constants of the past assumed (10 µs per
// sampled request and 570 ns per full one). A 5% budget steps it down to full in the first
// window, where the counted work is gone.
func TestAttributedCPU(t *testing.T) {
	cur := tracing.DefaultConfig()
	cur.Enable, cur.Probability = true, 0.01
	g := NewGuard(Budget{CPUPercent: 5, Window: time.Second}, cur)
	f := newFeed()
	f.tracing = 1300 * time.Nanosecond
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, cur)
	now, s = f.window(time.Second, 10000, 10*time.Microsecond, 0, 0, 0)
	a := g.Evaluate(now, s, cur)
	fig := g.figures
	if fig.CPUMethod != "attributed" || math.Abs(fig.CPUPercent-13) > 0.01 || math.Abs(fig.TracingCPUPerRequestUS-1.3) > 1e-9 {
		t.Fatalf("figures %+v; want 13%% (1.3 µs per request), attributed", fig)
	}
	if fig.CPUErrPercent <= 0 || !strings.Contains(fig.CPUFrom, "no window with tracing off yet") {
		t.Errorf("figures %+v; want an error and the window it came from", fig)
	}
	if a.Kind != "step" || a.To != "full" || !strings.Contains(a.Detail, "attributed") {
		t.Fatalf("action %+v; want a step to full, saying the figure was attributed", a)
	}
	cur = a.Config
	f.tracing = 5 * time.Nanosecond // full records nothing under the threshold
	now, s = f.window(time.Second, 10000, 10*time.Microsecond, 0, 0, 0)
	if a := g.Evaluate(now, s, cur); a.Kind != "" || g.figures.CPUPercent > 1 {
		t.Fatalf("at full: action %+v, figures %+v; want none, under 1%%", a, g.figures)
	}
	st := g.Status(cur)
	if st.Figures == nil || st.Figures.CPUMethod != "attributed" || st.Figures.CPUErrPercent < 0 {
		t.Errorf("status %+v; want the attributed figure with its error", st)
	}
}

// TestFailsClosed checks that without a window with tracing off and without a count of
// tracing's work, a CPU budget counts as breached, and that the status says why.
func TestFailsClosed(t *testing.T) {
	cur := fullSampled()
	g := NewGuard(Budget{CPUPercent: 50, Window: time.Second}, cur)
	f := newFeed()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, cur)
	now, s = f.window(time.Second, 1000, 10*time.Microsecond, 0, 0, 0)
	a := g.Evaluate(now, s, cur)
	if a.Kind != "step" || a.Reason != "cpu" || !g.figures.FailClosed || g.figures.CPUPercent != -1 || !strings.Contains(a.Detail, "failing closed") {
		t.Fatalf("action %+v, figures %+v; want a cpu step, failing closed", a, g.figures)
	}
	if st := g.Status(a.Config); !strings.Contains(st.Detail, "failing closed") {
		t.Errorf("status detail %q; want it to say it fails closed", st.Detail)
	}
	// Stepped down to off, the window is measured: 0%, and no longer failing closed.
	off := tracing.DefaultConfig()
	now, s = f.window(time.Second, 1000, 10*time.Microsecond, 0, 0, 0)
	g.Evaluate(now, s, off)
	if g.figures.FailClosed || g.figures.CPUMethod != "measured" {
		t.Errorf("off window figures %+v; want measured", g.figures)
	}
}

// TestAttributedCountsGC checks that an attributed figure counts the garbage collector's
// CPU as tracing's: with tracing off the request path allocates nothing.
func TestAttributedCountsGC(t *testing.T) {
	cur := tracing.Config{Probability: 0.01}
	g := NewGuard(Budget{CPUPercent: 50, Window: time.Second}, cur)
	f := newFeed()
	f.tracing = time.Microsecond
	f.s.GCCPUOK = true
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, cur)
	f.s.GCCPU += 5 * time.Millisecond // 0.5 µs per request of the window's 10000
	now, s = f.window(time.Second, 10000, 10*time.Microsecond, 0, 0, 0)
	g.Evaluate(now, s, cur)
	if fig := g.figures; math.Abs(fig.TracingCPUPerRequestUS-1.5) > 1e-9 || !strings.Contains(fig.CPUFrom, "garbage collector") {
		t.Errorf("figures %+v; want 1.5 µs per request, the collector's included", fig)
	}
	// A window where tracing did no work (full mode under its threshold, say): the
	// collector's CPU is the runtime's own, not tracing's.
	f.tracing = 0
	f.s.GCCPU += 5 * time.Millisecond
	now, s = f.window(time.Second, 10000, 10*time.Microsecond, 0, 0, 0)
	g.Evaluate(now, s, cur)
	// Tracing allocates only when it records a session, so none of that garbage was
	// tracing's: 0% ± 0, and a cheap level is not failed closed on it.
	if fig := g.figures; fig.CPUPercent != 0 || fig.CPUErrPercent != 0 || fig.FailClosed || !strings.Contains(fig.CPUFrom, "left out") {
		t.Errorf("figures %+v; want 0%% ± 0, the collector's CPU left out, in a window without tracing work", fig)
	}
}

// TestComparesLikeWithLike replays the case: off at 50 op/s, where a request
// costs 1 ms of fixed costs spread thin, then tracing at 1,000 op/s, where a request
// costs 110 µs against 45 off. Compared with the off windows at 50 op/s, tracing would
// look free; the guardrail compares with no window at another rate, attributes, and steps
// down. Its mirror (off at 1,000 op/s, tracing cheap at 50 op/s) must not step on the
// difference of rate; and off windows at a similar rate do give a measured figure.
func TestComparesLikeWithLike(t *testing.T) {
	full := tracing.DefaultConfig()
	full.Enable, full.ThresholdMicros, full.Probability = true, 0, 0.1
	off := tracing.DefaultConfig()
	run := func(offRate, onRate uint64, offCPU, onCPU, work time.Duration) (*Guard, Action) {
		g := NewGuard(Budget{CPUPercent: 5, Window: 3 * time.Second}, off)
		f := newFeed()
		now, s := f.window(0, 0, 0, 0, 0, 0)
		g.Evaluate(now, s, off)
		for range 3 {
			now, s = f.window(3*time.Second, 3*offRate, offCPU, 0, 0, 0)
			g.Evaluate(now, s, off)
		}
		g.UserChanged(full)
		f.tracing = work
		now, s = f.window(time.Millisecond, 0, 0, 0, 0, 0)
		g.Evaluate(now, s, full)
		now, s = f.window(3*time.Second, 3*onRate, onCPU, 0, 0, 0)
		return g, g.Evaluate(now, s, full)
	}
	g, a := run(50, 1000, time.Millisecond, 110*time.Microsecond, 60*time.Microsecond)
	// (The feed counts a piece of work per 100 requests: 30 pieces, too few for an error
	// under 5 points, and the figure is unknown, but it was the attributed one.)
	if a.Kind != "step" || !strings.Contains(g.figures.CPUFrom, "attributed:") ||
		!strings.Contains(g.figures.CPUFrom, "none of the 3 off windows at a similar rate") {
		t.Errorf("off at 50 op/s, full at 1,000: action %+v, figures %+v; want a step on the attributed figure", a, g.figures)
	}
	g, a = run(1000, 50, 45*time.Microsecond, time.Millisecond, 20*time.Microsecond)
	if a.Kind != "" || g.figures.CPUMethod != "attributed" || g.figures.CPUPercent > 5 {
		t.Errorf("off at 1,000 op/s, full at 50: action %+v, figures %+v; want no step, attributed 2%%", a, g.figures)
	}
	g, a = run(1000, 900, 45*time.Microsecond, 110*time.Microsecond, 0)
	if a.Kind != "step" || g.figures.CPUMethod != "measured" || !strings.HasPrefix(g.figures.CPUFrom, "off windows at a similar rate") {
		t.Errorf("off at 1,000 op/s, full at 900: action %+v, figures %+v; want a step on the measured figure", a, g.figures)
	}
}

// TestUncertainFigureFailsClosed checks that a figure whose error is larger than the budget
// is unknown: off windows that spread widely give a measured figure of ±20 points against a
// 5% budget, and the guardrail fails closed on it, saying so in its state.
func TestUncertainFigureFailsClosed(t *testing.T) {
	full := tracing.DefaultConfig()
	full.Enable = true
	off := tracing.DefaultConfig()
	g := NewGuard(Budget{CPUPercent: 5, Window: time.Second}, off)
	f := newFeed()
	now, s := f.window(0, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, off)
	for _, c := range []time.Duration{30, 60, 40, 70} {
		now, s = f.window(time.Second, 1000, c*time.Microsecond, 0, 0, 0)
		g.Evaluate(now, s, off)
	}
	g.UserChanged(full)
	now, s = f.window(time.Millisecond, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, full)
	now, s = f.window(time.Second, 1000, 50*time.Microsecond, 0, 0, 0) // no more than off, on average
	a := g.Evaluate(now, s, full)
	fig := g.figures
	if a.Kind != "step" || a.Reason != "cpu" || !fig.FailClosed || fig.CPUPercent != -1 || fig.CPUMethod != "unknown" ||
		!strings.HasPrefix(fig.CPUFrom, "too uncertain") || fig.CPUErrPercent <= 5 {
		t.Fatalf("action %+v, figures %+v; want a cpu step, failing closed on a figure too uncertain", a, fig)
	}
	if st := g.Status(full); st.State != "fail_closed" || !strings.Contains(st.Detail, "too uncertain") {
		t.Errorf("status %+v; want fail_closed, saying why", st)
	}
	// A user's change: the figures are of the configuration before it, and the state is no
	// longer fail_closed until a window of the new one fails closed.
	g.UserChanged(full)
	now, s = f.window(time.Millisecond, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, full)
	if st := g.Status(full); st.State != "ok" {
		t.Errorf("after a user's change: status %+v; want ok until a window is judged", st)
	}
	// The same figure with a budget larger than its error is known.
	g.SetBudget(Budget{CPUPercent: 50, Window: time.Second})
	if st := g.Status(full); st.Figures != nil || st.Windows != 0 {
		t.Errorf("after a new budget: status %+v; want the figures started afresh", st)
	}
	now, s = f.window(time.Millisecond, 0, 0, 0, 0, 0)
	g.Evaluate(now, s, full)
	now, s = f.window(time.Second, 1000, 50*time.Microsecond, 0, 0, 0)
	g.Evaluate(now, s, full)
	if fig := g.figures; fig.CPUMethod != "unknown" || !strings.Contains(fig.CPUFrom, "no window with tracing off yet") {
		t.Errorf("after a new budget: figures %+v; want the off windows forgotten", fig)
	}
}
