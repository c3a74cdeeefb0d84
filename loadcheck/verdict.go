package loadcheck

import (
	"fmt"
	"math"

	"github.com/tracecar/tracecar/loadcheck/stats"
)

// Verdict rules, as --verdict names them.
const (
	// VerdictBreach fails a run only when a budget is shown breached: the overhead is
	// significantly above its limit (a one-sided test of overhead ≤ limit, Holm-adjusted
	// over the run's budgets).
	VerdictBreach = "breach"
	// VerdictProve fails a run unless every budget is shown within its limit: the upper
	// bound of the one-sided 95% interval is under the limit.
	VerdictProve = "prove"
)

// maxRoundsNeeded caps the rounds-needed estimate: beyond it the difference is too close
// to the limit for rounds to settle it.
const maxRoundsNeeded = 1000

// estimate is one budget's figure: mode − baseline on the budget's metric and scale, its
// standard error and degrees of freedom (0: no test), and the per-round standard deviation
// behind the standard error, for the rounds-needed estimate.
type estimate struct {
	value, stderr, df float64
	n                 int
	test              string // "paired t" or "Welch t"
}

// oneSided tests the estimate against the limit: t = (value − limit)/stderr, with pOver =
// P(T ≥ t) (the p of H0: overhead ≤ limit) and pUnder = P(T ≤ t) (of H0: overhead ≥ limit),
// and the one-sided 95% bounds. ok is false when there is no test (fewer than two rounds).
func (e estimate) oneSided(limit float64) (t, pOver, pUnder, lower, upper float64, ok bool) {
	if e.df <= 0 || math.IsNaN(e.stderr) {
		return 0, 0, 0, 0, 0, false
	}
	d := e.value - limit
	if e.stderr == 0 {
		switch {
		case d > 0:
			return math.Inf(1), 0, 1, e.value, e.value, true
		case d < 0:
			return math.Inf(-1), 1, 0, e.value, e.value, true
		}
		return 0, 0.5, 0.5, e.value, e.value, true
	}
	t = d / e.stderr
	q := stats.TQuantile(1-Significance, e.df) * e.stderr
	tail := stats.StudentTwoSided(t, e.df) / 2 // the far side's, without 1 − (1 − tiny)
	pOver, pUnder = tail, 1-tail
	if t < 0 {
		pOver, pUnder = 1-tail, tail
	}
	return t, pOver, pUnder, e.value - q, e.value + q, true
}

// roundsNeeded estimates how many rounds in all would put the estimate's one-sided 95%
// bound on its side of the limit, at the variance observed and the estimate unchanged:
// the least n with t(0.95, n−1)·sd/√n < |value − limit|. It returns maxRoundsNeeded+1 when
// that takes more than maxRoundsNeeded rounds.
func (e estimate) roundsNeeded(limit float64) int {
	gap := math.Abs(e.value - limit)
	if e.n < 2 || gap == 0 {
		return maxRoundsNeeded + 1
	}
	sd := e.stderr * math.Sqrt(float64(e.n))
	for n := max(e.n, 2); n <= maxRoundsNeeded; n++ {
		if stats.TQuantile(1-Significance, float64(n-1))*sd/math.Sqrt(float64(n)) < gap {
			return n
		}
	}
	return maxRoundsNeeded + 1
}

