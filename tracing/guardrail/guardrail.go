// Package guardrail is tracecar's runtime guardrail: a circuit breaker that steps tracing
// down on its own when tracing costs the sidecar more than its budget.
//
// Once per window it compares three figures, measured over that window, with their
// budgets:
//   - the sidecar's added latency per request (p99): time in the sidecar minus the wait on
//     the node;
//   - tracing's share of the sidecar's CPU;
//   - the sink drop rate.
//
// Tracing's share of the CPU is measured, never assumed: against the CPU per request of
// windows with tracing off at a similar request rate, when the guardrail has run at least
// two ("measured"), else from the CPU time of the work tracing adds, counted where it
// happens by a Meter ("attributed"). A window is never compared with off windows at
// another rate: the CPU per request falls as the rate grows, and the difference would be
// the rate's, not tracing's. Without a figure, or with one whose error is larger than the
// budget, it fails closed: a window with load over a CPU budget steps down.
//
// On a breach it steps down one level per window: the trace probability to 0 and
// parent-based sampling (following the client's sampled flag) off first, then full to
// fast, then fast to off. With Budget.Restore the user's configuration comes back
// once the cooldown has passed and the figures have recovered (with hysteresis: every
// known figure at most half its budget). A configuration change made by a user always
// wins: it becomes the configuration to guard, and a pending restore is dropped.
//
// Guard holds the decision logic alone, fed with samples and times, so that it is tested
// deterministically; Controller runs it against a tracer, a clock and a Source.
package guardrail

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tracecar/tracecar/tracing"
)

// Defaults of Budget.
const (
	DefaultWindow   = 10 * time.Second
	DefaultCooldown = 60 * time.Second
	// Hysteresis is the share of each budget that a figure must be under for the figures
	// to count as recovered, so that a figure hovering at its budget does not flap.
	Hysteresis = 0.5
	// MinLatencySamples is the fewest added-latency samples a window needs for its p99 to
	// be judged.
	MinLatencySamples = 20
	// MinCPURequests is the fewest requests a window needs for tracing's CPU share to be
	// judged: on an idle sidecar a few heartbeats against the CPU of its own timers say
	// nothing about what tracing costs.
	MinCPURequests = 100
)

// ErrInvalidBudget is wrapped by the errors of Budget.Validate.
var ErrInvalidBudget = errors.New("invalid guardrail budget")

// Budget is what the guardrail allows tracing to cost. A zero limit is off; the zero
// Budget guards nothing. Window and Cooldown of 0 mean their defaults. A Budget is a plain
// value, safe to copy.
type Budget struct {
	// AddedP99 is the largest p99 of the sidecar's added latency per request.
	AddedP99 time.Duration `json:"added_p99_us"`
	// CPUPercent is the largest share of the sidecar's CPU that tracing may take, in %.
	CPUPercent float64 `json:"cpu_pct"`
	// DropsPerSec is the largest rate of sessions dropped by full sink queues.
	DropsPerSec float64 `json:"drops_per_s"`
	// Window is the span each evaluation covers.
	Window time.Duration `json:"window_s"`
	// Cooldown is how long after its last step down the guardrail waits before a restore.
	Cooldown time.Duration `json:"cooldown_s"`
	// Restore brings the user's configuration back after the cooldown once the figures
	// recover.
	Restore bool `json:"restore"`
}

// Enabled reports whether any limit is set.
func (b Budget) Enabled() bool { return b.AddedP99 > 0 || b.CPUPercent > 0 || b.DropsPerSec > 0 }

// withDefaults fills in Window and Cooldown.
func (b Budget) withDefaults() Budget {
	if b.Window <= 0 {
		b.Window = DefaultWindow
	}
	if b.Cooldown <= 0 {
		b.Cooldown = DefaultCooldown
	}
	return b
}

