package loadcheck

import (
	"fmt"
	"math"
	"slices"

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
