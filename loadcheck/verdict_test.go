package loadcheck

import (
	"math"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/loadcheck/stats"
)

// cpuRounds returns six rounds of a baseline's and a mode's sidecar CPU per op whose
// paired differences have mean diff and standard error se exactly.
func cpuRounds(diff, se float64) (base, mode []RunResult) {
	dev := []float64{-1, 1, -2, 2, -0.5, 0.5} // mean 0
	var ss float64
	for _, d := range dev {
		ss += d * d
	}
	n := float64(len(dev))
	scale := se * math.Sqrt(n) / math.Sqrt(ss/(n-1)) // stdev·scale/√n = se
	for i, d := range dev {
		b := 10 + 0.3*float64(i%3) // drift between rounds, which pairing cancels
		base = append(base, RunResult{Round: i + 1, SidecarCPUUsPerOp: ptr(b)})
		mode = append(mode, RunResult{Round: i + 1, SidecarCPUUsPerOp: ptr(b + diff + d*scale)})
	}
	return base, mode
}

// oldRule is the rule before issue 45: a breach when the estimate is over the limit and
// the difference from the baseline is significant, that is, from zero.
func oldRule(v Verdict, m ModeResult) bool {
	d := m.diffs[v.Metric]
	p := d.pairedP
	return v.Value > v.Limit && p != nil && *p < Significance
}

// TestVerdictAgainstLimit tests the verdict on synthetic per-round data: a cost half a
// standard error over its limit is no breach, three standard errors over is one; under
// prove, three standard errors under the limit is shown within it and half of one under
// is not resolved. The old rule breaches on the first case.
func TestVerdictAgainstLimit(t *testing.T) {
	const limit, se = 0.5, 0.067
	tests := []struct {
		name     string
		rule     string
		k        float64 // the estimate is limit + k·se
		breached bool    // the run exits 3
		outcome  string
		reason   string
		old      bool // the old rule's breach, where it applies (breach)
	}{
		{"0.5 SE over, breach", VerdictBreach, 0.5, false, OutcomeNotResolved, "not shown over its +0.5µs/op budget", true},
		{"3 SE over, breach", VerdictBreach, 3, true, OutcomeOver, "significantly over its +0.5µs/op budget", true},
		{"3 SE under, prove", VerdictProve, -3, false, OutcomeWithin, "shown within its +0.5µs/op budget", false},
		{"0.5 SE under, prove", VerdictProve, -0.5, true, OutcomeNotResolved, "not resolved: run more rounds (about ", false},
		{"3 SE over, prove", VerdictProve, 3, true, OutcomeOver, "shown over its +0.5µs/op budget", true},
		{"3 SE under, breach", VerdictBreach, -3, false, OutcomeWithin, "shown within", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, mode := cpuRounds(limit+tt.k*se, se)
			rep := &Report{Baseline: "off", Modes: []ModeResult{{Name: "off", Runs: base}, {Name: "full", Runs: mode}}}
			compareMetrics(rep)
			rep.Guardrail, rep.Breaches = judge(rep, []Budget{{Mode: "full", Metric: MetricCPU, Limit: limit, Absolute: true}}, true, tt.rule)
			v := rep.Guardrail[0]
			if math.Abs(v.Value-(limit+tt.k*se)) > 1e-9 || math.Abs(v.ValueErr-se) > 1e-9 {
				t.Fatalf("estimate %v ± %v; want %v ± %v", v.Value, v.ValueErr, limit+tt.k*se, se)
			}
			if v.Breached != tt.breached || v.Outcome != tt.outcome || !strings.Contains(v.Reason, tt.reason) {
				t.Errorf("breached %v, outcome %q, reason %q; want %v, %q, containing %q", v.Breached, v.Outcome, v.Reason, tt.breached, tt.outcome, tt.reason)
			}
			if got := len(rep.Breaches) > 0; got != tt.breached {
				t.Errorf("%d breaches; want breached = %v", len(rep.Breaches), tt.breached)
			}
			if v.Lower95 == nil || v.Upper95 == nil || v.PAdjusted == nil || v.DF == nil || *v.DF != 5 || v.Test != "paired t" {
				t.Errorf("verdict lacks its bounds, adjusted p or test: %+v", v)
			}
			if tt.rule == VerdictBreach {
				if old := oldRule(v, rep.Modes[1]); old != tt.old {
					t.Errorf("the old rule says breached = %v; want %v", old, tt.old)
				}
			}
			if tt.outcome == OutcomeNotResolved && tt.rule == VerdictProve {
				// At the same variance, t(0.95, n−1)·se·√(6/n) < 0.5·se needs n > 24·t², 67
				// rounds (t(0.95, 66) = 1.668).
				if v.RoundsNeeded != 67 {
					t.Errorf("rounds needed %d; want 67", v.RoundsNeeded)
				}
			}
		})
	}
}