// Validate reports, wrapping ErrInvalidBudget, the first value out of range, naming it as
// the flags and the admin API do.
func (b Budget) Validate() error {
	switch {
	case b.AddedP99 < 0:
		return fmt.Errorf("%w: added_p99 must be >= 0, got %v", ErrInvalidBudget, b.AddedP99)
	case !(b.CPUPercent >= 0 && b.CPUPercent <= 100):
		return fmt.Errorf("%w: cpu must be a percentage from 0 to 100, got %v", ErrInvalidBudget, b.CPUPercent)
	case !(b.DropsPerSec >= 0) || math.IsInf(b.DropsPerSec, 0):
		return fmt.Errorf("%w: drops must be a rate >= 0 per second, got %v", ErrInvalidBudget, b.DropsPerSec)
	case b.Window < 0 || b.Window > 0 && b.Window < 100*time.Millisecond:
		return fmt.Errorf("%w: window must be at least 100ms, got %v", ErrInvalidBudget, b.Window)
	case b.Cooldown < 0:
		return fmt.Errorf("%w: cooldown must be >= 0, got %v", ErrInvalidBudget, b.Cooldown)
	}
	return nil
}

// String describes the limits that are set, as a log line shows them.
func (b Budget) String() string {
	var p []string
	if b.AddedP99 > 0 {
		p = append(p, "added_p99<="+b.AddedP99.String())
	}
	if b.CPUPercent > 0 {
		p = append(p, fmt.Sprintf("cpu<=%g%%", b.CPUPercent))
	}
	if b.DropsPerSec > 0 {
		p = append(p, fmt.Sprintf("drops<=%g/s", b.DropsPerSec))
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, " ")
}

// Sample is a reading of cumulative counters, taken once per window; the guardrail works
// on the differences between consecutive samples.
type Sample struct {
	// Requests counts the requests the sidecar has received.
	Requests uint64
	// CPU is the process's CPU time (user + system); CPUOK is false where it cannot be read.
	CPU   time.Duration
	CPUOK bool
	// Dropped counts the sessions dropped by every sink queue.
	Dropped uint64
	// Added is the cumulative histogram of the added latency per request.
	Added Histogram
	// TracingCPU is the CPU time of the work tracing added, counted where it happened
	// (Meter), over TracingOps pieces of work; TracingCPUOK is false where it is not
	// counted.
	TracingCPU   time.Duration
	TracingOps   uint64
	TracingCPUOK bool
	// GCCPU is the garbage collector's CPU time (runtime/metrics); GCCPUOK is false
	// where it is not read. The request path allocates nothing with tracing off (fast
	// under the threshold too), so the heap the collector works through is, under load,
	// mostly tracing's: an attributed figure counts it as tracing's.
	GCCPU   time.Duration
	GCCPUOK bool
}

// Figures are what the guardrail measured over one window. A figure it could not measure
// is reported as -1 and never breaches.
type Figures struct {
	// WindowSeconds is the span measured.
	WindowSeconds float64 `json:"window_s"`
	// Requests is the number of requests in the window, RatePerSec their rate.
	Requests   uint64  `json:"requests"`
	RatePerSec float64 `json:"rate_per_s"`
	// AddedP99US is the p99 of the added latency, in µs, over AddedSamples requests
	// traced with events; -1 when fewer than MinLatencySamples were.
	AddedP99US   float64 `json:"added_p99_us"`
	AddedSamples uint64  `json:"added_samples"`
	// CPUPercent is tracing's share of the sidecar's CPU, in %; -1 when unknown. CPUMethod
	// says how it was found: "measured" (this window's CPU per request against that of
	// the windows with tracing off at a similar rate), "attributed" (the CPU time of the
	// work tracing added, counted where it happened, over the process's) or "unknown".
	// CPUFrom says which, first ("off windows at a similar rate", "attributed", "too
	// uncertain" or "none"), then from what, and CPUErrPercent is its standard error, in
	// percentage points (-1 when unknown). A figure whose error is larger than the CPU
	// budget is unknown. TracingCPUPerRequestUS is tracing's CPU per request, in µs.
	// FailClosed is true when a CPU budget is set and the share is unknown: the guardrail
	// then counts the window as over it.
	CPUPercent             float64 `json:"cpu_pct"`
	CPUMethod              string  `json:"cpu_method,omitempty"`
	CPUFrom                string  `json:"cpu_from,omitempty"`
	CPUErrPercent          float64 `json:"cpu_err_pct"`
	TracingCPUPerRequestUS float64 `json:"tracing_cpu_per_request_us"`
	FailClosed             bool    `json:"fail_closed,omitempty"`
	// CPUPerRequestUS is the sidecar's CPU per request in the window, in µs.
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	// DropsPerSec is the rate of sessions dropped by full sink queues.
	DropsPerSec float64 `json:"drops_per_s"`
}

