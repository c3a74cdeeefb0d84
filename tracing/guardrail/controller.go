package guardrail

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/tracing"
)

// Tracer is what the guardrail needs from the tracing engine; tracing.Tracer implements it.
type Tracer interface {
	Config() tracing.Config
	UpdateConfig(func(tracing.Config) tracing.Config) error
}

// Source takes a Sample of the cumulative counters. It is called once per window.
type Source interface {
	Sample() Sample
}

// SourceFunc adapts a function to Source.
type SourceFunc func() Sample

// Sample calls f.
func (f SourceFunc) Sample() Sample { return f() }

// Config configures a Controller.
type Config struct {
	// Tracer is the tracing engine whose configuration the guardrail steps down.
	Tracer Tracer
	// Source reads the figures' counters.
	Source Source
	// Budget is the initial budget; the zero Budget guards nothing until SetBudget.
	Budget Budget
	// Logger is the "tracing" logger: one warning per step, one info line per restore.
	// Nil logs nothing.
	Logger *zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Controller runs a Guard against a tracer: Run evaluates once per window and installs
// the Guard's steps and restores. User changes must go through UpdateConfig (or the
// Tracer that User returns) so that they win over the guardrail. It is safe for
// concurrent use.
type Controller struct {
	tr    Tracer
	src   Source
	log   *zerolog.Logger
	now   func() time.Time
	steps *prometheus.CounterVec

	mu    sync.Mutex
	g     *Guard
	reset chan struct{} // wakes Run when the window changes
}

var nop = zerolog.Nop()

// NewController returns a Controller for cfg.
func NewController(cfg Config) *Controller {
	c := &Controller{tr: cfg.Tracer, src: cfg.Source, log: cfg.Logger, now: cfg.Now,
		reset: make(chan struct{}, 1)}
	if c.log == nil {
		c.log = &nop
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.steps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracecar_guardrail_steps_total",
		Help: "Steps the runtime guardrail took: from and to are tracing levels; reason names the breached figures, or recovered for a restore.",
	}, []string{"from", "to", "reason"})
	c.g = NewGuard(cfg.Budget, cfg.Tracer.Config())
	return c
}

// Collector returns the tracecar_guardrail_steps_total series, for /metrics.
func (c *Controller) Collector() prometheus.Collector { return c.steps }

// Budget returns the budget in force.
func (c *Controller) Budget() Budget {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.g.Budget()
}

// SetBudget validates b and installs it, or returns an error wrapping ErrInvalidBudget
// and changes nothing. The next window starts now.
func (c *Controller) SetBudget(b Budget) error {
	if err := b.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	c.g.SetBudget(b)
	c.g.Evaluate(c.now(), c.src.Sample(), c.tr.Config())
	c.mu.Unlock()
	select {
	case c.reset <- struct{}{}:
	default:
	}
	return nil
}

// UpdateConfig is a user's change: it applies f to the tracer's configuration, and the
// result becomes what the guardrail guards and restores. A pending restore is dropped.
func (c *Controller) UpdateConfig(f func(tracing.Config) tracing.Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur tracing.Config
	if err := c.tr.UpdateConfig(func(old tracing.Config) tracing.Config {
		cur = f(old)
		return cur
	}); err != nil {
		return err
	}
	c.g.UserChanged(cur)
	c.g.Evaluate(c.now(), c.src.Sample(), cur) // the next window starts now
	return nil
}

// Status reports the guardrail's state.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.g.Status(c.tr.Config())
}

// Tick takes a sample, evaluates it and applies the decision. Run calls it once per
// window; tests call it with their own clock.
func (c *Controller) Tick() Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.tr.Config()
	a := c.g.Evaluate(c.now(), c.src.Sample(), cur)
	if a.Kind == "" {
		return a
	}
	err := c.tr.UpdateConfig(func(tracing.Config) tracing.Config { return a.Config })
	if err != nil { // a configuration the tracer took before cannot be invalid; say so if it is
		c.log.Error().Err(err).Str("to", a.To).Msg("guardrail could not apply its step")
		return Action{}
	}
	c.steps.WithLabelValues(a.From, a.To, a.Reason).Inc()
	b := c.g.Budget()
	if a.Kind == "step" {
		ev := c.log.Warn().Str("from", a.From).Str("to", a.To).Str("reason", a.Reason)
		f := c.g.figures
		ev.Float64("added_p99_us", f.AddedP99US).Float64("cpu_pct", f.CPUPercent).Str("cpu_method", f.CPUMethod).
			Float64("drops_per_s", f.DropsPerSec).Uint64("requests", f.Requests).Str("budget", b.String()).
			Msg("guardrail: tracing over budget, stepped down one level: " + a.Detail)
	} else {
		c.log.Info().Str("from", a.From).Str("to", a.To).Str("budget", b.String()).
			Msg("guardrail: figures recovered after the cooldown, restored the user's tracing: " + a.Detail)
	}
	return a
}

// Run evaluates once per window until ctx is done. A SetBudget restarts the window. While
// no budget is set it arms no timer and waits for a SetBudget: a window's evaluation decides
// nothing then (Guard.Evaluate), and it would wake an idle sidecar every window for nothing.
func (c *Controller) Run(ctx context.Context) {
	for {
		var tick <-chan time.Time
		var t *time.Timer
		if w, ok := c.window(); ok {
			t = time.NewTimer(w)
			tick = t.C
		}
		select {
		case <-ctx.Done():
			stopTimer(t)
			return
		case <-c.reset:
			stopTimer(t)
			continue
		case <-tick:
			c.Tick()
		}
	}
}

// window returns the window to wait for, and whether a budget is set.
func (c *Controller) window() (time.Duration, bool) {
	b := c.Budget()
	return b.withDefaults().Window, b.Enabled()
}

// stopTimer stops t, if there is one.
func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// User returns a tracer for the admin API: reads go to t, and every configuration change
// goes through c as a user's change. t must be the tracer c steps down.
func (c *Controller) User(t UserTracer) *User { return &User{UserTracer: t, c: c} }

// UserTracer is the tracer the admin API serves: tracing.Tracer.
type UserTracer interface {
	Config() tracing.Config
	SetConfig(tracing.Config) error
	UpdateConfig(func(tracing.Config) tracing.Config) error
	SlowLog(limit int) []tracing.Session
	Session(id string) (tracing.Session, bool)
	Stats() tracing.Stats
}

// User is a tracer whose configuration changes are a user's, routed through the
// Controller so that they win over the guardrail. It is safe for concurrent use.
type User struct {
	UserTracer
	c *Controller
}

// SetConfig installs cfg as a user's change.
func (u *User) SetConfig(cfg tracing.Config) error {
	return u.c.UpdateConfig(func(tracing.Config) tracing.Config { return cfg })
}

// UpdateConfig applies f as a user's change.
func (u *User) UpdateConfig(f func(tracing.Config) tracing.Config) error {
	return u.c.UpdateConfig(f)
}
