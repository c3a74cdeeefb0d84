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
// measures, full − off, and checks the verdicts around it: under breach five runs exit 0
// (a cost at its limit is not shown over it), and under prove the budget is not resolved
// and the run exits 3 with the rounds needed.
//
// A level-5% test of a cost exactly at its limit breaches in 5% of runs by design, so five
// runs all exit 0 about 77% of the time even on a quiet machine: the test runs only when
// TRACECAR_E2E_VERDICT=1, as a measurement to look at, not as a CI gate.
func TestLoadcheckVerdictAtMeasuredCost(t *testing.T) {
	if testing.Short() || os.Getenv("TRACECAR_E2E_VERDICT") != "1" {
		t.Skip("set TRACECAR_E2E_VERDICT=1: five loadcheck runs, whose outcome at the limit is random by design")
	}
	// Five rounds: with three (2 df), one run in several gets a standard error far too small
	// by chance (seen: +1.770 ± 0.011 µs/op), and its t against the limit is huge.
	args := []string{"--modes", "off,full", "--rounds", "5", "--target-error", "0", "--duration", "1s", "--warmup", "300ms",
		"--rate", "5000"}
	_, out, rep := mustLoadcheck(t, args...)
	full := rep.Mode("full")
	if full == nil || full.SidecarCPUUsPerOpDiff == nil {
		t.Fatalf("no sidecar CPU difference for full:\n%s", out)
	}
	limit := *full.SidecarCPUUsPerOpDiff
	budget := fmt.Sprintf("full=cpu:+%.3fus", limit)
	t.Logf("full − off measured %+.3f ± %.3f µs/op: budget %s", limit, *full.SidecarCPUUsPerOpDiffStderr, budget)
	var codes []int
	for i := range 5 {
		code, out, rep := mustLoadcheck(t, append(args, "--max-overhead", budget, "--verdict", "breach")...)
		codes = append(codes, code)
		if len(rep.Guardrail) == 1 {
			v := rep.Guardrail[0]
			t.Logf("breach run %d: exit %d, %s", i+1, code, v.Reason)
		} else {
			t.Logf("breach run %d: exit %d\n%s", i+1, code, out)
		}
	}
	for _, c := range codes {
		if c != exitOK {
			t.Errorf("exit codes under breach %v; want all 0", codes)
			break
		}
	}
	code, out, rep := mustLoadcheck(t, append(args, "--max-overhead", budget, "--verdict", "prove")...)
	t.Logf("prove: exit %d", code)
	if code != exitGuardrail || len(rep.Guardrail) != 1 || rep.Guardrail[0].Outcome != loadcheck.OutcomeNotResolved ||
		rep.Guardrail[0].RoundsNeeded == 0 || !strings.Contains(out, "not resolved: run more rounds (") {
		t.Errorf("under prove: exit %d, %+v; want 3, not resolved with the rounds needed:\n%s", code, rep.Guardrail, out)
	} else {
		t.Logf("prove: %s", rep.Guardrail[0].Reason)
	}
}
