package loadcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cpuFake is a check whose sidecar costs 10 µs of CPU per operation off, 10.5 fast and
// 11 full, with per-run noise of up to 2·jitter.
func cpuFake(t *testing.T, out *bytes.Buffer, jitter time.Duration) (Config, *fakeDriver) {
	t.Helper()
	api, url := mustFakeAPI(t)
	api.cpuPerOp = map[string]time.Duration{"off": 10 * time.Microsecond, "fast": 10500 * time.Nanosecond, "full": 11 * time.Microsecond}
	cfg := fakeConfig(url, out)
	cfg.Modes = []string{"off", "fast", "full"}
	d := &fakeDriver{clk: &fakeClock{}, api: api, cpuJitter: jitter,
		costs: map[string]time.Duration{fakeNode: time.Millisecond, fakeSidecar: time.Millisecond}}
	return cfg, d
}

func TestRunCPUPerOp(t *testing.T) {
	var out bytes.Buffer
	cfg, d := cpuFake(t, &out, 30*time.Nanosecond)
	cfg.Rounds = 4
	dir := t.TempDir()
	cfg.JSON, cfg.CSV, cfg.HTML = filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.html")
	rep, err := run(context.Background(), cfg, fakeEnv(d))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for name, want := range map[string]float64{"off": 10, "fast": 10.5, "full": 11} {
		m := rep.Mode(name)
		if m.SidecarCPUUsPerOp == nil || math.Abs(*m.SidecarCPUUsPerOp-want) > 0.07 {
			t.Errorf("%s: sidecar CPU %v µs/op; want %v ± 0.07", name, m.SidecarCPUUsPerOp, want)
		}
		if m.SidecarCPUUsPerOpStderr == nil || *m.SidecarCPUUsPerOpStderr <= 0 {
			t.Errorf("%s: sidecar CPU stderr %v; want > 0", name, m.SidecarCPUUsPerOpStderr)
		}
		if m.NodeCPUUsPerOp != nil {
			t.Errorf("%s: node CPU %v; want unknown without NodeMetrics", name, *m.NodeCPUUsPerOp)
		}
		// The fake observes 10 µs in the 5-10 µs bucket, and more in the 10-50 µs one.
		if m.AddedP50Ms == nil || m.AddedP99Ms == nil || *m.AddedP99Ms <= 0.005 || *m.AddedP99Ms > 0.05 {
			t.Fatalf("%s: added p50 %v, p99 %v; want p99 within 5-50 µs", name, m.AddedP50Ms, m.AddedP99Ms)
		}
	}
	full := rep.Mode("full")
	if full.SidecarCPUUsPerOpDiff == nil || math.Abs(*full.SidecarCPUUsPerOpDiff-1) > 0.07 ||
		full.SidecarCPUUsPerOpDiffPValue == nil || *full.SidecarCPUUsPerOpDiffPValue >= Significance {
		t.Errorf("full vs off: diff %v, p %v; want +1 µs/op, significant", full.SidecarCPUUsPerOpDiff, full.SidecarCPUUsPerOpDiffPValue)
	}
	if full.SidecarCPUUsPerOpMinDetectable == nil || *full.SidecarCPUUsPerOpMinDetectable <= 0 {
		t.Errorf("full: min detectable %v; want > 0", full.SidecarCPUUsPerOpMinDetectable)
	}
	if len(full.VsPrevious) == 0 || full.VsPrevious[0].Mode != "fast" || full.VsPrevious[0].Metric != MetricCPU ||
		math.Abs(full.VsPrevious[0].Diff-0.5) > 0.07 || full.VsPrevious[0].PValue == nil || *full.VsPrevious[0].PValue >= Significance {
		t.Errorf("full vs fast = %+v; want sidecar CPU +0.5 µs/op, significant", full.VsPrevious)
	}
	if len(rep.Mode("fast").VsPrevious) != 0 {
		t.Errorf("fast vs previous = %+v; want none: off, before it, is the baseline", rep.Mode("fast").VsPrevious)
	}
	for _, want := range []string{"Sidecar CPU", "µs/op", "full: sidecar CPU per op +1.0", "full vs fast: sidecar CPU per op +0.5", "added latency median µs", "cannot be told from zero"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	csvText, _ := os.ReadFile(cfg.CSV)
	htmlText, _ := os.ReadFile(cfg.HTML)
	for _, want := range []string{"sidecar_cpu_us_per_op", "node_cpu_us_per_op_diff_p_value", "added_p99_ms"} {
		if !strings.Contains(string(csvText), want) {
			t.Errorf("CSV lacks column %s", want)
		}
	}
	for _, want := range []string{"sidecar CPU µs/op avg", "sidecar CPU µs/op p (paired)", "added latency 99th µs"} {
		if !strings.Contains(string(htmlText), want) {
			t.Errorf("HTML lacks row %q", want)
		}
	}

	b, err := os.ReadFile(cfg.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Modes []map[string]any `json:"modes"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	for _, m := range j.Modes {
		for _, k := range []string{"sidecar_cpu_us_per_op", "sidecar_cpu_us_per_op_stderr", "added_p50_ms", "added_p99_ms"} {
			if v, ok := m[k].(float64); !ok || v <= 0 {
				t.Errorf("mode %v: %s = %v; want a positive number", m["name"], k, m[k])
			}
		}
		for _, k := range []string{"node_cpu_us_per_op", "node_cpu_us_per_op_stderr"} {
			if v, ok := m[k]; !ok || v != nil {
				t.Errorf("mode %v: %s = %v; want null", m["name"], k, v)
			}
		}
		if m["name"] == "full" {
			if p, ok := m["sidecar_cpu_us_per_op_diff_p_value"].(float64); !ok || p >= Significance {
				t.Errorf("full: sidecar_cpu_us_per_op_diff_p_value = %v; want < 0.05", m["sidecar_cpu_us_per_op_diff_p_value"])
			}
		}
	}
}

func TestRunCPUBudgets(t *testing.T) {
	tests := []struct {
		name    string
		budgets string
		wantErr error
		want    string
	}{
		{"absolute over", "fast=cpu:+0.1us", ErrGuardrail, "GUARDRAIL BREACHED on sidecar CPU per op: fast adds +0.5"},
		{"percent over", "full=cpu:5%", ErrGuardrail, "GUARDRAIL BREACHED on sidecar CPU per op: full adds +10"},
		{"generous", "fast=cpu:+2us,full=cpu:20%", nil, "guardrail ok on sidecar CPU per op: full adds +10"},
		{"added p99 generous", "full=added-p99:1ms", nil, "guardrail ok on added-latency p99"},
		{"node CPU unknown", "full=node-cpu:1%", nil, "node CPU per op is unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg, d := cpuFake(t, &out, 20*time.Nanosecond)
			var err error
			if cfg.MaxOverhead, err = ParseBudgets(tt.budgets); err != nil {
				t.Fatal(err)
			}
			_, err = run(context.Background(), cfg, fakeEnv(d))
			if !errors.Is(err, tt.wantErr) || (err != nil && tt.wantErr == nil) {
				t.Fatalf("run error = %v; want %v\n%s", err, tt.wantErr, out.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}

func TestRunAdaptiveRounds(t *testing.T) {
	tests := []struct {
		name        string
		jitter      time.Duration
		target      float64
		maxTime     time.Duration
		wantRounds  int
		wantMessage string
	}{
		{"noise under the target stops at --rounds", 10 * time.Nanosecond, 1, 0, 3, "(target 1%): done"},
		{"noise over the target runs to --max-rounds", 500 * time.Nanosecond, 0.01, 0, 6, "(target 0.01%): another round"},
		{"no target: exactly --rounds", 500 * time.Nanosecond, 0, 0, 3, ""},
		{"--max-time stops the rounds past --rounds", 500 * time.Nanosecond, 0.01, time.Nanosecond, 3, "would end the run past --max-time 1ns, so no more rounds"},
		{"--max-time 0 (no limit) runs to --max-rounds", 500 * time.Nanosecond, 0.01, -1, 6, "(target 0.01%): another round"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg, d := cpuFake(t, &out, tt.jitter)
			cfg.TargetError, cfg.MaxRounds, cfg.MaxTime = tt.target, 6, tt.maxTime
			rep, err := run(context.Background(), cfg, fakeEnv(d))
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if len(rep.Order) != tt.wantRounds || len(rep.Mode("full").Runs) != tt.wantRounds {
				t.Errorf("rounds = %d; want %d\n%s", len(rep.Order), tt.wantRounds, out.String())
			}
			if !strings.Contains(out.String(), tt.wantMessage) {
				t.Errorf("output lacks %q:\n%s", tt.wantMessage, out.String())
			}
		})
	}
}
