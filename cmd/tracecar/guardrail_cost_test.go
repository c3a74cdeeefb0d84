package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/tracing/guardrail"
)

// mustConsoleChildren starts a node and a sidecar as loadcheck does, but with the
// sidecar's logs in the console format, whose slow-log lines cost the most.
func mustConsoleChildren(t *testing.T) *childStack {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	st := &childStack{dir: t.TempDir()}
	t.Cleanup(func() { st.stop(true) })
	out, err := st.start(t.Context(), exe, "node", []*regexp.Regexp{nodeCQLRE, nodeAPIRE},
		"node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--log-format", "json", "--log-file", filepath.Join(st.dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	st.node, st.nodeAPI = out[0][1], "http://"+out[1][1]
	out, err = st.start(t.Context(), exe, "sidecar", []*regexp.Regexp{sidecarRE},
		"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--node", st.node,
		"--log-format", "console", "--log-file", filepath.Join(st.dir, "sidecar.log"))
	if err != nil {
		t.Fatal(err)
	}
	st.sidecar, st.admin = out[0][1], out[0][2]
	return st
}

// windowFigures collects the guardrail's figures of each window while load runs: it reads
// /tracecar/status every 200ms until stop is closed, keeping one figure per window.
func windowFigures(c *adminClient, stop <-chan struct{}) []guardrail.Figures {
	var figs []guardrail.Figures
	last := -1
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return figs
		case <-tick.C:
		}
		var st struct {
			Guardrail guardrail.Status `json:"guardrail"`
		}
		if c.get("/tracecar/status", &st) != nil || st.Guardrail.Figures == nil || st.Guardrail.Windows == last {
			continue
		}
		last = st.Guardrail.Windows
		figs = append(figs, *st.Guardrail.Figures)
	}
}

