// Package loadcheck measures what each tracing and logging mode of a tracecar sidecar costs
// against its node, the way people did it by hand with cassandra-stress, curl and a
// spreadsheet, and with the statistics to trust the result.
//
// A run sends a cassandra-stress-like workload (keyspace1.standard1, prepared statements,
// through gocql), a cassandra-stress user profile, or the replay of a capture to a target
// for a fixed time or number of operations, after a warmup. Profiles, replays and
// protocol v5 go through loadcheck's own CQL client. Both clients (loadcheck/client) give
// each worker one small interface, on which the workloads' operations are built once
// (op.go).
// A mode is a set of admin-API calls made before its runs (and undone after each one) plus
// the target its load goes to. Every round runs every mode once, in an order that
// alternates between rounds. Per mode, the op rates of the rounds give a mean, stdev and
// stderr, the degradation versus a baseline mode with its error, and a Welch t-test
// p-value; latency percentiles come from merged HdrHistograms, never from averaged
// percentiles. A guardrail turns a significant degradation over budget into ErrGuardrail.
//
// Per process, the sidecar's and the node's CPU per operation come from their Prometheus
// /metrics, read before and after each run, and the latency the sidecar adds from its
// tracecar_added_latency_seconds histogram. Rounds can be adaptive: they continue until
// every difference from the baseline is known to a target error.
//
// The package starts no servers: the tracecar command starts the node and the sidecar, as
// child processes, when it is not given a deployment to measure, and passes their addresses
// in Config.
//
// Rooms, from the ground up (ci.TestLoadcheckRoomsPointDown): loadcheck/stats (the
// statistics), loadcheck/dist (the profiles' distributions), loadcheck/values (the values
// of CQL types it sends), loadcheck/cqlconn (its own CQL connection), loadcheck/client
// (gocql and the wire client behind one interface), and this package.
//
// # Layers
//
// The files of this package are layers: a file uses declarations of the files listed before
// it, never of one listed after it (ci.TestFilesPointDown fails on a cycle, and prints it).
// From the ground up:
//
//	errors.go, format.go              ErrUsage and ErrGuardrail; commas, the numbers' format
//	bucket.go                         the added-latency histogram as read from /metrics
//	tracecontext.go                   the trace contexts and their traceparent
//	cpu_unix.go, cpu_other.go         the process's CPU time
//
//	budget.go                         the budgets (--max-overhead), their metrics and units
//	config.go                         Config and its defaults, the admin APIs of a cluster
//
//	modesettings.go                   what a mode set on the sidecar, as the report shows it
//	report.go                         the report's types (its JSON shapes)
//	verdict.go, decide.go             the statistics: the budgets' verdicts, the comparisons of modes
//
//	mode.go                           the modes: built-in ones, their steps, --mode and --modes
//	admin.go                          the admin API client: a mode applied, the state saved and restored
//	scrape.go, cluster.go             the /metrics read per run; a cluster's sidecars behind one stateAPI
//
//	scheduler.go                      the workers, their schedule, and the phase of a run they time
//	profile.go                        a cassandra-stress user profile, read, and its table
//	profile_gen.go                    the profile's values and partitions, generated
//	profile_stats.go                  the counts of a profile's operations during a run
//	workload.go                       the workloads: built-in, profile or replay, and the keys' population
//	runresult.go, hdrlog.go           one run of one mode; its HdrHistogram interval log
//	drivers.go                        the load's two clients (gocql, the wire client) and the schema
//
//	print.go                          the text output: interval lines, results, comparison, guardrail
//	chart.go                          the HTML report's SVG charts
//	html_overhead.go, html.go         the HTML report, its overhead charts
//	csv.go, output.go                 the CSV report; the report files written
//
//	checker.go                        the checker: one load check's state
//	preload.go                        the preload of a profile's partitions, sized to the node's memory
//	summary.go                        the report computed from the runs
//	rounds.go                         the adaptive rounds: when to stop
//	profile_run.go                    a profile prepared, its preload, its operations' mix
//	op.go                             the operations of each workload, built once per worker
//	loadcheck.go                      Run: the configuration checked, the modes run round after round
package loadcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"
	"github.com/tracecar/tracecar/loadcheck/cqlconn"
	"github.com/tracecar/tracecar/loadcheck/replay"
)

