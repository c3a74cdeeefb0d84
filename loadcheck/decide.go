package loadcheck

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tracecar/tracecar/loadcheck/stats"
)

// compare fills each mode's degradation and p-value against the baseline.
func compare(rep *Report) {
	base := rep.Mode(rep.Baseline)
	if base == nil {
		return
	}
	bs := stats.Summarize(base.Rounds)
	for i := range rep.Modes {
		m := &rep.Modes[i]
		if m.Name == base.Name {
			one := 1.0
			m.PValue = &one
			continue
		}
		pct, err := stats.Degradation(stats.Summarize(m.Rounds), bs)
		m.DegradationPct, m.DegradationErr = stats.Finite(pct), stats.Finite(err)
		if t := stats.Welch(m.Rounds, base.Rounds); t.OK && !math.IsNaN(t.P) {
			p, tv, df := t.P, stats.Finite(t.T), stats.Finite(t.DF)
			m.PValue, m.T, m.DF = &p, &tv, &df
		}
		if d := stats.PairedDegradation(m.Rounds, base.Rounds); d != nil {
			s := stats.Summarize(d)
			m.PairedDegradationPct, m.PairedDegradationErr = s.Mean, s.Stderr
			if t := stats.OneSampleT(d); t.OK && !math.IsNaN(t.P) {
				p := t.P
				m.PairedPValue = &p
			}
		}
	}
}

// judge applies the budgets under rule (VerdictBreach when empty). Each budget's cost is
// tested against its limit, not against zero: under breach a budget fails the run when
// the cost is significantly above the limit, after Holm's adjustment over the budgets;
// under prove a budget fails it unless the upper one-sided 95% bound is under the limit.
// A budget without a metric judges CPU per op at a fixed rate, where the op rate is fixed
// by design, and the op rate otherwise.
func judge(rep *Report, budgets []Budget, fixedRate bool, rule string) ([]Verdict, []Breach) {
	if rule == "" {
		rule = VerdictBreach
	}
	verdicts, breaches := []Verdict{}, []Breach{}
	var ests []*estimate
	var units []Budget
	for _, b := range budgets {
		m := rep.Mode(b.Mode)
		if m == nil {
			continue
		}
		if b.Metric == "" {
			b.Metric = MetricOps
			if fixedRate {
				b.Metric = MetricCPU
			}
		}
		v, e := decideBudget(*m, b, rep.Baseline)
		v.Verdict, v.Outcome = rule, OutcomeUnknown
		verdicts, ests, units = append(verdicts, v), append(ests, e), append(units, b)
	}
	applyVerdict(verdicts, ests, rule, units)
	for i := range verdicts {
		v := &verdicts[i]
		v.PAdjusted = v.PValue
		switch {
		case v.verdictText != "":
			v.Reason += ", " + v.verdictText
		case ests[i] != nil && rule == VerdictProve:
			v.Breached = true
			v.Outcome, v.RoundsNeeded = OutcomeNotResolved, 2
			v.Reason += fmt.Sprintf(", not resolved: showing it within its %s budget needs at least 2 rounds", units[i])
		case ests[i] != nil:
			v.Reason += fmt.Sprintf(", %s its %s budget, but a test needs at least 2 rounds", map[bool]string{true: "over", false: "within"}[v.Value > v.Limit], units[i])
		case rule == VerdictProve && v.Mode != rep.Baseline:
			v.Breached = true
			v.Reason += ": under --verdict prove, a budget that cannot be judged is not shown within"
		}
		if v.Breached {
			p := 0.0
			if v.PValue != nil {
				p = *v.PValue
			}
			breaches = append(breaches, Breach{Mode: v.Mode, Metric: v.Metric, Limit: v.Limit, Value: v.Value,
				ValueErr: v.ValueErr, Unit: v.Unit, BudgetPct: v.BudgetPct,
				DegradationPct: v.DegradationPct, DegradationErr: v.DegradationErr, PValue: p,
				Verdict: v.Verdict, Outcome: v.Outcome, RoundsNeeded: v.RoundsNeeded})
		}
	}
	return verdicts, breaches
}