// TestHolm checks Holm's adjustment with a worked example: sorted, 0.005, 0.01, 0.03 and
// 0.04 are multiplied by 4, 3, 2 and 1, giving 0.02, 0.03, 0.06 and 0.04, and the last
// is raised to the one before it, 0.06.
func TestHolm(t *testing.T) {
	got := stats.Holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("holm = %v; want %v", got, want)
		}
	}
	if got := stats.Holm([]float64{0.6, 0.5}); got[0] != 1 || got[1] != 1 {
		t.Errorf("holm = %v; want capped at 1", got)
	}
}

// TestVerdictHolmAcrossBudgets judges two budgets at once: each alone, 2.2 and 2.4
// standard errors over its limit, would breach (one-sided p ≈ 0.040 and 0.031), but after
// Holm's adjustment over the two neither does (the smaller p doubled is 0.062), and the
// reasons say so. With the second at 4 standard errors both breach: Holm steps down.
func TestVerdictHolmAcrossBudgets(t *testing.T) {
	const se = 0.1
	base, fast := cpuRounds(0.3+2.2*se, se)
	_, full := cpuRounds(1+2.4*se, se)
	rep := &Report{Baseline: "off", Modes: []ModeResult{{Name: "off", Runs: base}, {Name: "fast", Runs: fast}, {Name: "full", Runs: full}}}
	compareMetrics(rep)
	budgets := []Budget{{Mode: "fast", Metric: MetricCPU, Limit: 0.3, Absolute: true}, {Mode: "full", Metric: MetricCPU, Limit: 1, Absolute: true}}
	for i := range budgets {
		if alone, _ := judge(rep, budgets[i:i+1], true, VerdictBreach); !alone[0].Breached {
			t.Fatalf("%s alone: %s; want a breach", budgets[i].Mode, alone[0].Reason)
		}
	}
	vs, breaches := judge(rep, budgets, true, VerdictBreach)
	if vs[0].Breached || vs[1].Breached || len(breaches) != 0 {
		t.Errorf("breached %v, %v; want neither:\n%s\n%s", vs[0].Breached, vs[1].Breached, vs[0].Reason, vs[1].Reason)
	}
	for _, v := range vs {
		if v.Adjustment != "Holm over 2 budgets" || !strings.Contains(v.Reason, "Holm over 2 budgets") || *v.PAdjusted < *v.POneSided {
			t.Errorf("%s: adjustment %q, p %v → %v; want Holm over 2 budgets:\n%s", v.Mode, v.Adjustment, *v.POneSided, *v.PAdjusted, v.Reason)
		}
	}
	_, full = cpuRounds(1+4*se, se)
	rep.Modes[2] = ModeResult{Name: "full", Runs: full}
	compareMetrics(rep)
	if vs, _ := judge(rep, budgets, true, VerdictBreach); !vs[0].Breached || !vs[1].Breached {
		t.Errorf("with full at 4 SE: breached %v, %v; want both (Holm's step-down)", vs[0].Breached, vs[1].Breached)
	}
}

// TestVerdictUsage checks that an unknown --verdict is a usage error naming the values.
func TestVerdictUsage(t *testing.T) {
	cfg := Config{Node: "127.0.0.1:1", Verdict: "strict"}
	cfg.setDefaults()
	_, err := cfg.check()
	if err == nil || !strings.Contains(err.Error(), `--verdict "strict": want breach`) || !strings.Contains(err.Error(), "prove") {
		t.Errorf("err = %v; want a usage error naming breach and prove", err)
	}
}