// setDefaults fills zero fields.
func (c *Config) setDefaults() {
	if c.Rounds == 0 {
		c.Rounds = DefaultRounds
	}
	if c.Duration == 0 && c.Ops <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Ops > 0 {
		c.Duration = 0
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultWarmup
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.Workload == "" {
		c.Workload = DefaultWorkload
		if c.Ratio != "" {
			c.Workload = "mixed"
		}
	}
	if c.Pop == "" {
		c.Pop = DefaultPop
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.CL == "" {
		c.CL = DefaultCL
	}
	if c.Compression == "" {
		c.Compression = DefaultCompression
	}
	if c.TraceContext == "" {
		c.TraceContext = TraceContextNone
	}
	if c.Connections == 0 {
		c.Connections = DefaultConnections
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxRounds == 0 {
		c.MaxRounds = DefaultMaxRounds
	}
	if c.MaxRounds < c.Rounds {
		c.MaxRounds = c.Rounds
	}
	if c.MaxTime == 0 {
		c.MaxTime = DefaultMaxTime
	}
	if c.SidecarMetrics == "" && c.Admin != "" && !c.cluster() {
		// A cluster's sidecars each take a share of the load: one sidecar's CPU over every
		// operation would mislead, so their CPU per op stays unknown.
		c.SidecarMetrics = baseURL(c.Admin) + "/metrics"
	}
	if c.NodeMetrics != "" && !strings.Contains(c.NodeMetrics, "://") {
		c.NodeMetrics = "http://" + c.NodeMetrics
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Verdict == "" {
		c.Verdict = VerdictBreach
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
}

// check validates the settings that do not depend on the targets.
func (c *Config) check() (*workload, error) {
	switch {
	case c.Rounds < 1:
		return nil, usageErrorf("--rounds %d: want at least 1", c.Rounds)
	case c.Duration < 0:
		return nil, usageErrorf("--duration %v: want a positive duration", c.Duration)
	case c.Ops < 0:
		return nil, usageErrorf("-n %d: want a positive count", c.Ops)
	case c.Concurrency < 1:
		return nil, usageErrorf("--concurrency %d: want at least 1", c.Concurrency)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return nil, usageErrorf("--rate %v: want 0 (unthrottled) or a positive op/s", c.Rate)
	case c.Connections < 1:
		return nil, usageErrorf("--connections %d: want at least 1", c.Connections)
	case c.Timeout < 0:
		return nil, usageErrorf("--timeout %v: want a positive duration", c.Timeout)
	case c.PageSize < 1:
		return nil, usageErrorf("--page-size %d: want at least 1 row", c.PageSize)
	case c.TargetError < 0 || math.IsNaN(c.TargetError) || math.IsInf(c.TargetError, 0):
		return nil, usageErrorf("--target-error %v: want a percentage > 0, or 0 for exactly --rounds rounds", c.TargetError)
	}
	if c.Verdict != VerdictBreach && c.Verdict != VerdictProve {
		return nil, usageErrorf("--verdict %q: want breach (exit 3 when a budget is shown over its limit) or prove (exit 3 unless every budget is shown within it)", c.Verdict)
	}
	if c.Threshold != nil && *c.Threshold < 0 {
		return nil, usageErrorf("--threshold %v: want a duration of 0 (every request recorded) or more", *c.Threshold)
	}
	switch strings.ToLower(c.Compression) {
	case "none", "lz4", "snappy":
		c.Compression = strings.ToLower(c.Compression)
	default:
		return nil, usageErrorf("--compression %q: want none, lz4 or snappy", c.Compression)
	}
	switch c.ProtocolVersion {
	case 0, 3, 4:
	case 5:
		if c.Compression == "snappy" {
			return nil, usageErrorf("--protocol-version 5 --compression snappy: v5 compresses its segments with lz4 only; want none or lz4")
		}
	default:
		return nil, usageErrorf("--protocol-version %d: want 3, 4 or 5 (0: negotiated)", c.ProtocolVersion)
	}
	if !validTraceContext(c.TraceContext) {
		return nil, usageErrorf("--trace-context %q: want sampled, unsampled or none", c.TraceContext)
	}
	if _, err := gocql.ParseConsistencyWrapper(c.CL); err != nil {
		return nil, usageErrorf("--cl %q: want ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM or LOCAL_ONE", c.CL)
	}
	for name, spec := range c.ModeSpecs {
		if !modeNameRE.MatchString(name) {
			return nil, usageErrorf("mode name %q: letters, digits, '.', '_' and '-' only", name)
		}
		if _, err := parseSpec(spec); err != nil {
			return nil, usageErrorf("mode %s: %v", name, err)
		}
	}
	for _, b := range c.MaxOverhead {
		if _, ok := metricNames[b.Metric]; !ok && b.Metric != "" || math.IsNaN(b.Limit) || math.IsInf(b.Limit, 0) {
			return nil, usageErrorf("--max-overhead %s=%s:%v: want a known metric and a finite limit", b.Mode, b.Metric, b.Limit)
		}
	}
	return parseWorkload(c)
}

// checkBudgets makes sure every budget names a mode that runs.
func checkBudgets(budgets []Budget, modes []*mode) error {
	for _, b := range budgets {
		name := b.Mode
		found := false
		for _, m := range modes {
			found = found || m.name == name
		}
		if !found {
			names := make([]string, len(modes))
			for i, m := range modes {
				names[i] = m.name
			}
			return usageErrorf("--max-overhead names mode %q, which is not run; the modes run are %s", name, strings.Join(names, ", "))
		}
	}
	return nil
}

// Run runs the load check that cfg describes and returns its report. It restores the
// state that the modes change, even when it fails or ctx ends. Errors in cfg wrap
// ErrUsage; a breached guardrail returns the report and an error wrapping ErrGuardrail.
// Concurrent Runs are safe, but checks of one deployment at once disturb each other's
// figures and state restores.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	return run(ctx, cfg, env{clock: newRealClock(), driver: chooseDriver(&cfg)})
}

// chooseDriver picks the load's client: loadcheck's own CQL client at v5 (gocql v1.7 has
// no v5), for a profile (it costs the client less CPU per op than gocql: loadcheck.md),
// and when a mode sets its protocol version, so that modes differ by the version alone;
// gocql otherwise, and at v3, which the own client does not speak.
func chooseDriver(cfg *Config) driver {
	perMode := false
	for _, spec := range cfg.ModeSpecs {
		perMode = perMode || strings.Contains(spec, "protocol-version=")
	}
	if cfg.ProtocolVersion == 5 || cfg.ProtocolVersion != 3 && (cfg.Profile != "" || perMode) {
		return wireDriver{}
	}
	return cqlDriver{}
}

func run(ctx context.Context, cfg Config, e env) (*Report, error) {
	cfg.setDefaults()
	wl, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if cfg.Node == "" && cfg.Sidecar == "" {
		return nil, usageErrorf("no target: give --node HOST:PORT and/or --sidecar HOST:PORT (the tracecar command starts an embedded node and sidecar when given neither)")
	}
	modes, baseline, err := resolveModes(&cfg)
	if err != nil {
		return nil, err
	}
	if err := checkWire(&cfg, modes, e.driver); err != nil {
		return nil, err
	}
	if err := checkBudgets(cfg.MaxOverhead, modes); err != nil {
		return nil, err
	}
	if cfg.HDRLogDir != "" {
		if err := os.MkdirAll(cfg.HDRLogDir, 0o755); err != nil {
			return nil, fmt.Errorf("hdr log directory: %w", err)
		}
	}

	c := &checker{cfg: &cfg, env: e, wl: wl, modes: modes, baseline: baseline,
		out: newPrinter(cfg.Out, cfg.Progress), api: newStateAPI(&cfg)}
	for _, n := range unusedModes(&cfg, modes) {
		c.notes = append(c.notes, fmt.Sprintf("warning: mode %s is defined by --mode but unused: --modes does not list it", n))
	}
	return c.run(ctx)
}

func (c *checker) run(ctx context.Context) (rep *Report, err error) {
	started := time.Now()
	if err := c.snapshot(ctx); err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := c.api.restore(rctx, c.state); rerr != nil {
			err = errors.Join(err, rerr)
		}
		c.out.clearStatus()
	}()
	c.printHeader()
	for _, n := range c.notes {
		if strings.HasPrefix(n, "warning: ") {
			c.out.printf("%s\n", n)
		} else {
			c.out.printf("note: %s\n", n)
		}
	}
	if err := c.prepareWorkload(ctx); err != nil {
		return nil, err
	}
	if err := c.runRounds(ctx, started); err != nil {
		return nil, err
	}
	full := c.memoryFullNote()
	if full != "" {
		c.notes = append(c.notes, full)
	}
	rep = c.report(started)
	rep.Cluster = c.clusterReport()
	if c.wl.replay != nil {
		rp := c.wl.replay
		rep.Replay = rp.Report(c.cfg.Rate, rp.Connections(c.cfg.ReplayConnections), c.replayRuns)
	}
	c.out.clearStatus()
	printComparison(c.out, rep)
	printReplay(c.out, rep)
	printGuardrail(c.out, rep)
	printCluster(c.out, rep)
	if full != "" {
		c.out.printf("\n%s\n", full)
	}
	if err := writeReports(c.cfg, rep); err != nil {
		return rep, err
	}
	if len(rep.Breaches) > 0 {
		return rep, breachError(rep.Breaches)
	}
	return rep, nil
}

// snapshot reads the state the modes change, to put back at the end, and each mode's
// settings from it.
func (c *checker) snapshot(ctx context.Context) error {
	state, notes, err := c.api.snapshot(ctx, c.modes)
	if err != nil {
		return fmt.Errorf("read the state the modes change: %w", err)
	}
	c.state, c.notes = state, append(c.notes, notes...)
	for _, m := range c.modes {
		m.settings = settingsOf(m, c.cfg.Sidecar, c.state)
	}
	return nil
}

// prepareWorkload readies the target for the workload: the replay's schema and data, the
// profile's, or the built-in table and its population.
func (c *checker) prepareWorkload(ctx context.Context) error {
	switch {
	case c.wl.replay != nil:
		return c.prepareReplay(ctx)
	case c.wl.profile != nil:
		return c.prepareProfile(ctx)
	}
	return c.prepare(ctx)
}

// prepareReplay creates the capture's schema on the target and writes the rows that its
// reads find; the keyspaces it created are dropped again when the preload fails, so that
// nothing is left half-made.
func (c *checker) prepareReplay(ctx context.Context) error {
	rp := c.wl.replay
	target := c.modes[0].target
	conn, err := cqlconn.Dial(ctx, c.cfg.connOptions(), target)
	if err != nil {
		return err
	}
	defer conn.Close()
	undo, err := rp.CreateSchema(ctx, conn, target)
	if err != nil {
		return err
	}
	c.out.printf("Replay of %s: created %d tables on %s\n", rp.Path(), rp.Tables(), target)
	if err := c.preloadReplay(ctx, conn); err != nil {
		undo()
		return err
	}
	return nil
}

// preloadReplay writes, for every key the capture reads, as many rows as its reads returned.
func (c *checker) preloadReplay(ctx context.Context, conn *cqlconn.Conn) error {
	rp := c.wl.replay
	n := rp.PreloadRows()
	if n == 0 {
		return nil
	}
	c.out.printf("Preloading %s rows for the keys the capture reads ...\n", commas(float64(n)))
	started := time.Now()
	if err := rp.Preload(ctx, conn, min(c.cfg.Concurrency, 64)); err != nil {
		return err
	}
	c.out.printf("Preloaded %s rows in %.1fs\n", commas(float64(n)), time.Since(started).Seconds())
	return nil
}

// breachError is the guardrail's error naming each budget breached: over it, not resolved
// against it, or not shown within it.
func breachError(breaches []Breach) error {
	names := make([]string, len(breaches))
	for i, b := range breaches {
		bud := Budget{Metric: b.Metric, Limit: b.Limit, Absolute: b.Unit != "%"}
		switch b.Outcome {
		case OutcomeOver:
			names[i] = fmt.Sprintf("%s %s %s > %s", b.Mode, b.Metric, bud.format(b.Value, b.ValueErr), bud)
		case OutcomeNotResolved:
			names[i] = fmt.Sprintf("%s %s %s not resolved against %s (about %d rounds needed)", b.Mode, b.Metric, bud.format(b.Value, b.ValueErr), bud, b.RoundsNeeded)
		default:
			names[i] = fmt.Sprintf("%s %s %s not shown within %s", b.Mode, b.Metric, bud.format(b.Value, b.ValueErr), bud)
		}
	}
	return fmt.Errorf("%w: %s", ErrGuardrail, strings.Join(names, ", "))
}

// runRounds runs the rounds, each mode once per round in alternating order: Rounds of them,
// and then, with a target error, more until the figures are precise and the budgets
// resolved, MaxRounds are run, or MaxTime says stop.
func (c *checker) runRounds(ctx context.Context, started time.Time) error {
	c.runs = make([][]*runResult, len(c.modes))
	c.total = c.cfg.Rounds * len(c.modes)
	roundsFrom := time.Now()
	for r := 0; r < c.cfg.MaxRounds; r++ {
		if r >= c.cfg.Rounds {
			if c.cfg.TargetError <= 0 || c.precise(started) && c.resolved(started) || c.outOfTime(started, roundsFrom) {
				break
			}
			c.total += len(c.modes)
		}
		order := roundOrder(len(c.modes), r)
		names := make([]string, len(order))
		for i, mi := range order {
			names[i] = c.modes[mi].name
		}
		c.order = append(c.order, names)
		for pos, mi := range order {
			m := c.modes[mi]
			rr, err := c.runMode(ctx, m, r, pos)
			if err != nil {
				return err
			}
			c.runs[mi] = append(c.runs[mi], rr)
			c.done++
		}
	}
	return nil
}

func (c *checker) printHeader() {
	cfg := c.cfg
	names := make([]string, len(c.modes))
	for i, m := range c.modes {
		names[i] = m.name
	}
	limit := fmt.Sprintf("%v per run", cfg.Duration)
	if cfg.Ops > 0 {
		limit = fmt.Sprintf("%d ops per run", cfg.Ops)
	}
	rate := "unthrottled"
	if cfg.Rate > 0 {
		rate = fmt.Sprintf("fixed rate %s op/s (open loop)", commas(cfg.Rate))
	}
	c.out.printf("tracecar loadcheck: modes %s, baseline %s\n", strings.Join(names, ", "), c.baseline)
	pop := c.wl.pop.String()
	if rp := c.wl.replay; rp != nil {
		rate = "the recorded timing (open loop)"
		switch {
		case rp.Speed() == 0 && cfg.Rate > 0:
			rate = fmt.Sprintf("the recorded order at a fixed rate of %s op/s (open loop)", commas(cfg.Rate))
		case rp.Speed() == 0:
			rate = "as fast as the workers go"
		case rp.Speed() != 1:
			rate = fmt.Sprintf("the recorded timing at %gx (open loop)", rp.Speed())
		}
		limit = fmt.Sprintf("%d captured requests per run (%.1fs captured)", rp.Requests(), rp.Span().Seconds())
		pop = "the capture's keys"
		c.out.printf("replay of %s over %d connections; %s\n", rp.Path(), rp.Connections(cfg.ReplayConnections), rp.SkipSummary())
	}
	c.out.printf("workload %s", c.wl.name)
	if p := c.wl.profile; p != nil {
		c.out.printf(" %s (keyspace %s, table %s) %s", p.path, p.keyspace, p.table, p.mixString())
	}
	if c.wl.name == "mixed" {
		c.out.printf(" (write fraction %.3g)", c.wl.writeFrac)
	}
	rounds := fmt.Sprintf("%d rounds", cfg.Rounds)
	if cfg.TargetError > 0 && cfg.MaxRounds > cfg.Rounds {
		rounds = fmt.Sprintf("%d to %d rounds (until every difference from %s is known to ±%g%% of its sidecar CPU per op)",
			cfg.Rounds, cfg.MaxRounds, c.baseline, cfg.TargetError)
	}
	c.out.printf(", pop %s, %s, %s after a %v warmup, %d workers, %s, cl %s, compression %s",
		pop, rounds, limit, cfg.Warmup, cfg.Concurrency, rate, strings.ToUpper(cfg.CL), cfg.Compression)
	if cfg.TraceContext != TraceContextNone {
		c.out.printf(", a %s W3C trace context on every request", cfg.TraceContext)
	}
	c.out.printf(", %s\n", protocolString(cfg.ProtocolVersion))
	for _, m := range c.modes {
		c.out.printf("  %-10s -> %-21s %s\n", m.name, m.target, m.spec)
		if m.settings != nil {
			c.out.printf("  %-10s    effective: %s\n", "", m.settings)
		}
	}
}

// prepare creates the schema and, for workloads that read, loads the population when it is
// not there yet.
func (c *checker) prepare(ctx context.Context) error {
	target := c.modes[0].target
	s, err := c.env.driver.connect(ctx, c.cfg, target)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := createSchema(ctx, s); err != nil {
		return err
	}
	if c.wl.writeFrac >= 1 {
		return nil
	}
	p := c.wl.pop
	miss, err := missing(ctx, s, []int64{p.min, p.min + p.size()/2, p.max})
	if err != nil || !miss {
		return err
	}
	c.out.printf("Preloading %s partitions (%s) through %s ...\n", commas(float64(p.size())), p, target)
	load := &workload{name: "write", writeFrac: 1, pop: population{kind: popSeq, min: p.min, max: p.max}.fresh()}
	ops := make([]Op, c.cfg.Concurrency)
	for w := range ops {
		ops[w] = newOp(ctx, s, w, load)
	}
	res := runPhase(ctx, phase{clock: c.env.clock, workers: c.cfg.Concurrency, ops: p.size()}, ops)
	if err := ctx.Err(); err != nil {
		return err
	}
	if res.errs > 0 {
		return fmt.Errorf("preload: %d of %d writes failed, the first with: %w", res.errs, p.size(), res.firstErr)
	}
	c.out.printf("Preloaded %s partitions in %.1fs\n", commas(float64(res.ops)), res.elapsed.Seconds())
	return nil
}

func (c *checker) runMode(ctx context.Context, m *mode, round, pos int) (*runResult, error) {
	cfg := c.cfg
	rounds := strconv.Itoa(cfg.Rounds)
	if cfg.TargetError > 0 && cfg.MaxRounds > cfg.Rounds {
		rounds = fmt.Sprintf("%d-%d", cfg.Rounds, cfg.MaxRounds)
	}
	c.out.printf("\n==> %s, round %d of %s (run %d of %d), target %s\n", m.name, round+1, rounds, c.done+1, c.total, m.target)
	if err := c.api.apply(ctx, m); err != nil {
		return nil, err
	}
	defer func() {
		// The deferred restore in run reports its own failure; this one keeps every run
		// starting from the initial state.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := c.api.restore(rctx, c.state); err != nil {
			c.out.printf("warning: %v\n", err)
		}
	}()
	if c.wl.replay != nil {
		return c.runReplayMode(ctx, m, round, pos)
	}
	s, err := c.connectMode(ctx, m)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	wl := c.modeWorkload(m)
	ops := make([]Op, cfg.Concurrency)
	for w := range ops {
		ops[w] = newOp(ctx, s, w, wl)
	}
	if err := c.warmup(ctx, m, round, wl, ops); err != nil {
		return nil, err
	}
	wall := time.Now()
	mr, err := c.measureLogged(ctx, m, round, wall, ops)
	if err != nil {
		return nil, err
	}
	rr := newRunResult(m, round, pos, wall, mr.res, mr.cpu, mr.pc)
	if wl.stats != nil {
		var parts int64
		rr.PerOp, parts = wl.stats.results(wl.profile, mr.res.elapsed)
		rr.Partitions = parts
		if s := mr.res.elapsed.Seconds(); s > 0 {
			rr.PkRate = float64(parts) / s
		}
	}
	rr.Sidecars = sidecarDelta(cfg.admins(), mr.seen0, mr.seen1)
	printResults(c.out, rr, cfg.Rate > 0)
	return rr, nil
}

// runReplayMode runs one mode's run of a replay: a warmup on the capture's start, then the
// whole capture, measured as any run is.
func (c *checker) runReplayMode(ctx context.Context, m *mode, round, pos int) (*runResult, error) {
	cfg := c.cfg
	workers := cfg.Concurrency
	ops := make([]Op, workers)
	if cfg.Warmup > 0 {
		s, err := c.openReplay(ctx, m.target)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.name, err)
		}
		c.status(m, round, "warming up", 0)
		warm := runPhase(ctx, phase{clock: c.env.clock, workers: workers, duration: cfg.Warmup, schedule: replaySchedule(s, c.wl.replay, cfg.Rate, workers, cfg.Warmup)}, ops)
		s.Close()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.out.printf("Warmed up for %.1fs: %s ops, %s errors\n", warm.elapsed.Seconds(), commas(float64(warm.ops)), commas(float64(warm.errs)))
	}
	s, err := c.openReplay(ctx, m.target)
	if err != nil {
		return nil, fmt.Errorf("mode %s: %w", m.name, err)
	}
	defer s.Close()
	c.out.printf("%s\n", intervalHeader)
	p := phase{clock: c.env.clock, workers: workers, interval: cfg.Interval, schedule: replaySchedule(s, c.wl.replay, cfg.Rate, workers, 0),
		onInterval: func(iv Interval, _, _ *hdrhistogram.Histogram) {
			c.out.printf("%s\n", intervalLine(iv))
			c.status(m, round, fmt.Sprintf("%.0fs, %s op/s, p99 %.2f ms", iv.TimeS, commas(iv.OpRate), iv.P99Ms), iv.TimeS)
		}}
	wall := time.Now()
	mr, err := c.measure(ctx, m, p, ops)
	if err != nil {
		return nil, err
	}
	res, cpu, pc, seen0, seen1 := mr.res, mr.cpu, mr.pc, mr.seen0, mr.seen1
	c.replayRuns = append(c.replayRuns, s.Run())
	rr := newRunResult(m, round, pos, wall, res, cpu, pc)
	rr.Sidecars = sidecarDelta(cfg.admins(), seen0, seen1)
	printResults(c.out, rr, cfg.Rate > 0 || c.wl.replay.Speed() > 0)
	return rr, nil
}