// Level names what tracing costs in a configuration: "off", "fast", "full", "sampled",
// "parent" or "floor", with "+sampled" when a mode is on together with a probability,
// "+parent" when parent-based sampling is on besides another mode, and "+floor" when the
// trace floor is. The guardrail's steps go from one
// level to a cheaper one.
func Level(c tracing.Config) string {
	m := c.Mode()
	if c.Enable && c.Probability > 0 {
		m += "+sampled"
	}
	if c.FollowClientSampling && m != "parent" {
		m += "+parent"
	}
	if c.FloorInterval > 0 && m != "floor" {
		m += "+floor"
	}
	return m
}

// stepDown returns the configuration one level cheaper than c, and false when c is off.
func stepDown(c tracing.Config) (tracing.Config, bool) {
	switch {
	case c.Probability > 0 || c.FollowClientSampling || c.FloorInterval > 0:
		// All three trace a share of requests fully, with the node's own trace: one step.
		c.Probability, c.FollowClientSampling, c.FloorInterval = 0, false, 0
	case c.Enable && !c.Fast:
		c.Fast = true
	case c.Enable:
		c.Enable, c.Fast = false, false
	default:
		return c, false
	}
	return c, true
}

// offWindow is a window judged with tracing off: its request rate and CPU per request.
type offWindow struct {
	rate, perReq float64
}

// maxOffWindows bounds the off windows the guardrail remembers, so that it follows a
// load that changes: past it, the oldest is forgotten.
const maxOffWindows = 30

// RateSpan is how far apart two rates may be for their windows to be compared: a window
// at rate r is compared only with off windows at a rate from r/RateSpan to r·RateSpan.
// The CPU per request depends on the rate (a fixed cost spread over the requests: about
// 114 µs at 200 op/s, 7.7 at 10,000), so that a window compared with off windows at
// another rate measures the rate, not tracing.
const RateSpan = 1.5

// MinOffWindows is the fewest comparable off windows a measured figure needs: its error
// comes from their spread.
const MinOffWindows = 2

// offEstimate is the CPU per request, in µs, that the window would cost at rate with
// tracing off, from the comparable off windows: its value, its variance and the number of
// windows it came from (0: none comparable). Between the rates of an off window and of the
// window, the off cost per request moves somewhere from not at all (all of it per request)
// to in inverse proportion to the rate (all of it fixed): the estimate takes the middle,
// and half the gap counts in its error.
func offEstimate(wins []offWindow, rate float64) (est, variance float64, n int, lo, hi float64) {
	var sum, sumSq, bias float64
	for _, w := range wins {
		if w.rate < rate/RateSpan || w.rate > rate*RateSpan {
			continue
		}
		e := w.perReq * (1 + w.rate/rate) / 2
		sum += e
		sumSq += e * e
		bias += w.perReq * math.Abs(w.rate/rate-1) / 2
		if n == 0 || w.rate < lo {
			lo = w.rate
		}
		if n == 0 || w.rate > hi {
			hi = w.rate
		}
		n++
	}
	if n < MinOffWindows {
		return 0, 0, n, lo, hi
	}
	est = sum / float64(n)
	spread := max(0, (sumSq-float64(n)*est*est)/float64(n-1)) // one window's variance
	bias /= float64(n)
	// This window's own figure varies as much as one off window's; the estimate's mean
	// varies by spread/n; the rate gap adds its bias.
	return est, spread*(1+1/float64(n)) + bias*bias, n, lo, hi
}

