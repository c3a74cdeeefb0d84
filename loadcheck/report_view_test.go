package loadcheck

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// outcomeReports returns the sample report judged three ways: budgets it breaches (under
// breach), a budget at full's measured CPU cost under prove (not resolved), and generous
// budgets (ok).
func outcomeReports(t *testing.T) map[string]*Report {
	t.Helper()
	out := map[string]*Report{}
	out[RunBreached] = sampleReport(t) // fast's 5% op-rate budget is breached

	nr := sampleReport(t)
	full := nr.Mode("full")
	nr.Guardrail, nr.Breaches = judge(nr, []Budget{{Mode: "full", Metric: MetricCPU, Limit: *full.SidecarCPUUsPerOpDiff, Absolute: true}}, false, VerdictProve)
	summarizeHead(nr)
	out[RunNotResolved] = nr

	ok := sampleReport(t)
	ok.Guardrail, ok.Breaches = judge(ok, []Budget{{Mode: "full", Limit: 50}, {Mode: "full", Metric: MetricCPU, Limit: 5, Absolute: true}}, false, VerdictBreach)
	summarizeHead(ok)
	out[RunOK] = ok
	for want, rep := range out {
		if rep.Outcome != want {
			t.Fatalf("the %s sample's outcome is %q: %+v", want, rep.Outcome, rep.Guardrail)
		}
	}
	return out
}

