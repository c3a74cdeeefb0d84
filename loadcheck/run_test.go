package loadcheck

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

const (
	fakeNode    = "10.0.0.1:9042"
	fakeSidecar = "10.0.0.1:9043"
)

// fakeConfig is a deterministic check: one worker, a fixed operation count, no warmup,
// and no reporting interval but the last.
func fakeConfig(admin string, out *bytes.Buffer) Config {
	return Config{
		Node: fakeNode, Sidecar: fakeSidecar, Admin: admin, NodeAPI: admin,
		Rounds: 3, Ops: 200, Warmup: -1, Concurrency: 1, Interval: time.Hour, Out: out,
	}
}

func fakeEnv(d *fakeDriver) env { return env{clock: d.clk, driver: d} }

func TestRunModesAppliedAndRestored(t *testing.T) {
	api, url := mustFakeAPI(t)
	api.token = "s3cret"
	napi, nodeURL := mustFakeAPI(t) // the node's API takes no token
	state := func() string { return api.state() + " | " + napi.state() }
	initial := state()
	var out bytes.Buffer
	cfg := fakeConfig(url, &out)
	cfg.AdminToken = "s3cret"
	cfg.NodeAPI = nodeURL
	cfg.Modes = []string{"off", "fast", "full", "debug", "sampled", "node-debug", "slowall"}
	cfg.ModeSpecs = map[string]string{"slowall": "POST /storage_service/slow_query?enable=true&fast=true&threshold=0",
		"unused": "POST /storage_service/slow_query?enable=true"}

	// What each mode's runs must see on the admin API; everything else stays as it was.
	napiWant := func(mode string) string {
		return napi.state()
	}
	want := map[string]string{
		"off":        "enable=false fast=false threshold=123456 ttl=3600 probability=0 sidecar=warn node=info admin=error node:node=info",
		"fast":       "enable=true fast=true threshold=123456 ttl=3600 probability=0 sidecar=warn node=info admin=error node:node=info",
		"full":       "enable=true fast=false threshold=123456 ttl=3600 probability=0 sidecar=warn node=info admin=error node:node=info",
		"debug":      "enable=false fast=false threshold=123456 ttl=3600 probability=0 sidecar=debug node=info admin=error node:node=info",
		"sampled":    "enable=false fast=false threshold=123456 ttl=3600 probability=0.01 sidecar=warn node=info admin=error node:node=info",
		"node-debug": "enable=false fast=false threshold=123456 ttl=3600 probability=0 sidecar=warn node=info admin=error node:node=debug",
		"slowall":    "enable=true fast=true threshold=0 ttl=3600 probability=0.25 sidecar=warn node=info admin=error node:node=info",
	}
	clk := &fakeClock{}
	var seen []string
	var runMode []string
	d := &fakeDriver{clk: clk, costs: map[string]time.Duration{fakeNode: time.Millisecond, fakeSidecar: time.Millisecond}}
	d.onConn = func(string) { seen = append(seen, state()) }

	rep, err := run(context.Background(), cfg, fakeEnv(d))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if got := state(); got != initial {
		t.Errorf("state after the check = %s; want the initial %s", got, initial)
	}
	// The first connection creates the schema, before any mode is applied.
	if len(seen) != 1+3*7 || seen[0] != initial {
		t.Fatalf("connections = %d, first saw %s; want %d, the first with the initial state", len(seen), seen[0], 1+3*7)
	}
	for r, order := range rep.Order {
		for i, name := range order {
			runMode = append(runMode, name)
			if got := seen[1+r*7+i]; got != want[name]+" | "+napiWant(name) {
				t.Errorf("round %d, mode %s ran with %s; want %s", r+1, name, got, want[name])
			}
		}
	}
	if len(runMode) != 21 {
		t.Errorf("runs = %d; want 21", len(runMode))
	}
	if d.schemas != 1 {
		t.Errorf("schema created %d times; want once", d.schemas)
	}
}

