package loadcheck

import (
	"strings"
	"testing"
)

// TestGuardrailFromSamples drives the guardrail's whole decision, from the op rates of
// each round to the line printed, on injected samples: compare computes the degradation
// and the tests, judge applies the budget, printGuardrail prints the verdict. Nothing is
// measured, so the outcome is fixed. The estimates are the paired ones, the means of the
// per-round degradations, and each is tested against its budget, not against zero.
func TestGuardrailFromSamples(t *testing.T) {
	base := []float64{10000, 10100, 9900, 10050, 9950, 10000}
	tests := []struct {
		name     string
		rounds   []float64 // the checked mode's op rate per round, paired with base's
		budget   float64
		breached bool
		line     string // printed, word for word
	}{
		{
			// Half the op rate in every round: over budget, and significant.
			name:   "breach",
			rounds: []float64{5000, 5060, 4940, 5030, 4970, 5000},
			budget: 10, breached: true,
			line: "GUARDRAIL BREACHED on op rate: off costs 50.00% ± 0.03% of direct's op rate, significantly over its 10% budget (one-sided 95% bounds +49.94% to +50.06%; one-sided paired t against the limit, H0: at most the limit: t = 1385.51, 5 df, adjusted p = 1.86e-15 (one budget: unadjusted) < 0.05)\n",
		},
		{
			// 2% slower, under a 5% budget, significant or not.
			name:   "pass",
			rounds: []float64{9800, 9898, 9702, 9849, 9751, 9800},
			budget: 5,
			line:   "guardrail ok on op rate: off costs 2.00% ± 0.00% of direct's op rate, shown within its 5% budget (one-sided 95% bounds +2.00% to +2.00%; one-sided paired t against the limit, H0: at most the limit: t = −∞, 5 df, adjusted p = 1 (one budget: unadjusted))\n",
		},
		{
			// 20% slower on average, but two rounds faster than the baseline: over budget,
			// and the rounds are too noisy to call it real.
			name:   "not significant",
			rounds: []float64{2000, 12000, 4000, 11000, 3000, 16000},
			budget: 5,
			line:   "guardrail ok on op rate: off costs 20.20% ± 23.40% of direct's op rate, not shown over its 5% budget (one-sided 95% bounds -26.95% to +67.35%; one-sided paired t against the limit, H0: at most the limit: t = 0.65, 5 df, adjusted p = 0.272 (one budget: unadjusted) ≥ 0.05)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{Baseline: "direct", Modes: []ModeResult{{Name: "direct", Rounds: base}, {Name: "off", Rounds: tt.rounds}}}
			compare(rep)
			rep.Guardrail, rep.Breaches = judge(rep, []Budget{{Mode: "off", Limit: tt.budget}}, false, VerdictBreach)
			if len(rep.Guardrail) != 1 {
				t.Fatalf("%d verdicts; want 1, for off's budget", len(rep.Guardrail))
			}
			if v := rep.Guardrail[0]; v.Breached != tt.breached {
				t.Errorf("breached = %v; want %v (%s)", v.Breached, tt.breached, v.Reason)
			}
			if got := len(rep.Breaches) > 0; got != tt.breached {
				t.Errorf("breaches %v; want breached = %v", rep.Breaches, tt.breached)
			}
			var b strings.Builder
			printGuardrail(newPrinter(&b, false), rep)
			if b.String() != tt.line {
				t.Errorf("printed\n%q\nwant\n%q", b.String(), tt.line)
			}
		})
	}
}
