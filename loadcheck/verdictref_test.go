package loadcheck

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// verdictRefCase is one case of testdata/verdictref/cases.json: a run's rounds and, for
// each budget, the figures SciPy and statsmodels give (gen.py, kept beside it).
type verdictRefCase struct {
	Name    string               `json:"name"`
	Rule    string               `json:"rule"`
	Off     []float64            `json:"off"`
	Modes   map[string][]float64 `json:"modes"`
	Budgets []struct {
		Mode      string  `json:"mode"`
		Limit     float64 `json:"limit"`
		Value     float64 `json:"value"`
		ValueErr  float64 `json:"value_err"`
		T         float64 `json:"t"`
		DF        float64 `json:"df"`
		POneSided float64 `json:"p_one_sided"`
		PAdjusted float64 `json:"p_adjusted"`
		Lower95   float64 `json:"lower95"`
		Upper95   float64 `json:"upper95"`
		Outcome   string  `json:"outcome"`
		Breached  bool    `json:"breached"`
		POver     float64 `json:"p_over"`
		PUnder    float64 `json:"p_under"`
	} `json:"budgets"`
}

// TestVerdictReference judges runs whose budgets are below, at and above their limits,
// alone and several at once, under both rules, and checks every figure of each verdict
// (estimate, standard error, t, degrees of freedom, one-sided and adjusted p, bounds,
// outcome, breach) against SciPy's one-sided one-sample t-test and statsmodels' Holm
// adjustment, computed once by testdata/verdictref/gen.py. A p-value on the wrong tail
// (1 − p), a two-sided p, a wrong quantile or a Holm adjustment that does not step down
// fails it.
func TestVerdictReference(t *testing.T) {
	b, err := os.ReadFile("testdata/verdictref/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []verdictRefCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) < 20 {
		t.Fatalf("%d cases; want the 24 of gen.py", len(ref.Cases))
	}
	outcomes := map[string]int{}
	for _, c := range ref.Cases {
		t.Run(c.Name, func(t *testing.T) {
			rep := &Report{Baseline: "off", Modes: []ModeResult{{Name: "off", Runs: refRuns(c.Off)}}}
			var budgets []Budget
			for _, w := range c.Budgets {
				rep.Modes = append(rep.Modes, ModeResult{Name: w.Mode, Runs: refRuns(c.Modes[w.Mode])})
				budgets = append(budgets, Budget{Mode: w.Mode, Metric: MetricCPU, Limit: w.Limit, Absolute: true})
			}
			compareMetrics(rep)
			vs, breaches := judge(rep, budgets, true, c.Rule)
			if len(vs) != len(c.Budgets) {
				t.Fatalf("%d verdicts; want %d", len(vs), len(c.Budgets))
			}
			nBreached := 0
			for i, w := range c.Budgets {
				v := vs[i]
				if v.Mode != w.Mode {
					t.Fatalf("verdict %d is for %s; want %s", i, v.Mode, w.Mode)
				}
				if v.T == nil || v.DF == nil || v.POneSided == nil || v.PAdjusted == nil || v.Lower95 == nil || v.Upper95 == nil {
					t.Fatalf("%s: verdict lacks a figure: %+v", w.Mode, v)
				}
				for _, f := range []struct {
					name      string
					got, want float64
				}{
					{"value", v.Value, w.Value},
					{"value_err", v.ValueErr, w.ValueErr},
					{"t", *v.T, w.T},
					{"df", *v.DF, w.DF},
					{"p_one_sided", *v.POneSided, w.POneSided},
					{"p_adjusted", *v.PAdjusted, w.PAdjusted},
					{"p_value", *v.PValue, w.PAdjusted},
					{"lower95", *v.Lower95, w.Lower95},
					{"upper95", *v.Upper95, w.Upper95},
				} {
					if !refClose(f.got, f.want) {
						t.Errorf("%s (limit %g): %s = %.10g; SciPy's is %.10g", w.Mode, w.Limit, f.name, f.got, f.want)
					}
				}
				// Both tails, straight from the estimate.
				e := estimate{value: v.Value, stderr: v.ValueErr, df: *v.DF}
				_, pOver, pUnder, _, _, _ := e.oneSided(w.Limit)
				if !refClose(pOver, w.POver) || !refClose(pUnder, w.PUnder) {
					t.Errorf("%s: one-sided p over %.10g, under %.10g; SciPy's are %.10g, %.10g", w.Mode, pOver, pUnder, w.POver, w.PUnder)
				}
				if v.Outcome != w.Outcome || v.Breached != w.Breached {
					t.Errorf("%s (limit %g, estimate %.4g): outcome %q, breached %v; want %q, %v\n%s", w.Mode, w.Limit, v.Value, v.Outcome, v.Breached, w.Outcome, w.Breached, v.Reason)
				}
				if w.Breached {
					nBreached++
				}
				outcomes[c.Rule+" "+w.Outcome]++
			}
			if len(breaches) != nBreached {
				t.Errorf("%d breaches; want %d", len(breaches), nBreached)
			}
		})
	}
	// The cases cover every outcome under each rule.
	for _, o := range []string{"breach within", "breach over", "breach not resolved", "prove within", "prove over", "prove not resolved"} {
		if outcomes[o] == 0 {
			t.Errorf("no case ends %q (outcomes %v)", o, outcomes)
		}
	}
}

// refRuns returns one RunResult per round with the given sidecar CPU per op.
func refRuns(cpu []float64) []RunResult {
	runs := make([]RunResult, len(cpu))
	for i, c := range cpu {
		runs[i] = RunResult{Round: i + 1, SidecarCPUUsPerOp: ptr(c)}
	}
	return runs
}

// refClose reports whether got agrees with a reference figure to 1e-7 relative, or 1e-12
// absolute near 0 (p-values of a few 1e-13 included).
func refClose(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12+1e-7*math.Abs(want)
}
