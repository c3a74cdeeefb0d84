package loadcheck

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// compare fills each mode's degradation and p-value against the baseline.
func compare(rep *Report) {
	base := rep.Mode(rep.Baseline)
	if base == nil {
		return
	}
	bs := summarize(base.Rounds)
	for i := range rep.Modes {
		m := &rep.Modes[i]
		if m.Name == base.Name {
			one := 1.0
			m.PValue = &one
			continue
		}
		pct, err := degradation(summarize(m.Rounds), bs)
		m.DegradationPct, m.DegradationErr = finite(pct), finite(err)
		if t := welch(m.Rounds, base.Rounds); t.ok && !math.IsNaN(t.p) {
			p, tv, df := t.p, finite(t.t), finite(t.df)
			m.PValue, m.T, m.DF = &p, &tv, &df
		}
		if d := pairedDegradation(m.Rounds, base.Rounds); d != nil {
			s := summarize(d)
			m.PairedDegradationPct, m.PairedDegradationErr = s.mean, s.stderr
			if t := oneSampleT(d); t.ok && !math.IsNaN(t.p) {
				p := t.p
				m.PairedPValue = &p
			}
		}
	}
}

// judge applies the budgets: a mode breaches a budget when its cost on the budget's metric
// is over the limit and the difference from the baseline is significant. A budget without
// a metric judges CPU per op at a fixed rate, where the op rate is fixed by design, and the
// op rate otherwise.
func judge(rep *Report, budgets []Budget, fixedRate bool) ([]Verdict, []Breach) {
	verdicts, breaches := []Verdict{}, []Breach{}
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
		v := decideBudget(*m, b, rep.Baseline)
		verdicts = append(verdicts, v)
		if v.Breached {
			breaches = append(breaches, Breach{Mode: m.Name, Metric: v.Metric, Limit: v.Limit, Value: v.Value,
				ValueErr: v.ValueErr, Unit: v.Unit, BudgetPct: v.BudgetPct,
				DegradationPct: v.DegradationPct, DegradationErr: v.DegradationErr, PValue: *v.PValue})
		}
	}
	return verdicts, breaches
}

// decideBudget judges one mode against one budget, on any metric.
func decideBudget(m ModeResult, b Budget, baseline string) Verdict {
	if b.Metric == MetricOps || b.Metric == "" {
		v := decide(m, b.Limit, baseline)
		v.Metric, v.Limit, v.Value, v.ValueErr, v.Unit = MetricOps, b.Limit, m.DegradationPct, m.DegradationErr, "%"
		return v
	}
	d := m.diffs[b.Metric]
	v := Verdict{Mode: m.Name, Metric: b.Metric, Limit: b.Limit, Unit: b.unit()}
	what := metricNames[b.Metric]
	if m.Name == baseline {
		v.Reason = fmt.Sprintf("%s is the baseline", m.Name)
		return v
	}
	if !d.ok {
		v.Reason = fmt.Sprintf("%s: %s is unknown, so its %s budget cannot be judged", m.Name, what, b)
		return v
	}
	v.Value, v.ValueErr = d.diff, d.diffErr
	if !b.Absolute {
		v.Value, v.ValueErr = d.pct, d.pctErr
	}
	v.Value, v.ValueErr = finite(v.Value), finite(v.ValueErr)
	p, test := d.welchP, "Welch"
	if d.pairedP != nil {
		p, test = d.pairedP, "paired"
	}
	v.PValue = p
	cost := fmt.Sprintf("%s adds %s to %s's %s", m.Name, b.format(v.Value, v.ValueErr), baseline, what)
	switch {
	case v.Value <= b.Limit:
		v.Reason = fmt.Sprintf("%s, within its %s budget", cost, b)
	case p == nil:
		v.Reason = fmt.Sprintf("%s, over its %s budget, but significance needs at least 2 rounds", cost, b)
	case *p >= Significance:
		v.Reason = fmt.Sprintf("%s, over its %s budget but not significantly (%s p = %.3g ≥ %g)", cost, b, test, *p, Significance)
	default:
		v.Breached = true
		v.Reason = fmt.Sprintf("%s, over its %s budget (%s p = %.3g < %g)", cost, b, test, *p, Significance)
	}
	return v
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
}

// compareMetric compares mode's per-round values with base's. Nil slices mean unknown.
func compareMetric(mode, base []float64) metricDiff {
	if mode == nil || base == nil || len(mode) == 0 || len(base) == 0 {
		return metricDiff{}
	}
	sm, sb := summarize(mode), summarize(base)
	d := metricDiff{ok: true, n: len(mode), mean: sm.mean, baseMean: sb.mean, diff: sm.mean - sb.mean}
	df := 0.0
	if t := welch(mode, base); t.ok {
		p := t.p
		d.welchP = &p
		d.diffErr = math.Hypot(sm.stderr, sb.stderr)
		df = t.df
	}
	if len(mode) == len(base) && len(mode) >= 2 {
		ds := make([]float64, len(mode))
		for i := range mode {
			ds[i] = mode[i] - base[i]
		}
		s := summarize(ds)
		d.diff, d.diffErr, df = s.mean, s.stderr, float64(s.n-1)
		if t := oneSampleT(ds); t.ok {
			p := t.p
			d.pairedP = &p
		}
	}
	if df > 0 {
		d.minDetect = tQuantile(1-Significance/2, df) * d.diffErr
	}
	if sb.mean != 0 {
		d.pct, d.pctErr = 100*d.diff/sb.mean, 100*d.diffErr/math.Abs(sb.mean)
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
			*diff, *diffErr, *pct, *minDetect = ptr(d.diff), ptr(d.diffErr), ptr(finite(d.pct)), ptr(d.minDetect)
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
			m.MinDetectablePct = finite(tQuantile(1-Significance/2, df) * err)
		}
	}
}

// decide judges one mode against its budget. Significance comes from the paired t-test
// over rounds when there is one: every round runs every mode once, in alternating order,
// so a round is a block, and pairing removes the drift of a busy machine between rounds,
// which the Welch test (still reported as p_value) counts as noise.
func decide(m ModeResult, budget float64, baseline string) Verdict {
	p, test := m.PValue, "Welch"
	if m.PairedPValue != nil {
		p, test = m.PairedPValue, "paired"
	}
	v := Verdict{Mode: m.Name, BudgetPct: budget, DegradationPct: m.DegradationPct,
		DegradationErr: m.DegradationErr, PValue: p}
	cost := fmt.Sprintf("%s costs %.2f%% ± %.2f%% of %s's op rate", m.Name, m.DegradationPct, m.DegradationErr, baseline)
	switch {
	case m.Name == baseline:
		v.Reason = fmt.Sprintf("%s is the baseline", m.Name)
	case m.DegradationPct <= budget:
		v.Reason = fmt.Sprintf("%s, within its %g%% budget", cost, budget)
	case p == nil:
		v.Reason = fmt.Sprintf("%s, over its %g%% budget, but significance needs at least 2 rounds", cost, budget)
	case *p >= Significance:
		v.Reason = fmt.Sprintf("%s, over its %g%% budget but not significantly (%s p = %.3g ≥ %g)", cost, budget, test, *p, Significance)
	default:
		v.Breached = true
		v.Reason = fmt.Sprintf("%s, over its %g%% budget (%s p = %.3g < %g)", cost, budget, test, *p, Significance)
	}
	return v
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