// decideBudget describes one mode's cost against one budget, on any metric, and returns
// the estimate to test against the limit; nil when there is none (the baseline itself, or
// an unknown figure), with the reason saying why.
func decideBudget(m ModeResult, b Budget, baseline string) (Verdict, *estimate) {
	what := metricNames[b.Metric]
	v := Verdict{Mode: m.Name, Metric: b.Metric, Limit: b.Limit, Unit: b.unit()}
	if m.Name == baseline {
		v.Reason = fmt.Sprintf("%s is the baseline", m.Name)
		return v, nil
	}
	var e estimate
	if b.Metric == MetricOps {
		v.Unit, v.BudgetPct, v.DegradationPct, v.DegradationErr = "%", b.Limit, m.DegradationPct, m.DegradationErr
		e = estimate{value: m.DegradationPct, stderr: m.DegradationErr, n: len(m.Rounds)}
		switch {
		case m.PairedPValue != nil:
			e.value, e.stderr, e.df, e.test = m.PairedDegradationPct, m.PairedDegradationErr, float64(len(m.Rounds)-1), "paired t"
		case m.DF != nil:
			e.df, e.test = *m.DF, "Welch t"
		}
		v.Value, v.ValueErr = stats.Finite(e.value), stats.Finite(e.stderr)
		v.Reason = fmt.Sprintf("%s costs %.2f%% ± %.2f%% of %s's op rate", m.Name, v.Value, v.ValueErr, baseline)
		if m.fixedCostOnly() {
			v.Reason += " (" + fixedCostNote + ")"
		}
		return v, &e
	}
	d := m.diffs[b.Metric]
	if !d.ok {
		v.Reason = fmt.Sprintf("%s: %s is unknown, so its %s budget cannot be judged", m.Name, what, b)
		return v, nil
	}
	e = estimate{value: d.diff, stderr: d.diffErr, df: d.df, n: d.n, test: d.test}
	if !b.Absolute {
		e.value, e.stderr = d.pct, d.pctErr
	}
	v.Value, v.ValueErr = stats.Finite(e.value), stats.Finite(e.stderr)
	v.Reason = fmt.Sprintf("%s adds %s to %s's %s", m.Name, b.format(v.Value, v.ValueErr), baseline, what)
	if m.fixedCostOnly() {
		v.Reason += " (" + fixedCostNote + ")"
	}
	return v, &e
}

// metricDiff compares a per-round figure of a mode with the baseline's.
type metricDiff struct {
	ok              bool
	n               int
	mean, baseMean  float64
	diff, diffErr   float64 // mode − baseline; paired by round when the rounds pair
	pct, pctErr     float64 // the same, in percent of the baseline's mean
	pairedP, welchP *float64
	minDetect       float64 // smallest |diff| a two-sided test at Significance could detect
	df              float64 // of diffErr: n−1 paired, Welch's otherwise; 0 without a test
	test            string  // "paired t" or "Welch t"
}

// compareMetric compares mode's per-round values with base's. Nil slices mean unknown.
func compareMetric(mode, base []float64) metricDiff {
	if mode == nil || base == nil || len(mode) == 0 || len(base) == 0 {
		return metricDiff{}
	}
	sm, sb := stats.Summarize(mode), stats.Summarize(base)
	d := metricDiff{ok: true, n: len(mode), mean: sm.Mean, baseMean: sb.Mean, diff: sm.Mean - sb.Mean}
	df := 0.0
	if t := stats.Welch(mode, base); t.OK {
		p := t.P
		d.welchP = &p
		d.diffErr = math.Hypot(sm.Stderr, sb.Stderr)
		df, d.test = t.DF, "Welch t"
	}
	if len(mode) == len(base) && len(mode) >= 2 {
		ds := make([]float64, len(mode))
		for i := range mode {
			ds[i] = mode[i] - base[i]
		}
		s := stats.Summarize(ds)
		d.diff, d.diffErr, df, d.test = s.Mean, s.Stderr, float64(s.N-1), "paired t"
		if t := stats.OneSampleT(ds); t.OK {
			p := t.P
			d.pairedP = &p
		}
	}
	if df > 0 {
		d.df = df
		d.minDetect = stats.TQuantile(1-Significance/2, df) * d.diffErr
	}
	if sb.Mean != 0 {
		d.pct, d.pctErr = 100*d.diff/sb.Mean, 100*d.diffErr/math.Abs(sb.Mean)
	}
	return d
}

