package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/loadcheck"
)

func TestVerdictFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(loadcheck.Config) bool
	}{
		{"defaults", nil, func(c loadcheck.Config) bool { return c.Verdict == loadcheck.VerdictBreach && c.Threshold == nil }},
		{"prove", []string{"--verdict", "prove"}, func(c loadcheck.Config) bool { return c.Verdict == loadcheck.VerdictProve }},
		{"threshold 0", []string{"--threshold", "0"}, func(c loadcheck.Config) bool { return c.Threshold != nil && *c.Threshold == 0 }},
		{"threshold 2ms", []string{"--threshold", "2ms"}, func(c loadcheck.Config) bool {
			return c.Threshold != nil && *c.Threshold == 2*time.Millisecond
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lf, err := parseLoadcheckFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(lf.cfg) {
				t.Errorf("parseLoadcheckFlags(%q) = %+v", tt.args, lf.cfg)
			}
		})
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--verdict", "strict"}, "-verdict: want breach or prove"},
		{[]string{"--threshold", "-1ms"}, "-threshold: want a duration of 0 or more"},
		{[]string{"--threshold", "soon"}, "-threshold: want a duration"},
	} {
		t.Run(strings.Join(bad.args, " "), func(t *testing.T) {
			_, err := parseLoadcheckFlags(bad.args, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("error = %v; want a usage error containing %q", err, bad.want)
			}
		})
	}
}

// mustLoadcheck runs loadcheck with args and a JSON report, and returns its exit code,
// its output and the report.
func mustLoadcheck(t *testing.T, args ...string) (int, string, loadcheck.Report) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "report.json")
	var out, errb bytes.Buffer
	code := run(context.Background(), append(append([]string{"loadcheck"}, args...), "--json", js), &out, &errb)
	var rep loadcheck.Report
	if b, err := os.ReadFile(js); err == nil {
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("report: %v", err)
		}
	} else if code != exitGuardrail && code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	return code, out.String() + errb.String(), rep
}

// TestLoadcheckThreshold runs the built-in fast and full modes at the default threshold,
// where no request of the embedded node is slow, and at --threshold 0, where every
// request is recorded: the first says it measured the fixed cost only, the second
// records a session per request and shows its threshold.
func TestLoadcheckThreshold(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	base := []string{"--modes", "off,fast,full", "--rounds", "1", "--target-error", "0", "--duration", "500ms", "--warmup", "200ms",
		"--rate", "2000", "--concurrency", "4"}
	_, out, rep := mustLoadcheck(t, base...)
	if !strings.Contains(out, "effective: enable=true fast=true threshold=500ms probability=0") {
		t.Errorf("the mode table does not show fast's effective settings:\n%s", out)
	}
	if !strings.Contains(out, "fast: sidecar CPU per op") || !strings.Contains(out, "[measured the fixed cost only: no request was over the threshold]") {
		t.Errorf("fast at 500ms does not say it measured the fixed cost only:\n%s", out)
	}
	_, out, rep = mustLoadcheck(t, append(base, "--threshold", "0")...)
	if strings.Contains(out, "measured the fixed cost only") {
		t.Errorf("at --threshold 0 a mode says it measured the fixed cost only:\n%s", out)
	}
	for _, name := range []string{"fast", "full"} {
		m := rep.Mode(name)
		if m == nil || m.Settings == nil || m.Settings.ThresholdUs == nil || *m.Settings.ThresholdUs != 0 {
			t.Fatalf("%s: settings %+v; want threshold 0", name, m)
		}
		if m.SessionsRecorded == nil || float64(*m.SessionsRecorded) < 0.9*float64(m.Ops) {
			t.Errorf("%s: %v sessions recorded for %d ops; want about one per op", name, m.SessionsRecorded, m.Ops)
		}
	}
	if !strings.Contains(out, "threshold") || !strings.Contains(out, "0s") {
		t.Errorf("the comparison does not show the threshold:\n%s", out)
	}
}

