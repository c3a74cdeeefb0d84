package loadcheck

import (
	"fmt"
	"strings"
	"time"
)

// Adaptive rounds: whether the figures are precise enough, or time is up, to stop.

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