// TestGuardrailCPUEstimate checks the runtime guardrail's CPU figure against loadcheck's
// measurement, on a sidecar with console logs started with tracing on (probability 0.01)
// that has never seen a window with tracing off: its attributed tracing CPU per request,
// over the windows of a run at a fixed rate, is compared with the sidecar's extra CPU per
// op that loadcheck measures at the same rate, sampled minus off, and must be within 30%
// of it (with the constants of the past, 10 µs per sampled request at p = 0.01, it was a
// small fraction of it; see the bound at the end). Then a 1% CPU budget steps it down
// within 3 windows.
//
// The race detector's instrumentation slows the untimed part of the request path too, which
// the estimate leaves out (it read 0.4 of the measurement under -race), so this test runs in
// .ci/run's step without it.
func TestGuardrailCPUEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	if raceEnabled {
		t.Skip("compares CPU figures, which the race detector distorts: .ci/run runs it without -race")
	}
	st := mustConsoleChildren(t)
	var posts atomic.Int64
	c := newAdminClient(st.admin, &posts)
	defer c.close()
	for _, p := range []string{"/storage_service/trace_probability?probability=0.01",
		"/tracecar/guardrail?cpu=100&window=1s&cooldown=1h&restore=false"} {
		if err := c.post(p); err != nil {
			t.Fatal(err)
		}
	}
	deployment := []string{"--node", st.node, "--sidecar", st.sidecar, "--admin", st.admin, "--rate", "4000",
		"--target-error", "0", "--warmup", "500ms", "--concurrency", "8"}
	// The guardrail's figures under load, tracing left as it is (a mode with no steps).
	keep := append([]string{"--modes", "keep", "--baseline", "keep", "--mode", "keep=target=sidecar", "--rounds", "1", "--duration", "8s"}, deployment...)
	stop := make(chan struct{})
	var figs []guardrail.Figures
	var wg sync.WaitGroup
	wg.Go(func() { figs = windowFigures(c, stop) })
	code, out, _ := mustLoadcheck(t, keep...)
	close(stop)
	wg.Wait()
	if code != exitOK {
		t.Fatalf("loadcheck under the guardrail: exit %d\n%s", code, out)
	}
	var est []float64
	for _, f := range figs {
		if f.CPUMethod == "attributed" && f.Requests >= 2000 { // a window full of load
			est = append(est, f.TracingCPUPerRequestUS)
			t.Logf("window: %d requests, tracing %.2f%% ± %.2f of the CPU, %.3f µs per request of %.2f (%s)",
				f.Requests, f.CPUPercent, f.CPUErrPercent, f.TracingCPUPerRequestUS, f.CPUPerRequestUS, f.CPUFrom)
		}
	}
	if len(est) < 3 {
		t.Fatalf("%d loaded windows with an attributed figure; want at least 3: %+v", len(est), figs)
	}
	estimate := 0.0
	for _, e := range est {
		estimate += e
	}
	estimate /= float64(len(est))

	// A 1% budget: the guardrail, still never having seen an off window, steps down within
	// 3 windows.
	if err := c.post("/tracecar/guardrail?cpu=1&window=1s&cooldown=1h&restore=false"); err != nil {
		t.Fatal(err)
	}
	stop = make(chan struct{})
	var first *guardrail.Status
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var s struct {
				Guardrail guardrail.Status `json:"guardrail"`
			}
			if c.get("/tracecar/status", &s) == nil && s.Guardrail.LastAction != nil && s.Guardrail.LastAction.Kind == "step" {
				first = &s.Guardrail
				return
			}
		}
	})
	code, out, _ = mustLoadcheck(t, append([]string{"--modes", "keep", "--baseline", "keep", "--mode", "keep=target=sidecar", "--rounds", "1", "--duration", "5s"}, deployment...)...)
	close(stop)
	wg.Wait()
	if code != exitOK {
		t.Fatalf("loadcheck under a 1%% budget: exit %d\n%s", code, out)
	}
	switch {
	case first == nil:
		t.Errorf("no step under a 1%% CPU budget")
	case first.Windows > 3 || first.LastAction.From != "sampled":
		t.Errorf("first step %+v after %d windows; want one from sampled within 3", first.LastAction, first.Windows)
	default:
		t.Logf("stepped %s → %s after %d windows: %s", first.LastAction.From, first.LastAction.To, first.Windows, first.LastAction.Detail)
	}

	// What loadcheck measures: the sidecar's CPU per op, sampled minus off, paired by round,
	// with no guardrail budget in the way.
	if err := c.post("/tracecar/guardrail?cpu=0&window=1s&cooldown=1h&restore=false"); err != nil {
		t.Fatal(err)
	}
	// Adaptive rounds: until the difference's standard error is under 2% of off's CPU per
	// op (about 0.6 µs/op), or 16 rounds.
	measure := []string{"--modes", "off,sampled", "--rounds", "4", "--max-rounds", "16", "--duration", "2s"}
	for i, a := range deployment {
		if a == "--target-error" {
			deployment[i+1] = "2"
		}
	}
	// The bar is 30% of the measurement. The measurement is noisy: its standard error here is
	// 0.5–1.8 µs/op on a sidecar that costs about 30 per op, against 1–2 µs/op for sampling.
	// So a measurement that puts the estimate outside the bar by more than one standard error
	// is repeated, and the test fails when the second does too. The constants of the past (0.1
	// µs per request) and an estimate with the meter off (0.2: the collector's CPU alone) are
	// outside; so was the estimate while the node was asked every 100 ms, whose looks cost more
	// than the estimate counted (2.0–2.5 µs per request counted against 3.5–4.2 measured); now
	// 1.0–1.3 against 1.0–2.1 (docs/guardrails.md).
	for try := 1; ; try++ {
		code, out, rep := mustLoadcheck(t, append(measure, deployment...)...)
		sampled := rep.Mode("sampled")
		if code != exitOK || sampled == nil || sampled.SidecarCPUUsPerOpDiff == nil {
			t.Fatalf("loadcheck off,sampled: exit %d, no CPU difference\n%s", code, out)
		}
		measured, se := *sampled.SidecarCPUUsPerOpDiff, *sampled.SidecarCPUUsPerOpDiffStderr
		t.Logf("guardrail estimate %.3f µs per request (mean of %d windows); loadcheck sampled − off %.3f ± %.3f µs/op; ratio %.2f",
			estimate, len(est), measured, se, estimate/measured)
		diff, bar := math.Abs(estimate-measured), 0.3*max(measured, 0)
		switch {
		case diff <= bar:
			t.Logf("within 30%% of the measurement")
			return
		case diff <= bar+se:
			t.Logf("within 30%% of the measurement, with one of its standard errors")
			return
		case try == 1:
			t.Logf("outside 30%% of the measurement by more than one of its standard errors: measuring again")
		default:
			t.Fatalf("estimate %.3f µs per request; want within 30%% (+1 SE) of the measured %.3f ± %.3f µs/op, twice outside", estimate, measured, se)
		}
	}
}