// openReplay opens a run's replay connections to target, its statements prepared on each.
func (c *checker) openReplay(ctx context.Context, target string) (*replay.Session, error) {
	rp := c.wl.replay
	return rp.Open(ctx, c.cfg.connOptions(), target, rp.Connections(c.cfg.ReplayConnections))
}

// connectMode opens a session to m's target, at m's protocol version when it sets one.
func (c *checker) connectMode(ctx context.Context, m *mode) (session, error) {
	mcfg := c.cfg
	if m.protocol != 0 {
		copied := *c.cfg
		copied.ProtocolVersion = m.protocol
		mcfg = &copied
	}
	s, err := c.env.driver.connect(ctx, mcfg, m.target)
	if err != nil {
		return nil, fmt.Errorf("mode %s: %w", m.name, err)
	}
	return s, nil
}

// modeWorkload is the run's workload for one run of m: a fresh population, m's trace
// context (else --trace-context), and fresh per-operation statistics for a profile.
func (c *checker) modeWorkload(m *mode) *workload {
	wl := *c.wl
	wl.pop = wl.pop.fresh()
	wl.traceContext = c.cfg.TraceContext
	if m.traceContext != "" {
		wl.traceContext = m.traceContext
	}
	if wl.profile != nil {
		wl.stats = newProfileStats(wl.profile)
	}
	return &wl
}