// Action is what Guard.Evaluate decided.
type Action struct {
	// Kind is "" (nothing to do), "step" or "restore".
	Kind string
	// From and To are the levels; Config is the configuration to install.
	From, To string
	Config   tracing.Config
	// Reason names the breached figures ("cpu", "added_p99", "drops", joined by '+') or
	// "recovered" for a restore. Detail gives the figures against the budget.
	Reason, Detail string
}

// Guard is the guardrail's decision logic: what the sidecar's tracing configuration should
// be, given the samples and the time. It has no clock and no I/O. It is not safe for
// concurrent use; Controller serialises it.
type Guard struct {
	budget Budget

	prev     Sample
	prevAt   time.Time
	havePrev bool

	// user is the configuration the user asked for; steppedDown is true while the tracer
	// runs a cheaper one that the guardrail chose.
	user        tracing.Config
	steppedDown bool
	lastStep    time.Time

	// off are the latest windows judged with tracing off, oldest first.
	off []offWindow

	windows   int // evaluated since the last UserChanged or SetBudget
	figures   Figures
	measured  bool
	last      Action
	lastAt    time.Time
	breaching bool
}

// NewGuard returns a Guard for budget b and the user's configuration user.
func NewGuard(b Budget, user tracing.Config) *Guard {
	return &Guard{budget: b.withDefaults(), user: user}
}

// Budget returns the budget, with its defaults filled in.
func (g *Guard) Budget() Budget { return g.budget }

// SetBudget replaces the budget, and starts the figures afresh: the off windows, the
// latest figures and the window count are forgotten, and the next window is measured from
// the next sample.
func (g *Guard) SetBudget(b Budget) {
	g.budget = b.withDefaults()
	g.havePrev = false
	g.off = nil
	g.figures, g.measured, g.breaching = Figures{}, false, false
	g.windows = 0
}

// UserChanged records that a user installed c: c is now the configuration to guard, the
// guardrail is no longer stepped down, and the next window is measured from now, so that
// nothing measured before the change counts against it.
func (g *Guard) UserChanged(c tracing.Config) {
	g.user = c
	g.steppedDown = false
	g.havePrev = false
}

// Evaluate takes the sample s at time now, while the tracer runs cur, and decides. The
// first sample (and the first after UserChanged or SetBudget) only starts a window; a
// sample less than half a window after the window's start is ignored, so that a window
// is never judged on a sliver of time.
func (g *Guard) Evaluate(now time.Time, s Sample, cur tracing.Config) Action {
	if !g.havePrev {
		g.prev, g.prevAt, g.havePrev = s, now, true
		g.windows = 0
		return Action{}
	}
	if now.Sub(g.prevAt) < g.budget.Window/2 {
		return Action{} // too short a window to judge: it goes on until the next sample
	}
	g.windows++
	f := g.measure(now, s, cur)
	g.prev, g.prevAt = s, now
	g.figures, g.measured = f, true
	if !g.budget.Enabled() {
		g.breaching = false
		return Action{}
	}
	reasons, detail := g.breaches(f)
	g.breaching = len(reasons) > 0
	if len(reasons) > 0 {
		next, ok := stepDown(cur)
		if !ok {
			return Action{}
		}
		if !g.steppedDown {
			g.user = cur // what the user runs now is what a restore brings back
		}
		g.steppedDown = true
		g.lastStep = now
		a := Action{Kind: "step", From: Level(cur), To: Level(next), Config: next,
			Reason: strings.Join(reasons, "+"), Detail: detail}
		g.last, g.lastAt = a, now
		return a
	}
	if g.steppedDown && g.budget.Restore && !now.Before(g.lastStep.Add(g.budget.Cooldown)) && g.recovered(f) {
		a := Action{Kind: "restore", From: Level(cur), To: Level(g.user), Config: g.user,
			Reason: "recovered", Detail: g.describe(f)}
		g.steppedDown = false
		g.last, g.lastAt = a, now
		return a
	}
	return Action{}
}