// applyVerdict tests each judged verdict against its limit under rule, adjusts the
// p-values for the number of budgets, and sets the outcome, Breached (the verdict fails
// the run) and the reason's verdict clause. ests holds each verdict's estimate; a verdict
// without a test (est.df == 0) keeps its reason.
func applyVerdict(vs []Verdict, ests []*estimate, rule string, units []Budget) {
	var ps, ts []float64
	var tested []int
	for i, e := range ests {
		if e == nil {
			continue
		}
		v := &vs[i]
		t, pOver, pUnder, lo, hi, ok := e.oneSided(v.Limit)
		v.Verdict, v.Test = rule, e.test
		v.Value, v.ValueErr = stats.Finite(e.value), stats.Finite(e.stderr)
		if !ok {
			v.Outcome = OutcomeUnknown
			continue
		}
		v.DF, v.T = ptr(e.df), ptr(stats.Finite(t))
		v.Lower95, v.Upper95 = ptr(stats.Finite(lo)), ptr(stats.Finite(hi))
		p := pOver
		if rule == VerdictProve {
			p = pUnder
		}
		v.POneSided = ptr(p)
		ps, ts = append(ps, p), append(ts, t)
		tested = append(tested, i)
	}
	adj := ps
	adjustment := "one budget: unadjusted"
	switch {
	case rule == VerdictProve && len(ps) > 1:
		// Proving every budget within its limit is an intersection-union test: the run
		// fails unless each test succeeds at the level, so no adjustment is needed.
		adjustment = fmt.Sprintf("unadjusted: prove needs all %d budgets shown, an intersection-union test", len(ps))
	case len(ps) > 1:
		adj = stats.Holm(ps)
		adjustment = fmt.Sprintf("Holm over %d budgets", len(ps))
	}
	for k, i := range tested {
		v, e, b := &vs[i], ests[i], units[i]
		v.PValue = ptr(adj[k])
		v.Adjustment = adjustment
		lo, hi := *v.Lower95, *v.Upper95
		switch {
		case hi < v.Limit:
			v.Outcome = OutcomeWithin
		case rule == VerdictBreach && adj[k] < Significance, rule == VerdictProve && lo > v.Limit:
			v.Outcome = OutcomeOver
		default:
			v.Outcome = OutcomeNotResolved
		}
		if v.Outcome == OutcomeNotResolved {
			v.RoundsNeeded = e.roundsNeeded(v.Limit)
		}
		h0 := "H0: at most the limit"
		if rule == VerdictProve {
			h0 = "H0: at least the limit"
		}
		test := fmt.Sprintf("one-sided %s against the limit, %s: t = %s, %.3g df, adjusted p = %.3g (%s)",
			e.test, h0, tText(ts[k]), e.df, adj[k], adjustment)
		bounds := fmt.Sprintf("one-sided 95%% bounds %s to %s", b.formatOne(lo), b.formatOne(hi))
		switch {
		case v.Outcome == OutcomeOver && rule == VerdictBreach:
			v.Breached = true
			v.verdictText = fmt.Sprintf("significantly over its %s budget (%s; %s < %g)", b, bounds, test, Significance)
		case v.Outcome == OutcomeOver:
			v.Breached = true
			v.verdictText = fmt.Sprintf("shown over its %s budget (%s; %s)", b, bounds, test)
		case v.Outcome == OutcomeWithin:
			v.verdictText = fmt.Sprintf("shown within its %s budget (%s; %s)", b, bounds, test)
		case rule == VerdictProve:
			v.Breached = true
			v.verdictText = fmt.Sprintf("not resolved: run more rounds (%s) (%s, straddling its %s budget; %s)", needText(v.RoundsNeeded, e.n), bounds, b, test)
		default:
			v.verdictText = fmt.Sprintf("not shown over its %s budget (%s; %s ≥ %g)", b, bounds, test, Significance)
		}
	}
}

// tText prints a t statistic, which is infinite when the rounds have no spread.
func tText(t float64) string {
	switch {
	case math.IsInf(t, 1):
		return "+∞"
	case math.IsInf(t, -1):
		return "−∞"
	}
	return fmt.Sprintf("%.2f", t)
}

// needText says how many rounds a budget needs, in all.
func needText(need, have int) string {
	if need > maxRoundsNeeded {
		return fmt.Sprintf("more than %d rounds at this variance: the estimate is too close to the limit", maxRoundsNeeded)
	}
	return fmt.Sprintf("about %d rounds in all at this variance, %d more", need, need-have)
}
