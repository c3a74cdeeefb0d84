package loadcheck

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ParseFlags parses the arguments of "tracecar loadcheck" into a Config. Errors wrap
// ErrUsage and say what is wrong and what is allowed; -h returns flag.ErrHelp after
// printing the flags to stderr. Out and Progress are left for the caller to set. An empty
// --node and --sidecar mean the embedded default, which the caller provides.
// The admin token defaults to $TRACECAR_ADMIN_TOKEN.
func ParseFlags(args []string, stderr io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("tracecar loadcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tracecar loadcheck [flags]\n\n"+
			"Measures the op rate and latency of each tracing and logging mode against the node.\n"+
			"With no --node and --sidecar, it starts an embedded node and sidecar.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Node, "node", "", "`HOST:PORT` of the node, the target of the direct mode")
	fs.StringVar(&cfg.Sidecar, "sidecar", "", "`HOST:PORT` of the sidecar, the target of the tracing modes")
	fs.StringVar(&cfg.Admin, "admin", "", "`URL` of the sidecar's admin API, e.g. http://127.0.0.1:10000; for a cluster, every sidecar's, as URL,URL,…: each mode's steps go to all, and the load spreads over the sidecars")
	fs.StringVar(&cfg.NodeAPI, "node-api", "", "`URL` of the node's API, for node:POST steps")
	fs.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("TRACECAR_ADMIN_TOKEN"), "bearer `TOKEN` for the admin API (default $TRACECAR_ADMIN_TOKEN)")
	modes := fs.String("modes", "", "comma-separated `MODES` to run, from "+strings.Join(builtinOrder, ",")+" and --mode ones (default "+strings.Join(defaultModes, ",")+")")
	fs.Func("mode", "define a mode as `NAME=SPEC`, steps separated by ';': \"POST /path?query\" (admin API), \"node:POST /path?query\" (node API), \"target=HOST:PORT\"; repeatable", func(s string) error {
		name, spec, err := parseModeFlag(s)
		if err != nil {
			return err
		}
		if cfg.ModeSpecs == nil {
			cfg.ModeSpecs = map[string]string{}
		}
		if _, dup := cfg.ModeSpecs[name]; dup {
			return fmt.Errorf("mode %s is defined twice", name)
		}
		cfg.ModeSpecs[name] = spec
		return nil
	})
	fs.StringVar(&cfg.Baseline, "baseline", "", "`MODE` the others are compared with (default off, or the first mode)")
	fs.IntVar(&cfg.Rounds, "rounds", DefaultRounds, "rounds; each runs every mode once, in alternating order")
	fs.DurationVar(&cfg.Duration, "duration", DefaultDuration, "measured time per run")
	fs.DurationVar(&cfg.Warmup, "warmup", DefaultWarmup, "warmup before each run; 0 for none")
	fs.Int64Var(&cfg.Ops, "n", 0, "operations per run; replaces --duration when > 0")
	fs.Int64Var(&cfg.Ops, "ops", 0, "same as -n")
	fs.StringVar(&cfg.Workload, "workload", DefaultWorkload, "write, read or mixed")
	fs.StringVar(&cfg.Ratio, "ratio", "", "operation weights of the mixed workload (default "+DefaultRatio+")")
	fs.StringVar(&cfg.Pop, "pop", DefaultPop, "partition keys: seq=1..N, uniform(1..N) or gaussian(1..N)")
	fs.IntVar(&cfg.Concurrency, "concurrency", DefaultConcurrency, "number of workers")
	rate := fs.String("rate", "0", "fixed target `op/s` over all workers, e.g. 30000 or 30000/s, with latency measured from each operation's scheduled start; 0: unthrottled closed loop")
	fs.StringVar(&cfg.CL, "cl", DefaultCL, "consistency level")
	fs.StringVar(&cfg.Compression, "compression", DefaultCompression, "frame compression: none, lz4 or snappy")
	fs.IntVar(&cfg.Connections, "connections", DefaultConnections, "connections per host")
	fs.DurationVar(&cfg.Timeout, "timeout", DefaultTimeout, "request timeout")
	overhead := fs.String("max-overhead", "", "overhead budgets `MODE=PCT,...`, e.g. fast=5%,full=20%: exit 3 when a mode's degradation is over its budget and significant (p < 0.05)")
	fs.StringVar(&cfg.JSON, "json", "", "write the full report as JSON to `FILE`")
	fs.StringVar(&cfg.CSV, "csv", "", "write per-mode and per-run figures as CSV to `FILE`")
	fs.StringVar(&cfg.HTML, "html", "", "write a self-contained HTML page with charts to `FILE`")
	fs.StringVar(&cfg.HDRLogDir, "hdr-log", "", "write HdrHistogram interval logs, one per mode and round, to `DIR`")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, &usageError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return cfg, usageErrorf("unexpected argument %q: loadcheck takes flags only", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["warmup"] && cfg.Warmup == 0 {
		cfg.Warmup = -1 // explicit: no warmup
	}
	if set["rounds"] && cfg.Rounds < 1 {
		return cfg, usageErrorf("--rounds %d: want at least 1", cfg.Rounds)
	}
	if set["concurrency"] && cfg.Concurrency < 1 {
		return cfg, usageErrorf("--concurrency %d: want at least 1", cfg.Concurrency)
	}
	if set["connections"] && cfg.Connections < 1 {
		return cfg, usageErrorf("--connections %d: want at least 1", cfg.Connections)
	}
	if set["duration"] && cfg.Duration <= 0 {
		return cfg, usageErrorf("--duration %v: want a positive duration", cfg.Duration)
	}
	if set["workload"] && cfg.Workload != "mixed" && set["ratio"] {
		return cfg, usageErrorf("--ratio applies to --workload mixed, not %s", cfg.Workload)
	}
	if set["ratio"] && !set["workload"] {
		cfg.Workload = "mixed"
	}
	if *modes != "" {
		for _, m := range strings.Split(*modes, ",") {
			if m = strings.TrimSpace(m); m != "" {
				cfg.Modes = append(cfg.Modes, m)
			}
		}
		if len(cfg.Modes) == 0 {
			return cfg, usageErrorf("--modes %q names no mode", *modes)
		}
	}
	var err error
	if cfg.Rate, err = parseRate(*rate); err != nil {
		return cfg, err
	}
	if cfg.MaxOverhead, err = parseBudgets(*overhead); err != nil {
		return cfg, err
	}

	// Check what can be checked before the targets are known: with none given, the
	// caller starts the embedded node and sidecar, with both APIs.
	probe := cfg
	probe.setDefaults()
	if _, err := probe.check(); err != nil {
		return cfg, err
	}
	if probe.Node == "" && probe.Sidecar == "" {
		probe.Node, probe.Sidecar, probe.Admin, probe.NodeAPI = "127.0.0.1:9042", "127.0.0.1:9043", "127.0.0.1:10000", "127.0.0.1:10001"
	}
	ms, _, err := resolveModes(&probe)
	if err != nil {
		return cfg, err
	}
	if err := checkBudgets(probe.MaxOverhead, ms); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// parseRate parses "30000", "30000/s" and "0".
func parseRate(s string) (float64, error) {
	v := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, usageErrorf("--rate %q: want 0 (unthrottled) or a positive op/s such as 30000 or 30000/s", s)
	}
	return r, nil
}

// parseBudgets parses "fast=5%,full=20%" (the % sign is optional).
func parseBudgets(s string) (map[string]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		name = strings.TrimSpace(name)
		pct, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "%"), 64)
		if !ok || name == "" || err != nil || math.IsNaN(pct) || math.IsInf(pct, 0) {
			return nil, usageErrorf("--max-overhead %q: want MODE=PCT,... such as fast=5%%,full=20%%", s)
		}
		if _, dup := out[name]; dup {
			return nil, usageErrorf("--max-overhead %q: mode %s has two budgets", s, name)
		}
		out[name] = pct
	}
	return out, nil
}