// TestLoadcheckVerdictAtMeasuredCost sets full's CPU budget at the cost a first run
// measures, full − off, and runs loadcheck with it under breach and under prove. At its
// limit the outcome is random by design (a level-5% test breaches a cost at its limit in 5%
// of runs, and the limit is itself an estimate), so the test holds each run to what is
// deterministic: the outcome, the exit code and the text follow from the run's own one-sided
// 95% bounds against the limit: under breach, exit 3 and over exactly when the lower bound
// is over it, else exit 0; under prove, exit 0 and within when the upper bound is under it,
// over when the lower bound is over it, else exit 3, not resolved, with the rounds needed.
// It is not flaky: no outcome is asserted that a run's noise decides. It runs when
// TRACECAR_E2E_VERDICT=1, as .ci/run's own step sets (three loadcheck runs, about 15 s).
func TestLoadcheckVerdictAtMeasuredCost(t *testing.T) {
	if testing.Short() || os.Getenv("TRACECAR_E2E_VERDICT") != "1" {
		t.Skip("set TRACECAR_E2E_VERDICT=1: three loadcheck runs (.ci/run's verdict step)")
	}
	// Three short rounds: what is asserted holds whatever the noise, so the runs need only
	// be long enough to measure (CI runs this test in its own step, and counts its time).
	args := []string{"--modes", "off,full", "--rounds", "3", "--target-error", "0", "--duration", "500ms", "--warmup", "200ms",
		"--rate", "5000"}
	_, out, rep := mustLoadcheck(t, args...)
	full := rep.Mode("full")
	if full == nil || full.SidecarCPUUsPerOpDiff == nil {
		t.Fatalf("no sidecar CPU difference for full:\n%s", out)
	}
	limit := *full.SidecarCPUUsPerOpDiff
	budget := fmt.Sprintf("full=cpu:+%.3fus", limit)
	t.Logf("full − off measured %+.3f ± %.3f µs/op: budget %s", limit, *full.SidecarCPUUsPerOpDiffStderr, budget)
	for _, rule := range []string{"breach", "prove"} {
		code, out, rep := mustLoadcheck(t, append(args, "--max-overhead", budget, "--verdict", rule)...)
		if len(rep.Guardrail) != 1 {
			t.Fatalf("%s: exit %d, %d verdicts; want 1:\n%s", rule, code, len(rep.Guardrail), out)
		}
		v := rep.Guardrail[0]
		t.Logf("%s: exit %d, %s: %s", rule, code, v.Outcome, v.Reason)
		if v.Lower95 == nil || v.Upper95 == nil {
			t.Fatalf("%s: no 95%% bounds: %+v", rule, v)
		}
		lim := v.Limit
		lower, upper := *v.Lower95, *v.Upper95
		var wantCode int
		var wantOutcome string
		switch {
		case lower > lim:
			wantCode, wantOutcome = exitGuardrail, loadcheck.OutcomeOver
		case rule == "breach":
			wantCode = exitOK
		case upper < lim:
			wantCode, wantOutcome = exitOK, loadcheck.OutcomeWithin
		default:
			wantCode, wantOutcome = exitGuardrail, loadcheck.OutcomeNotResolved
		}
		if code != wantCode || v.Breached != (wantCode == exitGuardrail) || wantOutcome != "" && v.Outcome != wantOutcome {
			t.Errorf("%s: bounds [%.3f, %.3f] against the limit %.3f: exit %d, %s (breached %v); want exit %d, %q",
				rule, lower, upper, lim, code, v.Outcome, v.Breached, wantCode, wantOutcome)
		}
		if wantOutcome == loadcheck.OutcomeNotResolved && (v.RoundsNeeded == 0 || !strings.Contains(out, "not resolved: run more rounds (")) {
			t.Errorf("%s: not resolved without the rounds needed: %+v\n%s", rule, v, out)
		}
	}
}