// measure computes the figures of the window from g.prev to s.
func (g *Guard) measure(now time.Time, s Sample, cur tracing.Config) Figures {
	secs := now.Sub(g.prevAt).Seconds()
	f := Figures{WindowSeconds: secs, AddedP99US: -1, CPUPercent: -1}
	if s.Requests >= g.prev.Requests {
		f.Requests = s.Requests - g.prev.Requests
		f.RatePerSec = float64(f.Requests) / secs
	}
	if s.Dropped >= g.prev.Dropped {
		f.DropsPerSec = float64(s.Dropped-g.prev.Dropped) / secs
	}
	added := s.Added.Sub(g.prev.Added)
	f.AddedSamples = added.Total()
	if f.AddedSamples >= MinLatencySamples {
		f.AddedP99US = float64(added.Quantile(0.99)) / float64(time.Microsecond)
	}
	f.CPUErrPercent = -1
	if f.Requests < MinCPURequests {
		return f // an idle window says nothing about tracing's cost: not judged
	}
	level := Level(cur)
	if !s.CPUOK || !g.prev.CPUOK || s.CPU <= g.prev.CPU {
		f.CPUMethod, f.FailClosed = "unknown", level != "off" && g.budget.CPUPercent > 0
		return f
	}
	cpu := s.CPU - g.prev.CPU
	perReq := float64(cpu) / float64(time.Microsecond) / float64(f.Requests)
	rate := f.RatePerSec
	f.CPUPerRequestUS = perReq
	if level == "off" {
		g.off = append(g.off, offWindow{rate, perReq})
		if len(g.off) > maxOffWindows {
			g.off = g.off[len(g.off)-maxOffWindows:]
		}
		f.CPUPercent, f.CPUErrPercent, f.CPUMethod = 0, 0, "measured"
		f.CPUFrom = fmt.Sprintf("this window, with tracing off (%d off windows remembered)", len(g.off))
		return f
	}
	est, variance, n, lo, hi := offEstimate(g.off, rate)
	switch {
	case n >= MinOffWindows:
		// This window against the off windows at a similar rate: what the level adds per
		// request, as a share of this window's CPU per request.
		extra := perReq - est
		f.TracingCPUPerRequestUS = max(0, extra)
		f.CPUPercent = min(100, max(0, 100*extra/perReq))
		f.CPUErrPercent = 100 * math.Sqrt(variance) / perReq
		f.CPUMethod = "measured"
		f.CPUFrom = fmt.Sprintf("off windows at a similar rate: this window at %s, %.0f op/s, against %d windows with tracing off at %.0f to %.0f op/s",
			level, rate, n, lo, hi)
	case s.TracingCPUOK && g.prev.TracingCPUOK && s.TracingCPU >= g.prev.TracingCPU:
		g.attribute(&f, s, cpu, rate, n)
	default:
		f.CPUMethod, f.FailClosed = "unknown", g.budget.CPUPercent > 0
		f.CPUFrom = "none: " + noComparable(len(g.off), n) + ", and no count of tracing's work"
		return f
	}
	if b := g.budget.CPUPercent; b > 0 && f.CPUErrPercent > b {
		// A figure less certain than the budget cannot say the budget holds: unknown.
		f.CPUFrom = fmt.Sprintf("too uncertain: %.2f%% ± %.2f, an error larger than the budget (%g%%), from %s",
			f.CPUPercent, f.CPUErrPercent, b, f.CPUFrom)
		f.CPUPercent, f.CPUMethod, f.FailClosed = -1, "unknown", true
	}
	return f
}

