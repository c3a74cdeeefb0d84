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

	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/tlsconfig"
	"github.com/tracecar/tracecar/loadcheck"
)

// loadcheckFlags are the parsed arguments of "tracecar loadcheck": the package's Config and
// what only the command line decides.
type loadcheckFlags struct {
	cfg loadcheck.Config
	// unthrottled allows a run without --rate against a deployment.
	unthrottled bool

	// What the flags give before it is checked into cfg.
	tls                      tlsconfig.ClientFiles
	modes, rate, maxOverhead string
	// memory is the embedded node's --memory-limit.
	memory *memoryLimit
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
	fs := newFlagSet("loadcheck", stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tracecar loadcheck [flags]\n\n"+
			"Measures what each tracing and logging mode costs: the op rate, the sidecar's and the node's\n"+
			"CPU per operation, the latency the client sees and the latency the sidecar adds.\n"+
			"With no --node, it starts a node and a sidecar as child processes of this binary.\n"+
			"Against a deployment it needs --rate (or --unthrottled, to saturate it on purpose).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	lf.addTargetFlags(fs)
	lf.addModeFlags(fs)
	lf.addWorkloadFlags(fs)
	lf.addClientFlags(fs)
	lf.addBudgetFlags(fs)
	lf.addReportFlags(fs)

	if err := parseFlags(fs, args); err != nil {
		return lf, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := lf.checkRun(set); err != nil {
		return lf, err
	}
	if err := lf.checkTarget(set); err != nil {
		return lf, err
	}
	if err := loadcheck.Validate(lf.cfg); err != nil {
		return lf, err
	}
	return lf, nil
}

// addTargetFlags defines what loadcheck measures: the node, the sidecar, their APIs, and
// how to reach them.
func (lf *loadcheckFlags) addTargetFlags(fs *flag.FlagSet) {
	cfg := &lf.cfg
	fs.StringVar(&cfg.Node, "node", "", "`HOST:PORT` of the node, the target of the direct mode")
	fs.StringVar(&cfg.Sidecar, "sidecar", "", "`HOST:PORT` of the sidecar, the target of the tracing modes (needs --node)")
	fs.StringVar(&cfg.Admin, "admin", "", "`URL` of the sidecar's admin API, e.g. http://127.0.0.1:10000 (needs --node); for a cluster, every sidecar's, as URL,URL,…: each mode's steps go to all, and the load spreads over the sidecars")
	fs.StringVar(&cfg.NodeAPI, "node-api", "", "`URL` of the node's API, for node:POST steps")
	fs.StringVar(&cfg.NodeMetrics, "node-metrics", "", "`URL` of the node's Prometheus metrics, for its CPU per op, e.g. http://127.0.0.1:10001/metrics (default: the node API's /metrics when --node-api is given)")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer `TOKEN` for the admin API and the node's API (default $TRACECAR_ADMIN_TOKEN)")
	fs.StringVar(&lf.tls.CA, "tls-ca", "", "PEM CA bundle: connect to the node and the sidecar over TLS, checking their certificates with it")
	fs.StringVar(&lf.tls.Cert, "tls-cert", "", "PEM client certificate, for a sidecar or node that requires one (mutual TLS)")
	fs.StringVar(&lf.tls.Key, "tls-key", "", "PEM key for --tls-cert")
	fs.StringVar(&lf.tls.ServerName, "tls-server-name", "", "name checked in the certificates (default: the host dialled)")
	lf.memory = memoryLimitFlag(fs, "node loadcheck starts (with no --node)")
}

// addModeFlags defines the modes compared, and the rounds that compare them.
func (lf *loadcheckFlags) addModeFlags(fs *flag.FlagSet) {
	cfg := &lf.cfg
	fs.StringVar(&lf.modes, "modes", "", "comma-separated `MODES` to run, from "+strings.Join(loadcheck.BuiltinModes(), ",")+" and --mode ones (default "+strings.Join(loadcheck.DefaultModes(), ",")+")")
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
	fs.DurationVar(&cfg.MaxTime, "max-time", loadcheck.DefaultMaxTime, "with --target-error, start no round past --rounds that would end the run (preload included) later than this; 0 for no limit")
	fs.DurationVar(&cfg.Duration, "duration", loadcheck.DefaultDuration, "measured time per run")
	fs.DurationVar(&cfg.Warmup, "warmup", loadcheck.DefaultWarmup, "warmup before each run; 0 for none")
	fs.Int64Var(&cfg.Ops, "n", 0, "operations per run; replaces --duration when > 0")
	fs.Var(opsFlag{cfg}, "ops", "same as -n with a `COUNT`; with --profile, the operations' weights: insert=1,read1=9 or ops(insert=1,read1=9)")
}

// opsFlag is --ops: a count (as -n) or a profile's operations mix (as cassandra-stress's
// ops(...)).
type opsFlag struct{ cfg *loadcheck.Config }

func (f opsFlag) String() string {
	if f.cfg == nil {
		return ""
	}
	if f.cfg.OpsMix != "" {
		return f.cfg.OpsMix
	}
	if f.cfg.Ops != 0 {
		return strconv.FormatInt(f.cfg.Ops, 10)
	}
	return ""
}

func (f opsFlag) Set(s string) error {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		f.cfg.Ops = n
		return nil
	}
	if !strings.Contains(s, "=") {
		return fmt.Errorf("want a count of operations per run, or a profile's mix such as insert=1,read1=9")
	}
	f.cfg.OpsMix = s
	return nil
}

// addWorkloadFlags defines the load: its operations, keys, workers and rate.
func (lf *loadcheckFlags) addWorkloadFlags(fs *flag.FlagSet) {
	cfg := &lf.cfg
	fs.StringVar(&cfg.Workload, "workload", loadcheck.DefaultWorkload, "write, read, mixed, or replay:FILE, a capture file (tracecar ctl capture) played back")
	fs.StringVar(&cfg.ReplaySpeed, "replay-speed", "", "a replay's speed: 1x (the recorded timing, the default), 2x, a factor such as 0.5, or max (as fast as the workers go)")
	fs.IntVar(&cfg.ReplayConnections, "replay-connections", 0, "a replay's connections per run (default: as many as the capture's)")
	fs.StringVar(&cfg.ReplayKeyspace, "replay-keyspace", "", "`NAME` of the keyspace a replay creates its tables in and owns; required against a deployment (the replay never writes into the captured keyspaces)")
	fs.StringVar(&cfg.Profile, "profile", "", "a cassandra-stress user profile, `FILE`.yaml, to run instead of the built-in workloads: its keyspace, table, columnspec, insert and queries, mixed by --ops")
	fs.Int64Var(&cfg.Preload, "preload", 0, "with --profile, write `N` partitions of --pop before the first run, so that its queries find rows (0: none; default: as many as fit a byte budget, an eighth of the node's --memory-limit up to 256 MiB, printed before it starts)")
	fs.IntVar(&cfg.PageSize, "page-size", loadcheck.DefaultPageSize, "with --profile, the `ROWS` per page of its queries (every page is read)")
	fs.StringVar(&cfg.Ratio, "ratio", "", "operation weights of the mixed workload (default "+loadcheck.DefaultRatio+")")
	fs.StringVar(&cfg.Pop, "pop", loadcheck.DefaultPop, "partition keys: seq=1..N, uniform(1..N) or gaussian(1..N)")
	fs.IntVar(&cfg.Concurrency, "concurrency", loadcheck.DefaultConcurrency, "number of workers")
	fs.StringVar(&lf.rate, "rate", "0", "fixed target `op/s` over all workers, e.g. 30000 or 30000/s, with latency measured from each operation's scheduled start; 0: unthrottled closed loop (needs --unthrottled against a deployment)")
	fs.BoolVar(&lf.unthrottled, "unthrottled", false, "against a deployment, run without --rate: saturate the node and sidecar on purpose")
}

// addClientFlags defines how the load's client talks to the node and the sidecar.
func (lf *loadcheckFlags) addClientFlags(fs *flag.FlagSet) {
	cfg := &lf.cfg
	fs.StringVar(&cfg.CL, "cl", loadcheck.DefaultCL, "consistency level")
	fs.StringVar(&cfg.Compression, "compression", loadcheck.DefaultCompression, "frame compression: none, lz4 or snappy")
	fs.IntVar(&cfg.ProtocolVersion, "protocol-version", 0, "CQL protocol `version` of the load: 3, 4 or 5, or 0 to negotiate (v4); 5 runs through loadcheck's own CQL client, as gocql v1.7 has no v5")
	fs.StringVar(&cfg.TraceContext, "trace-context", loadcheck.TraceContextNone, "a fresh W3C traceparent in every request's custom payload: sampled, unsampled or none (the built-in mode parent sends sampled ones)")
	fs.IntVar(&cfg.Connections, "connections", loadcheck.DefaultConnections, "connections per host")
	fs.DurationVar(&cfg.Timeout, "timeout", loadcheck.DefaultTimeout, "request timeout")
}

// addBudgetFlags defines the budgets whose breach exits 3.
func (lf *loadcheckFlags) addBudgetFlags(fs *flag.FlagSet) {
	fs.StringVar(&lf.maxOverhead, "max-overhead", "", "budgets `MODE=[METRIC:]LIMIT,...`, METRIC one of "+loadcheck.BudgetMetricsHelp()+"; e.g. fast=5%,full=cpu:+0.5us: exit 3 as --verdict says")
	verdictFlags(fs, &lf.cfg)
}

// addReportFlags defines the files the report is written to.
func (lf *loadcheckFlags) addReportFlags(fs *flag.FlagSet) {
	cfg := &lf.cfg
	fs.StringVar(&cfg.JSON, "json", "", "write the full report as JSON to `FILE`")
	fs.StringVar(&cfg.CSV, "csv", "", "write per-mode and per-run figures as CSV to `FILE`")
	fs.StringVar(&cfg.HTML, "html", "", "write a self-contained HTML page with charts to `FILE`")
	fs.StringVar(&cfg.HDRLogDir, "hdr-log", "", "write HdrHistogram interval logs, one per mode and round, to `DIR`")
}

// checkRun checks the token, the TLS files, the rounds, the workload, the modes, the rate
// and the budgets into cfg; set holds the flags given.
func (lf *loadcheckFlags) checkRun(set map[string]bool) error {
	cfg := &lf.cfg
	if cfg.AdminToken == "" { // not the flag's default, so that usage never prints it
		cfg.AdminToken = os.Getenv("TRACECAR_ADMIN_TOKEN")
	}
	if lf.tls != (tlsconfig.ClientFiles{}) {
		if cfg.Node == "" && cfg.Sidecar == "" {
			return usageErrorf("--tls-* need --node or --sidecar: the embedded node and sidecar speak plaintext")
		}
		var err error
		if cfg.TLS, err = tlsconfig.Client(lf.tls, "--tls"); err != nil {
			return usageErrorf("%v", err)
		}
	}
	if set["warmup"] && cfg.Warmup == 0 {
		cfg.Warmup = -1 // explicit: no warmup
	}
	if cfg.MaxTime < 0 {
		return usageErrorf("--max-time %v: want a duration, 0 for no limit", cfg.MaxTime)
	}
	if set["max-time"] && cfg.MaxTime == 0 {
		cfg.MaxTime = -1 // explicit: no limit
	}
	if cfg.Preload < 0 {
		return usageErrorf("--preload %d: want a number of partitions, 0 for none", cfg.Preload)
	}
	if set["preload"] && cfg.Preload == 0 {
		cfg.Preload = -1 // explicit: no preload
	}
	switch {
	case set["rounds"] && cfg.Rounds < 1:
		return usageErrorf("--rounds %d: want at least 1", cfg.Rounds)
	case set["max-rounds"] && cfg.MaxRounds < cfg.Rounds:
		return usageErrorf("--max-rounds %d: want at least --rounds (%d)", cfg.MaxRounds, cfg.Rounds)
	case set["concurrency"] && cfg.Concurrency < 1:
		return usageErrorf("--concurrency %d: want at least 1", cfg.Concurrency)
	case set["connections"] && cfg.Connections < 1:
		return usageErrorf("--connections %d: want at least 1", cfg.Connections)
	case set["duration"] && cfg.Duration <= 0:
		return usageErrorf("--duration %v: want a positive duration", cfg.Duration)
	case set["workload"] && cfg.Workload != "mixed" && set["ratio"]:
		return usageErrorf("--ratio applies to --workload mixed, not %s", cfg.Workload)
	}
	if set["ratio"] && !set["workload"] {
		cfg.Workload = "mixed"
	}
	if lf.modes != "" {
		for _, m := range strings.Split(lf.modes, ",") {
			if m = strings.TrimSpace(m); m != "" {
				cfg.Modes = append(cfg.Modes, m)
			}
		}
		if len(cfg.Modes) == 0 {
			return usageErrorf("--modes %q names no mode", lf.modes)
		}
	}
	var err error
	if cfg.Rate, err = parseRate(lf.rate); err != nil {
		return err
	}
	if cfg.MaxOverhead, err = loadcheck.ParseBudgets(lf.maxOverhead); err != nil {
		return err
	}
	if cfg.NodeMetrics == "" && cfg.NodeAPI != "" {
		cfg.NodeMetrics = strings.TrimRight(cfg.NodeAPI, "/") + "/metrics"
	}
	return nil
}

// checkTarget checks that a deployment is named whole, and measured at a rate given on
// purpose; set holds the flags given.
func (lf *loadcheckFlags) checkTarget(set map[string]bool) error {
	cfg := &lf.cfg
	// The sidecar fronts one node, and the direct mode and the baseline need that node: a
	// sidecar named without its node would be measured against the wrong one, or against
	// an embedded one that no one asked for.
	if cfg.Node == "" && (cfg.Sidecar != "" || cfg.Admin != "") {
		return usageErrorf("--sidecar and --admin need --node HOST:PORT, the node that sidecar fronts: " +
			"loadcheck measures a deployment only with its node (for the direct mode and the node's figures); " +
			"give no --node, --sidecar or --admin to measure a node and sidecar it starts itself")
	}
	if set["memory-limit"] && lf.deployment() {
		return usageErrorf("--memory-limit bounds the node loadcheck starts: give it without --node, --sidecar or --admin")
	}
	if !lf.deployment() {
		cfg.NodeMemoryLimit = lf.memory.n
	}
	replay := strings.HasPrefix(cfg.Workload, loadcheck.ReplayPrefix)
	switch {
	case set["replay-connections"] && cfg.ReplayConnections < 1:
		return usageErrorf("--replay-connections %d: want at least 1", cfg.ReplayConnections)
	case lf.deployment() && replay && cfg.ReplayKeyspace == "":
		return usageErrorf("a replay against a deployment needs --replay-keyspace NAME: a keyspace the replay owns, " +
			"where it creates the capture's tables; it never writes into the captured keyspaces")
	case lf.deployment() && replay && cfg.Rate == 0 && !set["replay-speed"]:
		return usageErrorf("a replay against a deployment needs --replay-speed (1x, 2x, max) or --rate OP/S, given on purpose: " +
			"the replay then sends the capture's load, or more, to a production node")
	case lf.unthrottled && cfg.Rate > 0:
		return usageErrorf("--unthrottled and --rate %v contradict each other: give one", cfg.Rate)
	case lf.deployment() && cfg.Rate == 0 && !lf.unthrottled && !(replay && set["replay-speed"]):
		return usageErrorf("against a deployment (--node, --sidecar or --admin), give --rate OP/S: " +
			"without it loadcheck runs a closed loop as fast as the node answers, which saturates a production node and its sidecar; " +
			"at a fixed rate the verdict comes from CPU per op and added latency instead of the op rate. " +
			"To saturate it on purpose, give --unthrottled")
	}
	return nil
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
	cfg.Stderr = stderr

	if !lf.deployment() {
		return runWithChildren(ctx, cfg, lf.memory, stdout)
	}
	_, err = loadcheck.Run(ctx, cfg)
	return err
}

// runWithChildren runs the load check against a node and a sidecar that it starts as
// child processes. The run and the children are the actors of one lifecycle group: the
// run's end stops the children. Their folder is kept after a run that failed.
func runWithChildren(ctx context.Context, cfg loadcheck.Config, memory *memoryLimit, stdout io.Writer) error {
	st, err := startChildren(ctx, memory, stdout)
	if err != nil {
		return err
	}
	cfg.Node, cfg.Sidecar, cfg.Admin, cfg.NodeAPI = st.node, st.sidecar, st.admin, st.nodeAPI
	cfg.NodeMetrics = st.nodeAPI + "/metrics"
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g lifecycle.Group
	g.Add(func() error {
		_, err := loadcheck.Run(runCtx, cfg)
		return err
	}, func(error) { cancel() })
	st.join(&g)
	err = g.Run()
	st.remove(err != nil && !errors.Is(err, loadcheck.ErrGuardrail))
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