func TestRunGuardrail(t *testing.T) {
	// The sidecar costs 1.5 ms per operation and the node 1 ms, so that the mode off
	// runs 33.3% slower than direct, with a little jitter across rounds.
	tests := []struct {
		name     string
		budgets  []Budget
		rounds   int
		wantErr  error
		breaches []string
	}{
		{"over budget", []Budget{{Mode: "off", Limit: 0.1}}, 3, ErrGuardrail, []string{"off"}},
		{"within budget", []Budget{{Mode: "off", Limit: 90}}, 3, nil, nil},
		{"baseline budget", []Budget{{Mode: "direct", Limit: 0}}, 3, nil, nil},
		{"one round cannot breach", []Budget{{Mode: "off", Limit: 0.1}}, 1, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, url := mustFakeAPI(t)
			var out bytes.Buffer
			cfg := fakeConfig(url, &out)
			cfg.Modes, cfg.Baseline, cfg.MaxOverhead, cfg.Rounds = []string{"direct", "off"}, "direct", tt.budgets, tt.rounds
			d := &fakeDriver{clk: &fakeClock{}, jitter: 10 * time.Microsecond,
				costs: map[string]time.Duration{fakeNode: time.Millisecond, fakeSidecar: 1500 * time.Microsecond}}
			rep, err := run(context.Background(), cfg, fakeEnv(d))
			if !errors.Is(err, tt.wantErr) || (err != nil && tt.wantErr == nil) {
				t.Fatalf("run error = %v; want %v\n%s", err, tt.wantErr, out.String())
			}
			var got []string
			for _, b := range rep.Breaches {
				got = append(got, b.Mode)
			}
			if !slices.Equal(got, tt.breaches) {
				t.Errorf("breaches = %v; want %v", got, tt.breaches)
			}
			if len(tt.breaches) > 0 && !strings.Contains(out.String(), "GUARDRAIL BREACHED on op rate: off costs 3") {
				t.Errorf("output does not state the breach plainly:\n%s", out.String())
			}
			off := rep.Mode("off")
			if off.DegradationPct < 32 || off.DegradationPct > 35 {
				t.Errorf("off degradation = %.2f%%; want about 33.3%%", off.DegradationPct)
			}
		})
	}
}

