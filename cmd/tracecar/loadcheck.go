package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/tlsconfig"
	"github.com/tracecar/tracecar/loadcheck"
)

// loadcheckFlags are the parsed arguments of "tracecar loadcheck": the package's Config and
// what only the command line decides.
type loadcheckFlags struct {
	cfg loadcheck.Config
	// unthrottled allows a run without --rate against a deployment.
	unthrottled bool
}

// deployment reports whether the flags name a deployment to measure, rather than the
// embedded default.
func (f *loadcheckFlags) deployment() bool {
	return f.cfg.Node != "" || f.cfg.Sidecar != "" || f.cfg.Admin != ""
}

// parseLoadcheckFlags parses the arguments of "tracecar loadcheck". Errors are usage
// errors that say what is wrong and what is allowed; -h returns flag.ErrHelp after printing
// the flags to stderr. The admin token defaults to $TRACECAR_ADMIN_TOKEN.
func parseLoadcheckFlags(args []string, stderr io.Writer) (loadcheckFlags, error) {
	var lf loadcheckFlags
	cfg := &lf.cfg
	fs := newFlagSet("loadcheck", stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tracecar loadcheck [flags]\n\n"+
			"Measures what each tracing and logging mode costs: the op rate, the sidecar's and the node's\n"+
			"CPU per operation, the latency the client sees and the latency the sidecar adds.\n"+
			"With no --node, it starts a node and a sidecar as child processes of this binary.\n"+
			"Against a deployment it needs --rate (or --unthrottled, to saturate it on purpose).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Node, "node", "", "`HOST:PORT` of the node, the target of the direct mode")
	fs.StringVar(&cfg.Sidecar, "sidecar", "", "`HOST:PORT` of the sidecar, the target of the tracing modes (needs --node)")
	fs.StringVar(&cfg.Admin, "admin", "", "`URL` of the sidecar's admin API, e.g. http://127.0.0.1:10000 (needs --node); for a cluster, every sidecar's, as URL,URL,…: each mode's steps go to all, and the load spreads over the sidecars")
	fs.StringVar(&cfg.NodeAPI, "node-api", "", "`URL` of the node's API, for node:POST steps")
	fs.StringVar(&cfg.NodeMetrics, "node-metrics", "", "`URL` of the node's Prometheus metrics, for its CPU per op, e.g. http://127.0.0.1:10001/metrics (default: the node API's /metrics when --node-api is given)")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer `TOKEN` for the admin API and the node's API (default $TRACECAR_ADMIN_TOKEN)")
	var tlsFiles tlsconfig.ClientFiles
	fs.StringVar(&tlsFiles.CA, "tls-ca", "", "PEM CA bundle: connect to the node and the sidecar over TLS, checking their certificates with it")
	fs.StringVar(&tlsFiles.Cert, "tls-cert", "", "PEM client certificate, for a sidecar or node that requires one (mutual TLS)")
	fs.StringVar(&tlsFiles.Key, "tls-key", "", "PEM key for --tls-cert")
	fs.StringVar(&tlsFiles.ServerName, "tls-server-name", "", "name checked in the certificates (default: the host dialled)")
	modes := fs.String("modes", "", "comma-separated `MODES` to run, from "+strings.Join(loadcheck.BuiltinModes(), ",")+" and --mode ones (default "+strings.Join(loadcheck.DefaultModes(), ",")+")")
	fs.Func("mode", "define a mode as `NAME=SPEC`, steps separated by ';': \"POST /path?query\" (admin API), \"node:POST /path?query\" (node API), \"target=HOST:PORT\"; it runs when --modes lists it (or overrides a default mode); repeatable", func(s string) error {
		name, spec, err := loadcheck.ParseModeFlag(s)
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
	fs.IntVar(&cfg.Rounds, "rounds", loadcheck.DefaultRounds, "rounds at least; each runs every mode once, in alternating order")
	fs.Float64Var(&cfg.TargetError, "target-error", loadcheck.DefaultTargetError, "run more rounds, up to --max-rounds, until the standard error of every mode's difference from the baseline is under `PCT` percent of the baseline's sidecar CPU per op (node CPU, or op rate, when that is unknown); 0 runs exactly --rounds")
	fs.IntVar(&cfg.MaxRounds, "max-rounds", loadcheck.DefaultMaxRounds, "most rounds with --target-error")
	fs.DurationVar(&cfg.Duration, "duration", loadcheck.DefaultDuration, "measured time per run")
	fs.DurationVar(&cfg.Warmup, "warmup", loadcheck.DefaultWarmup, "warmup before each run; 0 for none")
	fs.Int64Var(&cfg.Ops, "n", 0, "operations per run; replaces --duration when > 0")
	fs.Int64Var(&cfg.Ops, "ops", 0, "same as -n")
	fs.StringVar(&cfg.Workload, "workload", loadcheck.DefaultWorkload, "write, read, mixed, or replay:FILE, a capture file (tracecar ctl capture) played back")
	fs.StringVar(&cfg.ReplaySpeed, "replay-speed", "", "a replay's speed: 1x (the recorded timing, the default), 2x, a factor such as 0.5, or max (as fast as the workers go)")
	fs.IntVar(&cfg.ReplayConnections, "replay-connections", 0, "a replay's connections per run (default: as many as the capture's)")
	fs.StringVar(&cfg.ReplayKeyspace, "replay-keyspace", "", "`NAME` of the keyspace a replay creates its tables in and owns; required against a deployment (the replay never writes into the captured keyspaces)")
	fs.StringVar(&cfg.Ratio, "ratio", "", "operation weights of the mixed workload (default "+loadcheck.DefaultRatio+")")
	fs.StringVar(&cfg.Pop, "pop", loadcheck.DefaultPop, "partition keys: seq=1..N, uniform(1..N) or gaussian(1..N)")
	fs.IntVar(&cfg.Concurrency, "concurrency", loadcheck.DefaultConcurrency, "number of workers")
	rate := fs.String("rate", "0", "fixed target `op/s` over all workers, e.g. 30000 or 30000/s, with latency measured from each operation's scheduled start; 0: unthrottled closed loop (needs --unthrottled against a deployment)")
	fs.BoolVar(&lf.unthrottled, "unthrottled", false, "against a deployment, run without --rate: saturate the node and sidecar on purpose")
	fs.StringVar(&cfg.CL, "cl", loadcheck.DefaultCL, "consistency level")
	fs.StringVar(&cfg.Compression, "compression", loadcheck.DefaultCompression, "frame compression: none, lz4 or snappy")
	fs.IntVar(&cfg.ProtocolVersion, "protocol-version", 0, "CQL protocol `version` of the load's client: 3 or 4, or 0 to negotiate (v4); its client, gocql v1.7, has no v5")
	fs.StringVar(&cfg.TraceContext, "trace-context", loadcheck.TraceContextNone, "a fresh W3C traceparent in every request's custom payload: sampled, unsampled or none (the built-in mode parent sends sampled ones)")
	fs.IntVar(&cfg.Connections, "connections", loadcheck.DefaultConnections, "connections per host")
	fs.DurationVar(&cfg.Timeout, "timeout", loadcheck.DefaultTimeout, "request timeout")
	overhead := fs.String("max-overhead", "", "budgets `MODE=[METRIC:]LIMIT,...`, METRIC one of ops (op rate, %; the default without --rate), cpu (sidecar CPU per op, % or absolute such as +0.5us; the default with --rate), node-cpu (same for the node), p99 (client p99, %), added-p99 (sidecar's added latency p99, absolute such as 200us); e.g. fast=5%,full=cpu:+0.5us: exit 3 as --verdict says")
	verdictFlags(fs, cfg)
	fs.StringVar(&cfg.JSON, "json", "", "write the full report as JSON to `FILE`")
	fs.StringVar(&cfg.CSV, "csv", "", "write per-mode and per-run figures as CSV to `FILE`")
	fs.StringVar(&cfg.HTML, "html", "", "write a self-contained HTML page with charts to `FILE`")
	fs.StringVar(&cfg.HDRLogDir, "hdr-log", "", "write HdrHistogram interval logs, one per mode and round, to `DIR`")

	if err := parseFlags(fs, args); err != nil {
		return lf, err
	}
	if cfg.AdminToken == "" { // not the flag's default, so that usage never prints it
		cfg.AdminToken = os.Getenv("TRACECAR_ADMIN_TOKEN")
	}
	if tlsFiles != (tlsconfig.ClientFiles{}) {
		if cfg.Node == "" && cfg.Sidecar == "" {
			return lf, usageErrorf("--tls-* need --node or --sidecar: the embedded node and sidecar speak plaintext")
		}
		var err error
		if cfg.TLS, err = tlsconfig.Client(tlsFiles, "--tls"); err != nil {
			return lf, usageErrorf("%v", err)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["warmup"] && cfg.Warmup == 0 {
		cfg.Warmup = -1 // explicit: no warmup
	}
	switch {
	case set["rounds"] && cfg.Rounds < 1:
		return lf, usageErrorf("--rounds %d: want at least 1", cfg.Rounds)
	case set["max-rounds"] && cfg.MaxRounds < cfg.Rounds:
		return lf, usageErrorf("--max-rounds %d: want at least --rounds (%d)", cfg.MaxRounds, cfg.Rounds)
	case set["concurrency"] && cfg.Concurrency < 1:
		return lf, usageErrorf("--concurrency %d: want at least 1", cfg.Concurrency)
	case set["connections"] && cfg.Connections < 1:
		return lf, usageErrorf("--connections %d: want at least 1", cfg.Connections)
	case set["duration"] && cfg.Duration <= 0:
		return lf, usageErrorf("--duration %v: want a positive duration", cfg.Duration)
	case set["workload"] && cfg.Workload != "mixed" && set["ratio"]:
		return lf, usageErrorf("--ratio applies to --workload mixed, not %s", cfg.Workload)
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
			return lf, usageErrorf("--modes %q names no mode", *modes)
		}
	}
	var err error
	if cfg.Rate, err = parseRate(*rate); err != nil {
		return lf, err
	}
	if cfg.MaxOverhead, err = loadcheck.ParseBudgets(*overhead); err != nil {
		return lf, err
	}
	if cfg.NodeMetrics == "" && cfg.NodeAPI != "" {
		cfg.NodeMetrics = strings.TrimRight(cfg.NodeAPI, "/") + "/metrics"
	}

	// The sidecar fronts one node, and the direct mode and the baseline need that node: a
	// sidecar named without its node would be measured against the wrong one, or against
	// an embedded one that no one asked for.
	if cfg.Node == "" && (cfg.Sidecar != "" || cfg.Admin != "") {
		return lf, usageErrorf("--sidecar and --admin need --node HOST:PORT, the node that sidecar fronts: " +
			"loadcheck measures a deployment only with its node (for the direct mode and the node's figures); " +
			"give no --node, --sidecar or --admin to measure a node and sidecar it starts itself")
	}
	replay := strings.HasPrefix(cfg.Workload, loadcheck.ReplayPrefix)
	switch {
	case set["replay-connections"] && cfg.ReplayConnections < 1:
		return lf, usageErrorf("--replay-connections %d: want at least 1", cfg.ReplayConnections)
	case lf.deployment() && replay && cfg.ReplayKeyspace == "":
		return lf, usageErrorf("a replay against a deployment needs --replay-keyspace NAME: a keyspace the replay owns, " +
			"where it creates the capture's tables; it never writes into the captured keyspaces")
	case lf.deployment() && replay && cfg.Rate == 0 && !set["replay-speed"]:
		return lf, usageErrorf("a replay against a deployment needs --replay-speed (1x, 2x, max) or --rate OP/S, given on purpose: " +
			"the replay then sends the capture's load, or more, to a production node")
	case lf.unthrottled && cfg.Rate > 0:
		return lf, usageErrorf("--unthrottled and --rate %v contradict each other: give one", cfg.Rate)
	case lf.deployment() && cfg.Rate == 0 && !lf.unthrottled && !(replay && set["replay-speed"]):
		return lf, usageErrorf("against a deployment (--node, --sidecar or --admin), give --rate OP/S: " +
			"without it loadcheck runs a closed loop as fast as the node answers, which saturates a production node and its sidecar; " +
			"at a fixed rate the verdict comes from CPU per op and added latency instead of the op rate. " +
			"To saturate it on purpose, give --unthrottled")
	}
	if err := loadcheck.Validate(lf.cfg); err != nil {
		return lf, err
	}
	return lf, nil
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

func runLoadcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	lf, err := parseLoadcheckFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg := lf.cfg
	cfg.Out = stdout
	cfg.Progress = isTerminal(stdout)

	if !lf.deployment() {
		st, err := startChildren(ctx, stdout)
		if err != nil {
			return err
		}
		failed := true
		defer func() { st.stop(failed) }()
		cfg.Node, cfg.Sidecar, cfg.Admin, cfg.NodeAPI = st.node, st.sidecar, st.admin, st.nodeAPI
		cfg.NodeMetrics = st.nodeAPI + "/metrics"
		_, err = loadcheck.Run(ctx, cfg)
		failed = err != nil && !errors.Is(err, loadcheck.ErrGuardrail)
		return err
	}
	_, err = loadcheck.Run(ctx, cfg)
	return err
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