// attribute sets f's CPU figure, with no off window at a similar rate to compare with (n
// of them were): the CPU of the work tracing added in the window, counted where it
// happened, over the process's cpu.
func (g *Guard) attribute(f *Figures, s Sample, cpu time.Duration, rate float64, n int) {
	// No off window at a similar rate: the CPU of the work tracing added, counted
	// where it happened, over the process's. Its error is the counting noise of the
	// pieces of work, which come one per recorded session and fetch.
	work := s.TracingCPU - g.prev.TracingCPU
	ops := s.TracingOps - g.prev.TracingOps
	gc := ""
	// The collector's CPU counts only in a window where tracing did counted work:
	// tracing allocates only when it records a session (its off, fast and full paths
	// below the threshold allocate nothing: TestRequestPathAllocs), so without counted
	// work the heap the collector went through was not tracing's (a collection of the
	// runtime's own garbage in a quiet window read as tens of % of a small CPU, and
	// counted as the figure's error it failed a cheap level closed).
	if s.GCCPUOK && g.prev.GCCPUOK && s.GCCPU >= g.prev.GCCPU {
		if ops > 0 {
			work += s.GCCPU - g.prev.GCCPU
			gc = " and the garbage collector's"
		} else {
			gc = ", the garbage collector's left out (no tracing work, so none of its garbage)"
		}
	}
	f.CPUPercent = min(100, 100*float64(work)/float64(cpu))
	f.CPUErrPercent = f.CPUPercent / math.Sqrt(float64(max(ops, 1)))
	f.TracingCPUPerRequestUS = float64(work) / float64(time.Microsecond) / float64(f.Requests)
	f.CPUMethod = "attributed"
	f.CPUFrom = fmt.Sprintf("attributed: this window's counted tracing work (%d pieces)%s, at %.0f op/s; %s",
		ops, gc, rate, noComparable(len(g.off), n))
}

// noComparable says why no off window could be compared.
func noComparable(off, comparable int) string {
	switch {
	case off == 0:
		return "no window with tracing off yet"
	case comparable == 0:
		return fmt.Sprintf("none of the %d off windows at a similar rate (within %g×)", off, RateSpan)
	}
	return fmt.Sprintf("%d of the %d off windows at a similar rate (within %g×), fewer than %d", comparable, off, RateSpan, MinOffWindows)
}

// breaches returns the names of the figures over budget and a description of the figures.
func (g *Guard) breaches(f Figures) ([]string, string) {
	var r []string
	b := g.budget
	if b.AddedP99 > 0 && f.AddedP99US >= 0 && f.AddedP99US > float64(b.AddedP99)/float64(time.Microsecond) {
		r = append(r, "added_p99")
	}
	if b.CPUPercent > 0 && (f.CPUPercent >= 0 && f.CPUPercent > b.CPUPercent || f.FailClosed) {
		r = append(r, "cpu")
	}
	if b.DropsPerSec > 0 && f.DropsPerSec > b.DropsPerSec {
		r = append(r, "drops")
	}
	return r, g.describe(f)
}

// recovered reports whether every known figure with a budget is at most Hysteresis of it.
func (g *Guard) recovered(f Figures) bool {
	b := g.budget
	if b.AddedP99 > 0 && f.AddedP99US >= 0 && f.AddedP99US > Hysteresis*float64(b.AddedP99)/float64(time.Microsecond) {
		return false
	}
	if b.CPUPercent > 0 && (f.CPUPercent >= 0 && f.CPUPercent > Hysteresis*b.CPUPercent || f.FailClosed) {
		return false
	}
	if b.DropsPerSec > 0 && f.DropsPerSec > Hysteresis*b.DropsPerSec {
		return false
	}
	return true
}

// describe writes the figures next to their budgets.
func (g *Guard) describe(f Figures) string {
	fig := func(v float64, format string) string {
		if v < 0 {
			return "unknown"
		}
		return fmt.Sprintf(format, v)
	}
	cpu := fig(f.CPUPercent, "%.2f%%")
	if f.CPUErrPercent >= 0 && f.CPUPercent >= 0 {
		cpu += fmt.Sprintf(" ± %.2f", f.CPUErrPercent)
	}
	how := f.CPUMethod
	if f.CPUFrom != "" && !strings.HasPrefix(f.CPUFrom, how) {
		how += ": " + f.CPUFrom
	} else if f.CPUFrom != "" {
		how = f.CPUFrom
	}
	if f.FailClosed {
		how += "; failing closed: tracing's CPU share is unknown, so the CPU budget counts as breached"
	}
	return fmt.Sprintf("added_p99=%s cpu=%s (%s) drops=%.1f/s over %.1fs, %d requests; budget %s",
		fig(f.AddedP99US, "%.0fus"), cpu, how, f.DropsPerSec, f.WindowSeconds, f.Requests, g.budget)
}