func TestRunRestoresAfterFailure(t *testing.T) {
	api, url := mustFakeAPI(t)
	initial := api.state()
	var out bytes.Buffer
	cfg := fakeConfig(url, &out)
	cfg.Modes = []string{"direct", "debug"}
	cfg.Baseline = "direct"
	d := &fakeDriver{clk: &fakeClock{}, failOn: fakeSidecar,
		costs: map[string]time.Duration{fakeNode: time.Millisecond, fakeSidecar: time.Millisecond}}
	if _, err := run(context.Background(), cfg, fakeEnv(d)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("run error = %v; want the connection failure", err)
	}
	if got := api.state(); got != initial {
		t.Errorf("state after a failed check = %s; want %s", got, initial)
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"budget for a mode not run", func(c *Config) { c.Modes = []string{"off"}; c.MaxOverhead = []Budget{{Mode: "fast", Limit: 5}} }, `names mode "fast", which is not run`},
		{"unknown mode", func(c *Config) { c.Modes = []string{"turbo"} }, `unknown mode "turbo"`},
		{"duplicate mode", func(c *Config) { c.Modes = []string{"off", "off"} }, "listed twice"},
		{"no target", func(c *Config) { c.Node, c.Sidecar = "", "" }, "no target"},
		{"no admin", func(c *Config) { c.Admin = "" }, "needs the sidecar's admin API"},
		{"no node api", func(c *Config) {
			c.NodeAPI, c.Modes, c.ModeSpecs = "", []string{"nd"}, map[string]string{"nd": "node:POST /system/logger/node?level=debug"}
		}, "needs the node's API"},
		{"direct without node", func(c *Config) { c.Node = ""; c.Modes = []string{"direct"} }, "give --node"},
		{"bad workload", func(c *Config) { c.Workload = "scan" }, `--workload "scan"`},
		{"bad pop", func(c *Config) { c.Pop = "zipf(1..10)" }, `--pop "zipf(1..10)"`},
		{"bad ratio", func(c *Config) { c.Workload, c.Ratio = "mixed", "write=1,delete=2" }, `unknown operation "delete"`},
		{"bad cl", func(c *Config) { c.CL = "MOST" }, `--cl "MOST"`},
		{"bad compression", func(c *Config) { c.Compression = "zstd" }, `--compression "zstd"`},
		{"protocol v5 with snappy", func(c *Config) { c.ProtocolVersion, c.Compression = 5, "snappy" }, "v5 compresses its segments with lz4 only"},
		{"protocol v2", func(c *Config) { c.ProtocolVersion = 2 }, "--protocol-version 2: want 3, 4 or 5"},
		{"negative rate", func(c *Config) { c.Rate = -1 }, "--rate"},
		{"bad spec", func(c *Config) { c.ModeSpecs = map[string]string{"x": "GET /y"} }, "mode x"},
		{"zero rounds", func(c *Config) { c.Rounds = -1 }, "--rounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := fakeConfig("http://127.0.0.1:1", &out)
			tt.mutate(&cfg)
			d := &fakeDriver{clk: &fakeClock{}, costs: map[string]time.Duration{fakeNode: time.Millisecond, fakeSidecar: time.Millisecond}}
			_, err := run(context.Background(), cfg, fakeEnv(d))
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run error = %v; want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestRunReports(t *testing.T) {
	_, url := mustFakeAPI(t)
	dir := t.TempDir()
	var out bytes.Buffer
	cfg := fakeConfig(url, &out)
	cfg.Modes = []string{"direct", "off", "fast"}
	cfg.MaxOverhead = []Budget{{Mode: "fast", Limit: 50}}
	cfg.JSON, cfg.CSV, cfg.HTML, cfg.HDRLogDir = filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.html"), filepath.Join(dir, "hdr")
	cfg.Interval = time.Nanosecond // an interval at every tick of the real ticker; content does not matter
	d := &fakeDriver{clk: &fakeClock{}, jitter: 5 * time.Microsecond,
		costs: map[string]time.Duration{fakeNode: time.Millisecond, fakeSidecar: 1100 * time.Microsecond}}
	rep, err := run(context.Background(), cfg, fakeEnv(d))
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	// JSON: the contract fields, for every mode.
	raw, err := os.ReadFile(cfg.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	modes, _ := doc["modes"].([]any)
	if len(modes) != 3 {
		t.Fatalf("json has %d modes; want 3", len(modes))
	}
	for _, m := range modes {
		mm := m.(map[string]any)
		for _, k := range []string{"name", "op_rate", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "errors", "degradation_pct", "p_value",
			"op_rate_stdev", "op_rate_stderr", "rounds", "degradation_err", "mean_ms", "cpu_us_per_op", "service", "runs"} {
			if _, ok := mm[k]; !ok {
				t.Errorf("json mode %v lacks %q", mm["name"], k)
			}
		}
		if rs, _ := mm["rounds"].([]any); len(rs) != 3 {
			t.Errorf("json mode %v has %d rounds; want 3", mm["name"], len(rs))
		}
		runs, _ := mm["runs"].([]any)
		if len(runs) != 3 {
			t.Fatalf("json mode %v has %d runs; want 3", mm["name"], len(runs))
		}
		if ivs, _ := runs[0].(map[string]any)["intervals"].([]any); len(ivs) == 0 {
			t.Errorf("json mode %v run 1 has no intervals", mm["name"])
		}
	}
	for _, k := range []string{"breaches", "guardrail", "order", "settings", "cpu", "baseline"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("json lacks %q", k)
		}
	}

	// CSV: a row per mode and per run, every row as wide as the header.
	f, err := os.Open(cfg.CSV)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+3+9 || !slices.Equal(rows[0], csvHeader) {
		t.Errorf("csv has %d rows, header %v; want 13 and %v", len(rows), rows[0], csvHeader)
	}

	// HDR logs: one per mode and round, readable by the library's reader, holding every
	// operation of the run.
	for _, m := range rep.Modes {
		for _, r := range m.Runs {
			path := hdrLogName(cfg.HDRLogDir, m.Name, r.Round-1)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rd := hdrhistogram.NewHistogramLogReader(bytes.NewReader(data))
			var resp, svc int64
			for {
				h, err := rd.NextIntervalHistogram()
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if h == nil {
					break
				}
				if h.Tag() == "service" {
					svc += h.TotalCount()
				} else {
					resp += h.TotalCount()
				}
			}
			if resp != r.Ops || svc != r.Ops {
				t.Errorf("%s: %d response and %d service values; want %d each", path, resp, svc, r.Ops)
			}
		}
	}
	if _, err := os.Stat(cfg.HTML); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"Results:", "Comparison", "%[1-mode/off]", "round 3", "guardrail ok on op rate: fast"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestHDRLogNanoseconds(t *testing.T) {
	// Values go to the log in nanoseconds: 1 ms recorded as 1000 µs reads back as 1e6 ns.
	h := newHist()
	h.RecordValues(1000, 10)
	h.RecordValue(250_000)
	ns := newNanoHist()
	toNanos(ns, h)
	if ns.TotalCount() != 11 {
		t.Fatalf("count = %d; want 11", ns.TotalCount())
	}
	for _, tt := range []struct {
		q    float64
		want int64
	}{{50, 1_000_000}, {100, 250_000_000}} {
		got := ns.ValueAtQuantile(tt.q)
		if float64(got) < float64(tt.want)*0.999 || float64(got) > float64(tt.want)*1.002 {
			t.Errorf("p%v = %d ns; want %d within 0.2%%", tt.q, got, tt.want)
		}
	}
}

func TestRunCancelRestores(t *testing.T) {
	api, url := mustFakeAPI(t)
	initial := api.state()
	var out bytes.Buffer
	cfg := fakeConfig(url, &out)
	cfg.Modes = []string{"off", "full"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := 0
	d := &fakeDriver{clk: &fakeClock{}, costs: map[string]time.Duration{fakeNode: time.Millisecond, fakeSidecar: time.Millisecond}}
	d.onConn = func(string) {
		if conns++; conns == 3 { // the schema session, one run, then cancel during the next
			cancel()
		}
	}
	_, err := run(ctx, cfg, fakeEnv(d))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run error = %v; want context.Canceled", err)
	}
	if got := api.state(); got != initial {
		t.Errorf("state after a cancelled check = %s; want %s", got, initial)
	}
}
