package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing/capture"
)

// captureMarker is a bound value of the Python workload, unique so that a search finds it
// only where a value was written.
const captureMarker = "MARKER-31c9f0d2e7"

// mustCapturePython runs the Python workload (capture_workload.py) through the sidecar of
// st for seconds while a capture with values runs, and returns the capture file and the
// counts the script sent. env adds to the script's environment (WORKLOAD_REQUESTS,
// WORKLOAD_EXTRAS, PROTOCOL_VERSION: see the script).
func mustCapturePython(t *testing.T, st *stack, seconds float64, values string, env ...string) (string, map[string]int) {
	t.Helper()
	host, port := splitHostPort(t, st.Sidecar)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, drivertest.Python, drivertest.ScriptPath("capture_workload.py"))
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port, "MARKER="+captureMarker,
		"WORKLOAD_SECONDS="+strconv.FormatFloat(seconds, 'f', -1, 64), "WORKLOAD_IN_FLIGHT=4")
	cmd.Env = append(cmd.Env, env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "READY" {
		cmd.Wait()
		t.Fatalf("workload did not get ready: %q\n%s", lines.Text(), stderr.String())
	}
	mustAdmin(t, st.Admin, "POST", "/tracecar/capture?enable=true&duration=2m&values="+values)
	io.WriteString(stdin, "GO\n")
	var counts map[string]int
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &counts) != nil {
		cmd.Wait()
		t.Fatalf("workload output %q\n%s", lines.Text(), stderr.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("workload: %v\n%s", err, stderr.String())
	}
	var cs capture.Status
	if err := json.Unmarshal(mustAdmin(t, st.Admin, "POST", "/tracecar/capture?enable=false"), &cs); err != nil || cs.Last == nil || cs.Last.Error != "" {
		t.Fatalf("stop the capture: %+v %v", cs, err)
	}
	t.Logf("values=%s: the workload sent %v; captured %d records, %d bytes, %d dropped", values, counts, cs.Last.Records, cs.Last.Bytes, cs.Last.Dropped)
	if cs.Last.Dropped != 0 {
		t.Errorf("the capture dropped %d requests", cs.Last.Dropped)
	}
	return cs.Last.File, counts
}

func splitHostPort(tb testing.TB, addr string) (string, string) {
	tb.Helper()
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

func mustAdmin(tb testing.TB, base, method, path string) []byte {
	tb.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		tb.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}

// mustRun runs the tracecar command line args and returns its stdout, failing unless it
// exits with want.
func mustRun(tb testing.TB, want int, args ...string) string {
	tb.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != want {
		tb.Fatalf("tracecar %s: exit %d, want %d\n%s\n%s", strings.Join(args, " "), code, want, out.String(), errb.String())
	}
	return out.String() + errb.String()
}

// replayReport is the part of loadcheck's JSON that the test reads.
type replayReport struct {
	Modes []struct {
		Name   string  `json:"name"`
		OpRate float64 `json:"op_rate"`
		Errors int64   `json:"errors"`
	} `json:"modes"`
	Guardrail []struct {
		Mode     string `json:"mode"`
		Breached bool   `json:"breached"`
	} `json:"guardrail"`
	Replay struct {
		CapturedOpRate float64 `json:"captured_op_rate"`
		Statements     []struct {
			Query    string  `json:"query"`
			Prepared bool    `json:"prepared"`
			Captured int     `json:"captured"`
			Replayed float64 `json:"replayed"`
		} `json:"statements"`
		Keys struct {
			Top []struct {
				Key         string  `json:"key"`
				CapturedPct float64 `json:"captured_pct"`
				ReplayedPct float64 `json:"replayed_pct"`
			} `json:"top"`
		} `json:"keys"`
	} `json:"replay"`
}

func mustReport(tb testing.TB, path string) (replayReport, []byte) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var r replayReport
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatal(err)
	}
	return r, b
}