// warmup runs ops for --warmup, unmeasured, and then forgets the profile's statistics.
func (c *checker) warmup(ctx context.Context, m *mode, round int, wl *workload, ops []Op) error {
	cfg := c.cfg
	if cfg.Warmup <= 0 {
		return nil
	}
	c.status(m, round, "warming up", 0)
	warm := runPhase(ctx, phase{clock: c.env.clock, workers: cfg.Concurrency, rate: cfg.Rate, duration: cfg.Warmup}, ops)
	if err := ctx.Err(); err != nil {
		return err
	}
	c.out.printf("Warmed up for %.1fs: %s ops, %s errors\n", warm.elapsed.Seconds(), commas(float64(warm.ops)), commas(float64(warm.errs)))
	if wl.stats != nil {
		wl.stats.reset()
	}
	return nil
}

// measureLogged runs the measured phase, printing each interval and writing it to the
// run's HDR log under --hdr-log-dir.
func (c *checker) measureLogged(ctx context.Context, m *mode, round int, wall time.Time, ops []Op) (measured, error) {
	cfg := c.cfg
	var hlog *hdrLog
	if cfg.HDRLogDir != "" {
		var err error
		if hlog, err = openHDRLog(cfg.HDRLogDir, m, round, wall); err != nil {
			return measured{}, err
		}
		defer func() {
			if hlog != nil {
				hlog.close()
			}
		}()
	}
	c.out.printf("%s\n", intervalHeader)
	var hlogErr error
	p := phase{
		clock: c.env.clock, workers: cfg.Concurrency, rate: cfg.Rate,
		duration: cfg.Duration, ops: cfg.Ops, interval: cfg.Interval,
		onInterval: func(iv Interval, resp, svc *hdrhistogram.Histogram) {
			c.out.printf("%s\n", intervalLine(iv))
			c.status(m, round, fmt.Sprintf("%.0fs, %s op/s, p99 %.2f ms", iv.TimeS, commas(iv.OpRate), iv.P99Ms), iv.TimeS)
			if hlog != nil && hlogErr == nil {
				hlogErr = hlog.write(iv, resp, svc)
			}
		},
	}
	mr, err := c.measure(ctx, m, p, ops)
	if err != nil {
		return measured{}, err
	}
	if hlog != nil {
		if err := hlog.close(); hlogErr == nil {
			hlogErr = err
		}
		hlog = nil
	}
	if hlogErr != nil {
		return measured{}, fmt.Errorf("hdr log: %w", hlogErr)
	}
	return mr, nil
}