// perRun returns f of every run, or nil when any run lacks it.
func perRun(runs []RunResult, f func(*RunResult) *float64) []float64 {
	if len(runs) == 0 {
		return nil
	}
	xs := make([]float64, len(runs))
	for i := range runs {
		v := f(&runs[i])
		if v == nil {
			return nil
		}
		xs[i] = *v
	}
	return xs
}

// metricValues are the per-round values of each budget metric.
var metricValues = map[string]func(*RunResult) *float64{
	MetricCPU:      func(r *RunResult) *float64 { return r.SidecarCPUUsPerOp },
	MetricUserCPU:  func(r *RunResult) *float64 { return r.SidecarUserCPUUsPerOp },
	MetricNodeCPU:  func(r *RunResult) *float64 { return r.NodeCPUUsPerOp },
	MetricP99:      func(r *RunResult) *float64 { return ptr(r.P99Ms) },
	MetricAddedP99: func(r *RunResult) *float64 { return r.AddedP99Ms },
}

// pairMetrics are the metrics compared between neighbouring modes, in print order.
var pairMetrics = []string{MetricCPU, MetricUserCPU, MetricNodeCPU, MetricAddedP99}

// comparePrevious fills VsPrevious: each mode that the sidecar serves against the one
// before it in the list, skipping the baseline and modes aimed elsewhere.
func comparePrevious(rep *Report) {
	var prev *ModeResult
	for i := range rep.Modes {
		m := &rep.Modes[i]
		if m.Baseline || m.Target != rep.Settings.Sidecar || rep.Settings.Sidecar == "" {
			continue
		}
		if prev != nil {
			for _, k := range pairMetrics {
				f := metricValues[k]
				d := compareMetric(perRun(m.Runs, f), perRun(prev.Runs, f))
				if !d.ok {
					continue
				}
				p := d.pairedP
				if p == nil {
					p = d.welchP
				}
				m.VsPrevious = append(m.VsPrevious, PairDiff{Mode: prev.Name, Metric: k, Diff: d.diff, Stderr: d.diffErr, PValue: p})
			}
		}
		prev = m
	}
}