func mustContents(tb testing.TB, path string) []byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	b, err := capturefile.Contents(f)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestCaptureReplayPython is the capture's acceptance test. The Python driver runs a
// user-profile workload through the sidecar (three prepared statements 70/20/10 over a
// 10,000-key Zipf population, one of them a 10-row partition read, one unprepared
// statement, a marker string as a bound value) while a capture runs; the capture is
// replayed by loadcheck against the embedded default in off, fast and full:
//   - each statement's replayed count is within 1% of its captured count, and the ten
//     hottest keys' shares within 2 points;
//   - at --replay-speed 1x the op rate is within 5% of the captured one;
//   - the comparison table and a budget work, on the embedded default, and against a
//     deployment (a relay that holds each request breaches a budget: exit 3);
//   - with values=shape the marker is nowhere in the file (decompressed), its dump, its
//     stats or the replay's output; with values=keep it is in the file and its dump.
func TestCaptureReplayPython(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Python driver and load")
	}
	drivertest.RequirePython(t)
	started := time.Now()
	dir := t.TempDir()
	st := mustStack(t, stackConfig{CaptureDir: filepath.Join(dir, "captures")})
	file, counts := mustCapturePython(t, st, 8, "shape")

	// The capture: every request, the mix, the 10-row reads, no value.
	c, err := capturefile.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := capturefile.Summarize(c)
	byText := map[string]capturefile.StatementSummary{}
	for _, s := range sum.Statements {
		byText[s.Text] = s
	}
	sent := counts["read"] + counts["insert"] + counts["update"] + counts["unprepared"]
	for name, text := range map[string]string{
		"read":       "SELECT seq, kind, payload FROM capture_app.events WHERE user_id = ?",
		"insert":     "INSERT INTO capture_app.profiles (id, name, note) VALUES (?, ?, ?)",
		"update":     "UPDATE capture_app.profiles SET visits = ? WHERE id = ?",
		"unprepared": "SELECT name, visits FROM capture_app.profiles WHERE id = ?",
	} {
		if got := byText[text].Count; got != counts[name] {
			t.Errorf("%s: captured %d, the driver sent %d", name, got, counts[name])
		}
		if prep := name != "unprepared"; byText[text].Prepared != prep {
			t.Errorf("%s: captured as prepared=%v", name, byText[text].Prepared)
		}
	}
	prepared := counts["read"] + counts["insert"] + counts["update"]
	for name, want := range map[string]float64{"read": 70, "insert": 20, "update": 10} {
		if got := 100 * float64(counts[name]) / float64(prepared); math.Abs(got-want) > 3 {
			t.Errorf("%s is %.1f%% of the prepared statements; want about %.0f%%", name, got, want)
		}
	}
	tenRows := 0
	for _, r := range c.Records {
		if r.Rows == 10 {
			tenRows++
		}
	}
	if tenRows == 0 || sent < 2000 {
		t.Fatalf("%d requests sent, %d reads of 10 rows captured: too few for the test", sent, tenRows)
	}
	for what, b := range map[string][]byte{
		"capture file":  mustContents(t, file),
		"capture dump":  []byte(mustRun(t, exitOK, "capture", "dump", file)),
		"capture stats": []byte(mustRun(t, exitOK, "capture", "stats", file)),
	} {
		if bytes.Contains(b, []byte(captureMarker)) {
			t.Errorf("values=shape: the marker is in the %s", what)
		}
	}

	// The replay at full speed, three modes, with a budget.
	rj := filepath.Join(dir, "replay.json")
	out := mustRun(t, exitOK, "loadcheck", "--workload", "replay:"+file, "--modes", "off,fast,full", "--json", rj,
		"--rounds", "2", "--target-error", "0", "--warmup", "500ms", "--replay-speed", "max", "--max-overhead", "full=1000%")
	rep, raw := mustReport(t, rj)
	if bytes.Contains(raw, []byte(captureMarker)) || strings.Contains(out, captureMarker) {
		t.Errorf("values=shape: the marker is in the replay's output")
	}
	for _, want := range []string{"Comparison (op rate", "Replay of " + file, "captured*", "hottest keys"} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay's output lacks %q", want)
		}
	}
	if len(rep.Modes) != 3 || len(rep.Guardrail) != 1 || rep.Guardrail[0].Breached {
		t.Errorf("modes %+v, guardrail %+v; want off, fast, full and full's budget met", rep.Modes, rep.Guardrail)
	}
	if len(rep.Replay.Statements) != 4 {
		t.Errorf("replayed statements %+v; want the 4 captured", rep.Replay.Statements)
	}
	for _, s := range rep.Replay.Statements {
		if math.Abs(s.Replayed-float64(s.Captured)) > 0.01*float64(s.Captured) {
			t.Errorf("%s: replayed %.0f, captured %d: more than 1%% apart", s.Query, s.Replayed, s.Captured)
		}
	}
	if len(rep.Replay.Keys.Top) != 10 {
		t.Errorf("hottest keys %+v; want 10", rep.Replay.Keys.Top)
	}
	for _, k := range rep.Replay.Keys.Top {
		if math.Abs(k.CapturedPct-k.ReplayedPct) > 2 {
			t.Errorf("key %s: %.2f%% of the capture, %.2f%% of the replay", k.Key, k.CapturedPct, k.ReplayedPct)
		}
	}
	if top := rep.Replay.Keys.Top; len(top) > 0 && top[0].CapturedPct < 5 {
		t.Errorf("the hottest key has %.2f%% of the requests: no Zipf skew", top[0].CapturedPct)
	}

	// At the recorded timing, the captured op rate.
	r1 := filepath.Join(dir, "replay1x.json")
	out1 := mustRun(t, exitOK, "loadcheck", "--workload", "replay:"+file, "--modes", "off", "--json", r1, "--rounds", "1",
		"--target-error", "0", "--warmup", "0", "--replay-speed", "1x")
	rep1, _ := mustReport(t, r1)
	if got, want := rep1.Modes[0].OpRate, rep1.Replay.CapturedOpRate; math.Abs(got-want) > 0.05*want {
		t.Errorf("at 1x: %.0f op/s, captured %.0f op/s: more than 5%% apart\n%s", got, want, out1)
	} else {
		t.Logf("at 1x: %.0f op/s, captured %.0f op/s", got, want)
	}

	// values=keep: the marker is written, and shown.
	keep, _ := mustCapturePython(t, st, 2, "keep")
	if !bytes.Contains(mustContents(t, keep), []byte(captureMarker)) {
		t.Errorf("values=keep: the marker is not in the capture file")
	}
	if !strings.Contains(mustRun(t, exitOK, "capture", "dump", keep), captureMarker) {
		t.Errorf("values=keep: the marker is not in the dump")
	}

	// Against a deployment: the replay's own keyspace, and a budget breached by a mode
	// whose relay holds every request.
	relay := mustDelayRelay(t, st.Sidecar, 5*time.Millisecond)
	dj := filepath.Join(dir, "deployment.json")
	out = mustRun(t, exitGuardrail, "loadcheck", "--node", st.Node, "--sidecar", st.Sidecar, "--admin", st.Admin,
		"--workload", "replay:"+keep, "--replay-keyspace", "replay_owned", "--replay-speed", "max", "--modes", "off,slow",
		"--mode", "slow=target="+relay, "--max-overhead", "slow=1%", "--rounds", "3", "--target-error", "0", "--warmup", "0",
		"--json", dj)
	if !strings.Contains(out, "GUARDRAIL BREACHED") {
		t.Errorf("the deployment replay did not print its breach:\n%s", out)
	}
	t.Logf("the test took %v", time.Since(started).Round(time.Second))
}

