package loadcheck

import (
	"fmt"
	"math"
	"slices"
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

// judge applies the budgets: a mode breaches its budget when its degradation is over it and
// the difference from the baseline is significant.
func judge(rep *Report, budgets map[string]float64) ([]Verdict, []Breach) {
	verdicts, breaches := []Verdict{}, []Breach{}
	for _, m := range rep.Modes {
		budget, ok := budgets[m.Name]
		if !ok {
			continue
		}
		v := decide(m, budget, rep.Baseline)
		verdicts = append(verdicts, v)
		if v.Breached {
			breaches = append(breaches, Breach{Mode: m.Name, BudgetPct: budget,
				DegradationPct: m.DegradationPct, DegradationErr: m.DegradationErr, PValue: *v.PValue})
		}
	}
	return verdicts, breaches
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