// scrape reads the sidecar's and the node's /metrics, where configured. A failed scrape
// leaves that process's figures unknown for the run, with a warning.
func (c *checker) scrape(ctx context.Context) (sidecar, node sample) {
	read := func(url string, a api) sample {
		if url == "" {
			return sample{}
		}
		s, err := c.api.scrape(ctx, url, a)
		if err != nil {
			c.out.printf("warning: the %s's CPU and latency figures for this run are unknown: %v\n", a, err)
		}
		return s
	}
	return read(c.cfg.SidecarMetrics, apiAdmin), read(c.cfg.NodeMetrics, apiNode)
}

// status updates the progress line.
func (c *checker) status(m *mode, round int, what string, runSeconds float64) {
	if !c.out.progress {
		return
	}
	per := c.cfg.Warmup.Seconds() + c.cfg.Duration.Seconds()
	left := float64(c.total-c.done)*per - runSeconds
	if c.cfg.Warmup > 0 && what != "warming up" {
		left -= c.cfg.Warmup.Seconds()
	}
	eta := ""
	if c.cfg.Ops == 0 && left > 0 {
		eta = fmt.Sprintf(", about %s left", time.Duration(left*float64(time.Second)).Round(time.Second))
	}
	c.out.status(fmt.Sprintf("[%d/%d] %s round %d: %s%s", c.done+1, c.total, m.name, round+1, what, eta))
}