// TestCaptureProtocolVersions: the capture reads each request at its connection's own
// protocol version. The Python driver sends the same requests (a fixed count from a fixed
// seed: prepared and unprepared statements, BATCHes, reads paged with a paging state) once
// at its default, v5, and once at v4. `capture stats` gives the same statements, counts,
// key distribution, consistency levels and page sizes both times, and the replay of the v5
// capture reproduces its statement counts within 1%.
func TestCaptureProtocolVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Python driver and load")
	}
	drivertest.RequirePython(t)
	dir := t.TempDir()
	st := mustStack(t, stackConfig{CaptureDir: filepath.Join(dir, "captures")})
	type statement struct {
		Count       int
		Consistency map[string]int
		PageSizes   map[string]int
	}
	type shape struct {
		statements map[string]statement // by text, prepared or not
		withKey    int
		distinct   int
		top        []int
	}
	capture := func(env ...string) (string, capturefile.Summary, shape, map[string]int) {
		file, counts := mustCapturePython(t, st, 0, "shape", append(env, "WORKLOAD_REQUESTS=3000", "WORKLOAD_EXTRAS=1")...)
		var sum capturefile.Summary
		if err := json.Unmarshal([]byte(mustRun(t, exitOK, "capture", "stats", "--json", file)), &sum); err != nil {
			t.Fatal(err)
		}
		sh := shape{statements: map[string]statement{}, withKey: sum.Keys.WithKey, distinct: sum.Keys.Distinct}
		for _, s := range sum.Statements {
			if strings.Contains(s.Text, "capture_app.") {
				sh.statements[fmt.Sprintf("%s (prepared %v)", s.Text, s.Prepared)] = statement{s.Count, s.Consistency, s.PageSizes}
			}
		}
		for _, k := range sum.Keys.Top {
			sh.top = append(sh.top, k.Count)
		}
		return file, sum, sh, counts
	}
	v5File, v5Sum, v5, v5Counts := capture()
	_, v4Sum, v4, v4Counts := capture("PROTOCOL_VERSION=4")
	if v5Counts["protocol_version"] != 5 || v4Counts["protocol_version"] != 4 {
		t.Fatalf("the driver negotiated v%d by default and v%d when asked for v4; want 5 and 4", v5Counts["protocol_version"], v4Counts["protocol_version"])
	}
	if v5Sum.ProtocolVersions["v5"] == 0 || v5Sum.ProtocolVersions["v4"] != 0 || v4Sum.ProtocolVersions["v4"] == 0 || v4Sum.ProtocolVersions["v5"] != 0 {
		t.Errorf("protocol versions: default %v, v4 %v", v5Sum.ProtocolVersions, v4Sum.ProtocolVersions)
	}
	if v5Counts["batch"] == 0 || v5Counts["paged"] == 0 || v5Counts["pages"] <= v5Counts["paged"] {
		t.Fatalf("the workload sent %v: no batch or no paging", v5Counts)
	}
	if len(v5.statements) < 6 {
		t.Errorf("v5: %d statements of the application captured; want at least 6: %v", len(v5.statements), v5.statements)
	}
	if !reflect.DeepEqual(v5.statements, v4.statements) {
		t.Errorf("statements differ:\nv5 %v\nv4 %v", v5.statements, v4.statements)
	}
	if v5.withKey != v4.withKey || v5.distinct != v4.distinct || !reflect.DeepEqual(v5.top, v4.top) {
		t.Errorf("keys differ: v5 %d with a key, %d distinct, top %v; v4 %d, %d, %v", v5.withKey, v5.distinct, v5.top, v4.withKey, v4.distinct, v4.top)
	}
	if v5.withKey < 2000 || v5.distinct < 100 {
		t.Errorf("v5: %d statements with a key, %d distinct: the keys were not read", v5.withKey, v5.distinct)
	}
	t.Logf("v5 and v4: %d application statements, %d with a key, %d distinct keys, the hottest %v", len(v5.statements), v5.withKey, v5.distinct, v5.top)

	// The replay of the v5 capture runs what it captured, at v4 (the default) and at v5.
	for _, version := range []string{"0", "5"} {
		rj := filepath.Join(dir, "replay-v5-at-"+version+".json")
		out := mustRun(t, exitOK, "loadcheck", "--workload", "replay:"+v5File, "--modes", "off", "--json", rj,
			"--rounds", "1", "--target-error", "0", "--warmup", "0", "--replay-speed", "max", "--protocol-version", version)
		if version == "5" && !strings.Contains(out, "protocol v5") {
			t.Errorf("the replay at --protocol-version 5 does not say so:\n%s", out)
		}
		rep, _ := mustReport(t, rj)
		if len(rep.Replay.Statements) < len(v5.statements) {
			t.Errorf("at %s: replayed statements %+v; want the %d captured", version, rep.Replay.Statements, len(v5.statements))
		}
		for _, s := range rep.Replay.Statements {
			if math.Abs(s.Replayed-float64(s.Captured)) > 0.01*float64(s.Captured) {
				t.Errorf("at %s: %s: replayed %.0f, captured %d: more than 1%% apart", version, s.Query, s.Replayed, s.Captured)
			}
		}
		if rep.Modes[0].Errors != 0 {
			t.Errorf("at %s: %d errors", version, rep.Modes[0].Errors)
		}
	}
}
