package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the command, not the tests, when loadcheck re-executes this test binary
// as its node or sidecar child.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestLoadcheckChildren runs the embedded default briefly and checks that the node and the
// sidecar were separate processes that are gone afterwards, and that their CPU per op and
// the added latency are in the report.
func TestLoadcheckChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"loadcheck", "--modes", "off,fast,full", "--rounds", "2", "--target-error", "0", "--duration", "500ms",
		"--warmup", "200ms", "--concurrency", "4", "--json", filepath.Join(dir, "r.json")}
	if code := run(context.Background(), args, &out, &errb); code != exitOK {
		t.Fatalf("exit code %d\n%s\n%s", code, out.String(), errb.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	m := regexp.MustCompile(`started a node \(pid (\d+).*and a sidecar \(pid (\d+).*process group (\d+).*killed with loadcheck.*logs go to (\S+)`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("the first line does not say where the children run:\n%s", first)
	}
	for _, pid := range m[1:3] {
		n, _ := strconv.Atoi(pid)
		if n == os.Getpid() {
			t.Errorf("child pid %d is this process", n)
		}
		if syscall.Kill(n, 0) == nil {
			t.Errorf("child %d still runs after loadcheck returned", n)
		}
	}
	if _, err := os.Stat(m[4]); !os.IsNotExist(err) {
		t.Errorf("the run's folder %s is still there after a completed run (err %v)", m[4], err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Modes []map[string]any `json:"modes"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, mode := range rep.Modes {
		for _, k := range []string{"sidecar_cpu_us_per_op", "node_cpu_us_per_op", "added_p50_ms", "added_p99_ms"} {
			if v, ok := mode[k].(float64); !ok || v <= 0 {
				t.Errorf("mode %v: %s = %v; want a positive figure", mode["name"], k, mode[k])
			}
		}
	}
}

// TestLoadcheckChildrenKilledOnInterrupt interrupts a run and checks that the children
// are gone when loadcheck returns.
func TestLoadcheckChildrenKilledOnInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"loadcheck", "--modes", "off", "--rounds", "1", "--target-error", "0", "--duration", "1m", "--warmup", "0"}, pw, pw)
		pw.Close()
	}()
	buf := make([]byte, 4096)
	n, _ := pr.Read(buf) // the first line, once the children run
	first := string(buf[:n])
	m := regexp.MustCompile(`pid (\d+).*pid (\d+)`).FindStringSubmatch(first)
	if m == nil {
		cancel()
		t.Fatalf("no pids in the first output:\n%s", first)
	}
	time.Sleep(500 * time.Millisecond) // into the run (no timing is asserted)
	cancel()
	go func() { // drain, so that loadcheck never blocks on the pipe
		for {
			if _, err := pr.Read(buf); err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("loadcheck did not return within 60s of the interrupt")
	}
	for _, pid := range m[1:3] {
		n, _ := strconv.Atoi(pid)
		if syscall.Kill(n, 0) == nil {
			t.Errorf("child %d still runs after an interrupted loadcheck returned", n)
		}
	}
}

// TestLoadcheckCPUBudget checks the exit codes of a budget on the sidecar's CPU per op,
// on real processes: against the direct mode, where the sidecar carries no load, the off
// mode costs the sidecar microseconds per op, so a 0.01 µs budget is breached and a
// 1 ms one never is.
func TestLoadcheckCPUBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	args := func(budget string) []string {
		return []string{"loadcheck", "--modes", "direct,off", "--baseline", "direct", "--rounds", "3", "--target-error", "0",
			"--duration", "500ms", "--warmup", "200ms", "--concurrency", "4", "--max-overhead", budget}
	}
	t.Run("generous", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args("off=cpu:+1ms"), &out, &errb); code != exitOK {
			t.Fatalf("exit code %d; want 0\n%s\n%s", code, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "guardrail ok on sidecar CPU per op: off adds") {
			t.Errorf("no verdict on the sidecar's CPU:\n%s", out.String())
		}
	})
	t.Run("unmeetable", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args("off=cpu:+0.01us"), &out, &errb); code != exitGuardrail {
			t.Fatalf("exit code %d; want 3\n%s\n%s", code, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "GUARDRAIL BREACHED on sidecar CPU per op: off adds") || !strings.Contains(errb.String(), "off cpu") {
			t.Errorf("the breach does not name the metric:\n%s\n%s", out.String(), errb.String())
		}
	})
}

// TestLoadcheckDeploymentAtRate measures a node and a sidecar started apart from loadcheck,
// at a fixed rate: every mode gets CPU per op for both processes and added-latency
// percentiles.
func TestLoadcheckDeploymentAtRate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	var started bytes.Buffer
	st, err := startChildren(context.Background(), &memoryLimit{n: 64 << 20, why: "test"}, &started)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop(false)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"loadcheck", "--node", st.node, "--sidecar", st.sidecar, "--admin", st.admin, "--node-api", st.nodeAPI,
		"--rate", "10000", "--rounds", "2", "--target-error", "0", "--duration", "500ms", "--warmup", "200ms",
		"--json", filepath.Join(dir, "r.json")}
	if code := run(context.Background(), args, &out, &errb); code != exitOK {
		t.Fatalf("exit code %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "the verdict is CPU per op and added latency") {
		t.Errorf("the comparison does not say what the verdict rests on at a fixed rate:\n%s", out.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Modes []map[string]any `json:"modes"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != 5 {
		t.Errorf("modes = %d; want the 5 default ones", len(rep.Modes))
	}
	for _, mode := range rep.Modes {
		keys := []string{"node_cpu_us_per_op", "sidecar_cpu_us_per_op"}
		if mode["name"] != "direct" { // direct bypasses the sidecar: no added latency
			keys = append(keys, "added_p50_ms", "added_p99_ms")
		}
		for _, k := range keys {
			if v, ok := mode[k].(float64); !ok || v <= 0 {
				t.Errorf("mode %v: %s = %v; want a positive figure", mode["name"], k, mode[k])
			}
		}
	}
}
