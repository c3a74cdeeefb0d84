package loadcheck

import (
	"strings"
	"testing"
)

// TestGuardrailFromSamples drives the guardrail's whole decision, from the op rates of
// each round to the line printed, on injected samples: compare computes the degradation
// and the tests, judge applies the budget, printGuardrail prints the verdict. Nothing is
// measured, so the outcome is fixed. The means and the paired p-values were checked apart
// (a t distribution integrated numerically in Python): 50%, p ≈ 1.2e-15; 2%; 20%, p ≈ 0.428.
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
			line: "GUARDRAIL BREACHED on op rate: off costs 50.00% ± 0.23% of direct's op rate, over its 10% budget (paired p = 1.22e-15 < 0.05)\n",
		},
		{
			// 2% slower, under a 5% budget, significant or not.
			name:   "pass",
			rounds: []float64{9800, 9898, 9702, 9849, 9751, 9800},
			budget: 5,
			line:   "guardrail ok on op rate: off costs 2.00% ± 0.40% of direct's op rate, within its 5% budget\n",
		},
		{
			// 20% slower on average, but two rounds faster than the baseline: over budget,
			// and the rounds are too noisy to call it real.
			name:   "not significant",
			rounds: []float64{2000, 12000, 4000, 11000, 3000, 16000},
			budget: 5,
			line:   "guardrail ok on op rate: off costs 20.00% ± 23.52% of direct's op rate, over its 5% budget but not significantly (paired p = 0.428 ≥ 0.05)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{Baseline: "direct", Modes: []ModeResult{{Name: "direct", Rounds: base}, {Name: "off", Rounds: tt.rounds}}}
			compare(rep)
			rep.Guardrail, rep.Breaches = judge(rep, []Budget{{Mode: "off", Limit: tt.budget}}, false)
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