// Status is the guardrail's state as GET /tracecar/status and GET /tracecar/guardrail
// report it.
type Status struct {
	// State is "none" when no budget is set, "ok" when tracing runs what the user asked
	// for, "stepped_down" while the guardrail runs a cheaper level, and "fail_closed"
	// when the latest window's CPU share was unknown (no figure, or one whose error is
	// larger than the budget) with tracing on: the guardrail counted the CPU budget as
	// breached, and steps down.
	State string `json:"state"`
	// Detail says in words what the guardrail is doing.
	Detail string `json:"detail,omitempty"`
	// Budget is the budget in force; nil when none is set.
	Budget *BudgetJSON `json:"budget,omitempty"`
	// Level is the level running now; UserLevel is the level the user asked for.
	Level     string `json:"level,omitempty"`
	UserLevel string `json:"user_level,omitempty"`
	// LastAction is the latest step or restore; nil before the first.
	LastAction *ActionJSON `json:"last_action,omitempty"`
	// Reason is the reason of the latest action.
	Reason string `json:"reason,omitempty"`
	// Figures are those of the latest window; nil before the first window ends.
	Figures *Figures `json:"figures,omitempty"`
	// RestoreDue is when a restore may happen, while stepped down with Restore set.
	RestoreDue *time.Time `json:"restore_due,omitempty"`
	// Windows counts the windows judged since the user's last change (or budget change).
	Windows int `json:"windows"`
}

// BudgetJSON is a Budget in the units the admin API takes.
type BudgetJSON struct {
	AddedP99    string  `json:"added_p99,omitempty"`
	CPUPercent  float64 `json:"cpu_pct,omitempty"`
	DropsPerSec float64 `json:"drops_per_s,omitempty"`
	Window      string  `json:"window"`
	Cooldown    string  `json:"cooldown"`
	Restore     bool    `json:"restore"`
}

// JSON returns b in the units the admin API takes.
func (b Budget) JSON() BudgetJSON {
	j := BudgetJSON{CPUPercent: b.CPUPercent, DropsPerSec: b.DropsPerSec, Window: b.Window.String(),
		Cooldown: b.Cooldown.String(), Restore: b.Restore}
	if b.AddedP99 > 0 {
		j.AddedP99 = b.AddedP99.String()
	}
	return j
}

// ActionJSON is an Action as the status shows it.
type ActionJSON struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail"`
}

// Status reports the state while the tracer runs cur.
func (g *Guard) Status(cur tracing.Config) Status {
	if !g.budget.Enabled() && !g.steppedDown {
		return Status{State: "none"}
	}
	bj := g.budget.JSON()
	st := Status{State: "ok", Budget: &bj, Level: Level(cur), UserLevel: Level(g.user), Windows: g.windows}
	if !g.steppedDown {
		st.UserLevel = Level(cur)
	}
	if g.lastAt != (time.Time{}) {
		a := g.last
		st.LastAction = &ActionJSON{At: g.lastAt.UTC(), Kind: a.Kind, From: a.From, To: a.To, Reason: a.Reason, Detail: a.Detail}
		st.Reason = a.Reason
	}
	if g.measured {
		f := g.figures
		st.Figures = &f
	}
	switch {
	case g.steppedDown:
		st.State = "stepped_down"
		st.Detail = fmt.Sprintf("running %s instead of %s", Level(cur), Level(g.user))
		if g.budget.Restore {
			due := g.lastStep.Add(g.budget.Cooldown).UTC()
			st.RestoreDue = &due
			st.Detail += "; restore after " + due.Format(time.RFC3339) + " once the figures are within half their budget"
		} else {
			st.Detail += "; no restore (set restore=true, or POST a configuration)"
		}
	case g.breaching:
		st.Detail = "over budget, but tracing is already off"
	}
	if g.measured && g.figures.FailClosed {
		if Level(cur) != "off" && g.windows > 0 { // a window since the user's last change failed closed
			st.State = "fail_closed"
		}
		if st.Detail != "" {
			st.Detail += "; "
		}
		st.Detail += "tracing's CPU share is unknown (" + g.figures.CPUFrom + "): failing closed, the CPU budget counts as breached"
	}
	return st
}