func htmlOf(t *testing.T, rep *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := writeHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func textOf(rep *Report) string {
	var b bytes.Buffer
	p := newPrinter(&b, false)
	printComparison(p, rep)
	printGuardrail(p, rep)
	return b.String()
}

// TestReportVerdictFirst: the HTML page opens with the verdict, a banner before the
// settings, the table and the charts, in the outcome's colours: red for breached, amber
// for not resolved (a budget under --verdict prove not shown within its limit is not headed
// BREACHED), green for ok; the text output gives the verdict before its comparison table,
// and a not resolved budget as NOT RESOLVED, not BREACHED.
func TestReportVerdictFirst(t *testing.T) {
	for want, rep := range outcomeReports(t) {
		t.Run(want, func(t *testing.T) {
			page := htmlOf(t, rep)
			class := map[string]string{RunBreached: "banner-breached", RunNotResolved: "banner-unresolved", RunOK: "banner-ok"}[want]
			banner := strings.Index(page, `<section id="verdict" class="banner `+class+`"`)
			if banner < 0 {
				t.Fatalf("no %s banner:\n%s", class, page)
			}
			for _, later := range []string{`<section id="summary"`, `<svg`, `<section id="header"`} {
				if i := strings.Index(page, later); i >= 0 && i < banner {
					t.Errorf("%s comes before the verdict banner", later)
				}
			}
			text := textOf(rep)
			verdict := strings.Index(text, "Verdict: "+strings.ToUpper(want))
			if verdict < 0 || verdict > strings.Index(text, "Comparison (") {
				t.Errorf("the text does not give the verdict %s before the comparison:\n%s", strings.ToUpper(want), text)
			}
			if want == RunNotResolved {
				_, body, _ := strings.Cut(page, "</style>") // the style names every class
				for _, bad := range []string{"BREACHED", "banner-breached", `class="breach"`} {
					if strings.Contains(body, bad) {
						t.Errorf("a not resolved run's page shows %q", bad)
					}
				}
				if strings.Contains(text, "BREACHED") || !strings.Contains(text, "GUARDRAIL NOT RESOLVED on sidecar CPU per op: full adds") {
					t.Errorf("a not resolved run's text:\n%s", text)
				}
			}
		})
	}
}

// TestReportCostInCores: each mode's sidecar CPU over the baseline is given in cores at its
// measured op rate too (µs/op × op/s / 10⁶), in the text, in the HTML's head and in the JSON.
func TestReportCostInCores(t *testing.T) {
	c, ok := cores(ptr(44.9), 2000)
	if !ok || coresText(c, 2000) != "+0.090 core (+9.0% of a core) at 2,000 op/s" {
		t.Errorf("44.9 µs/op at 2,000 op/s: %q; want +0.090 core (+9.0%% of a core) at 2,000 op/s", coresText(c, 2000))
	}
	rep := sampleReport(t)
	fast := rep.Mode("fast")
	want := *fast.SidecarCPUUsPerOpDiff * fast.OpRate / 1e6
	if fast.SidecarCPUCoresDiff == nil || *fast.SidecarCPUCoresDiff != want {
		t.Fatalf("fast's sidecar_cpu_cores_diff %v; want %v", fast.SidecarCPUCoresDiff, want)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"sidecar_cpu_cores_diff":`)) || !bytes.Contains(js, []byte(`"outcome":"breached"`)) {
		t.Errorf("the JSON lacks sidecar_cpu_cores_diff or outcome")
	}
	line := coresText(want, fast.OpRate)
	if text := textOf(rep); !strings.Contains(text, "fast: sidecar CPU per op") || !strings.Contains(text, line) {
		t.Errorf("the text lacks fast's cost in cores %q:\n%s", line, text)
	}
	head := regexp.MustCompile(`(?s)<section id="header">.*?</section>`).FindString(htmlOf(t, rep))
	if !strings.Contains(head, strings.SplitN(line, " at ", 2)[0]) {
		t.Errorf("the HTML's head lacks fast's cost in cores %q:\n%s", line, head)
	}
}

// TestReportOneSignConvention: the op-rate sentence says its figures one way, a size and
// above or below, the paired one included: a mode faster than the baseline is above it in
// both (the old sentence said "5.92% ± 1.21% above off (…; paired by round: -6.00% …").
func TestReportOneSignConvention(t *testing.T) {
	rep := sampleReport(t)
	m := rep.Mode("fast")
	m.DegradationPct, m.DegradationErr = -5.92, 1.21
	m.PairedDegradationPct, m.PairedDegradationErr = -6.00, 1.02
	m.PValue, m.PairedPValue = ptr(0.01), ptr(0.002)
	text := textOf(rep)
	if !strings.Contains(text, "fast: op rate 5.92% ± 1.21% above off (") || !strings.Contains(text, "paired by round: 6.00% ± 1.02% above, p = ") {
		t.Errorf("fast's op-rate sentence mixes conventions:\n%s", text)
	}
	if regexp.MustCompile(`paired by round: -`).MatchString(text) {
		t.Errorf("a paired figure is signed where the sentence says above or below:\n%s", text)
	}
	full := rep.Mode("full") // slower than off: below, in both
	if !strings.Contains(text, "full: op rate ") || !regexp.MustCompile(`full: op rate [0-9.]+% ± [0-9.]+% below off \([^\n]*paired by round: [0-9.]+% ± [0-9.]+% below`).MatchString(text) {
		t.Errorf("full (%.2f%%, paired %.2f%%) is not below off in both figures:\n%s", full.DegradationPct, full.PairedDegradationPct, text)
	}
}

// TestReportHeaderSettings: the head of the report gives the settings in force, each mode's
// slow-query threshold among them, and for a profile run its file, op mix and the rows of
// each operation.
func TestReportHeaderSettings(t *testing.T) {
	rep := sampleReport(t)
	on, th := true, int64(500_000)
	rep.Mode("fast").Settings = &ModeSettings{Enable: &on, Fast: &on, ThresholdUs: &th, Probability: "0"}
	rep.Settings.Workload, rep.Settings.Profile = "profile", "testdata/profiles/kv.yaml"
	rep.Settings.OpMix = []OpWeight{{"insert", 1}, {"read1", 9}}
	for i := range rep.Modes {
		rep.Modes[i].PerOp = []OpResult{{Name: "insert", Count: 1000, OpRate: 100}, {Name: "read1", Count: 9000, OpRate: 900, P99Ms: 1.5}}
	}
	page := htmlOf(t, rep)
	head := regexp.MustCompile(`(?s)<section id="header">.*?</section>`).FindString(page)
	for _, want := range []string{"enable=true fast=true threshold=500ms probability=0",
		"Profile <code>testdata/profiles/kv.yaml</code>, op mix insert=1, read1=9.",
		"<td>full</td><td>read1</td><td>9,000</td><td>900</td>"} {
		if !strings.Contains(head, want) {
			t.Errorf("the HTML's head lacks %q:\n%s", want, head)
		}
	}
	if strings.Index(page, `<section id="header">`) > strings.Index(page, `<section id="summary">`) {
		t.Error("the settings come after the comparison table")
	}
	text := textOf(rep)
	for _, want := range []string{"settings fast: enable=true fast=true threshold=500ms probability=0", "profile testdata/profiles/kv.yaml, op mix insert=1, read1=9"} {
		if i := strings.Index(text, want); i < 0 || i > strings.Index(text, "Comparison (") {
			t.Errorf("the text lacks %q before the comparison:\n%s", want, text)
		}
	}
}