// measured is what one run of a mode measured: the phase's result, the load checker's
// own CPU, the sidecar's and the node's CPU and added latency, and the requests each
// sidecar saw before and after.
type measured struct {
	res          *phaseResult
	cpu          time.Duration
	pc           procCPU
	seen0, seen1 []uint64
}

// measure runs the phase p over ops, with the readings of the sidecars' and the node's
// counters taken before and after it that every run (built-in or replay) reports.
func (c *checker) measure(ctx context.Context, m *mode, p phase, ops []Op) (measured, error) {
	var r measured
	var err error
	if r.seen0, err = c.api.requests(ctx); err != nil {
		return r, fmt.Errorf("mode %s: read the requests each sidecar saw: %w", m.name, err)
	}
	sc0, nd0 := c.scrape(ctx)
	cpu0 := cpuTime()
	r.res = runPhase(ctx, p, ops)
	r.cpu = cpuTime() - cpu0
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if r.seen1, err = c.api.requests(ctx); err != nil {
		return r, fmt.Errorf("mode %s: read the requests each sidecar saw: %w", m.name, err)
	}
	sc1, nd1 := c.scrape(ctx)
	if sc0.hasCPU && sc1.hasCPU {
		r.pc.sidecar, r.pc.hasSidecar = sc1.cpu-sc0.cpu, true
	}
	if sc0.hasSessions && sc1.hasSessions {
		r.pc.sessions, r.pc.hasSessions = int64(sc1.sessions-sc0.sessions), true
	}
	if sc0.hasUser && sc1.hasUser {
		r.pc.sidecarUser, r.pc.hasSidecarUser = sc1.user-sc0.user, true
	}
	if nd0.hasCPU && nd1.hasCPU {
		r.pc.node, r.pc.hasNode = nd1.cpu-nd0.cpu, true
	}
	r.pc.added = sc1.added.sub(sc0.added)
	return r, nil
}