// compareMetrics fills each mode's comparison of every metric but the op rate, which
// compare does, with the baseline.
func compareMetrics(rep *Report) {
	base := rep.Mode(rep.Baseline)
	if base == nil {
		return
	}
	for i := range rep.Modes {
		m := &rep.Modes[i]
		m.diffs = map[string]metricDiff{}
		for name, f := range metricValues {
			m.diffs[name] = compareMetric(perRun(m.Runs, f), perRun(base.Runs, f))
		}
		if m.Name == base.Name {
			continue
		}
		fill := func(d metricDiff, diff, diffErr, pct, p, welchP, minDetect **float64) {
			if !d.ok {
				return
			}
			*diff, *diffErr, *pct, *minDetect = ptr(d.diff), ptr(d.diffErr), ptr(stats.Finite(d.pct)), ptr(d.minDetect)
			*p, *welchP = d.pairedP, d.welchP
			if d.pairedP == nil {
				*p = d.welchP
			}
		}
		fill(m.diffs[MetricCPU], &m.SidecarCPUUsPerOpDiff, &m.SidecarCPUUsPerOpDiffStderr, &m.SidecarCPUUsPerOpDiffPct,
			&m.SidecarCPUUsPerOpDiffPValue, &m.SidecarCPUUsPerOpDiffWelchPValue, &m.SidecarCPUUsPerOpMinDetectable)
		fill(m.diffs[MetricUserCPU], &m.SidecarUserCPUUsPerOpDiff, &m.SidecarUserCPUUsPerOpDiffStderr, &m.SidecarUserCPUUsPerOpDiffPct,
			&m.SidecarUserCPUUsPerOpDiffPValue, &m.SidecarUserCPUUsPerOpDiffWelchPValue, &m.SidecarUserCPUUsPerOpMinDetectable)
		fill(m.diffs[MetricNodeCPU], &m.NodeCPUUsPerOpDiff, &m.NodeCPUUsPerOpDiffStderr, &m.NodeCPUUsPerOpDiffPct,
			&m.NodeCPUUsPerOpDiffPValue, &m.NodeCPUUsPerOpDiffWelchPValue, &m.NodeCPUUsPerOpMinDetectable)
		err, df := m.DegradationErr, 0.0
		if m.DF != nil {
			df = *m.DF
		}
		if m.PairedPValue != nil {
			err, df = m.PairedDegradationErr, float64(len(m.Rounds)-1)
		}
		if df > 0 {
			m.MinDetectablePct = stats.Finite(stats.TQuantile(1-Significance/2, df) * err)
		}
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// precise reports whether the rounds so far meet the target error: every mode's
// difference from the baseline has a standard error under TargetError percent of the
// baseline's figure. It prints where the rounds stand.
func (c *checker) precise(started time.Time) bool {
	rep := c.report(started)
	worst, what, mode := 0.0, "", ""
	for _, m := range rep.Modes {
		if m.Baseline {
			continue
		}
		e, w := precisionOf(&m)
		if e > worst || mode == "" {
			worst, what, mode = e, w, m.Name
		}
	}
	if mode == "" {
		return true // the baseline alone: nothing to compare
	}
	done := worst < c.cfg.TargetError
	next := "another round"
	if done {
		next = "done"
	}
	c.out.printf("\nAfter %d rounds: the widest error is %s's, %.2f%% of %s's %s (target %g%%): %s\n",
		len(c.order), mode, worst, c.baseline, what, c.cfg.TargetError, next)
	return done
}

// outOfTime reports whether another round, at the pace of the rounds so far (they started
// at from), would end the run more than --max-time after it started, and prints so.
func (c *checker) outOfTime(started, from time.Time) bool {
	if c.cfg.MaxTime < 0 || len(c.order) == 0 {
		return false
	}
	now := time.Now()
	round := now.Sub(from) / time.Duration(len(c.order))
	if now.Add(round).Sub(started) <= c.cfg.MaxTime {
		return false
	}
	c.out.printf("After %d rounds in %s: another round (about %s) would end the run past --max-time %s, so no more rounds\n",
		len(c.order), now.Sub(started).Round(time.Second), round.Round(time.Second), c.cfg.MaxTime)
	return true
}

// resolved reports whether the rounds so far resolve every budget under --verdict prove:
// each is shown within its limit or shown over it. Under breach it is always true: more
// rounds chosen from the data would make a breach likelier than the level says. It prints
// the budgets still open.
func (c *checker) resolved(started time.Time) bool {
	if c.cfg.Verdict != VerdictProve || len(c.cfg.MaxOverhead) == 0 {
		return true
	}
	rep := c.report(started)
	var open []string
	reachable := false
	for _, v := range rep.Guardrail {
		if v.Outcome == OutcomeNotResolved || v.Outcome == OutcomeUnknown && v.Breached {
			open = append(open, fmt.Sprintf("%s %s (%s)", v.Mode, v.Metric, needText(v.RoundsNeeded, len(c.order))))
			reachable = reachable || v.RoundsNeeded <= c.cfg.MaxRounds
		}
	}
	if len(open) == 0 {
		return true
	}
	if !reachable {
		c.out.printf("After %d rounds, not resolved under --verdict prove: %s: more than --max-rounds %d, so no more rounds\n",
			len(c.order), strings.Join(open, ", "), c.cfg.MaxRounds)
		return true
	}
	c.out.printf("After %d rounds, not resolved under --verdict prove: %s: another round\n", len(c.order), strings.Join(open, ", "))
	return false
}

// precisionOf returns the standard error of m's difference from the baseline in percent of
// the baseline, on the figure that the adaptive rounds watch, and the figure's name.
func precisionOf(m *ModeResult) (float64, string) {
	for _, k := range []string{MetricCPU, MetricNodeCPU} {
		if d := m.diffs[k]; d.ok && d.baseMean != 0 {
			return d.pctErr, metricNames[k]
		}
	}
	if m.PairedPValue != nil {
		return m.PairedDegradationErr, metricNames[MetricOps]
	}
	return m.DegradationErr, metricNames[MetricOps]
}