// checkWire refuses what loadcheck's own CQL client cannot do: a trace context (it sends no
// custom payload yet), and a mode's protocol-version= step in a run at v3 through gocql.
func checkWire(cfg *Config, modes []*mode, d driver) error {
	_, wire := d.(wireDriver)
	for _, m := range modes {
		if m.protocol != 0 && !wire {
			return usageErrorf("mode %s: protocol-version=%d needs loadcheck's own CQL client, which does not speak --protocol-version %d", m.name, m.protocol, cfg.ProtocolVersion)
		}
		tc := cfg.TraceContext
		if m.traceContext != "" {
			tc = m.traceContext
		}
		if wire && tc != TraceContextNone {
			return usageErrorf("mode %s: a %s trace context needs gocql's custom payloads, and this run goes through loadcheck's own CQL client (%s); run it with --protocol-version 4 and without --profile or a protocol-version= step", m.name, tc, protocolString(cfg.ProtocolVersion))
		}
	}
	return nil
}

// Validate checks cfg as Run would before starting, without contacting anything. With no
// target, it checks the modes against the embedded default (a node and a sidecar with
// both APIs), which the tracecar command provides. Errors wrap ErrUsage.
func Validate(cfg Config) error {
	cfg.setDefaults()
	if _, err := cfg.check(); err != nil {
		return err
	}
	if cfg.Node == "" && cfg.Sidecar == "" {
		cfg.Node, cfg.Sidecar, cfg.Admin, cfg.NodeAPI = "127.0.0.1:9042", "127.0.0.1:9043", "127.0.0.1:10000", "127.0.0.1:10001"
	}
	modes, _, err := resolveModes(&cfg)
	if err != nil {
		return err
	}
	return checkBudgets(cfg.MaxOverhead, modes)
}
