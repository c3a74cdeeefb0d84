package loadcheck

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latency summarizes a latency histogram, in milliseconds.
type Latency struct {
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// latencyOf reads a microsecond histogram. Percentiles are HdrHistogram's: the highest value
// equivalent to the one at that rank, so within 0.1% at 3 significant digits.
func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		MeanMs: h.Mean() / 1000,
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P95Ms:  ms(h.ValueAtQuantile(95)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}

// Interval is one line of a run's interval series, like a cassandra-stress interval line.
// Rates and latencies cover the interval alone; TotalOps is cumulative.
type Interval struct {
	StartS   float64 `json:"start_s"` // start of the interval, seconds since the run started
	TimeS    float64 `json:"time_s"`  // end of the interval
	TotalOps int64   `json:"total_ops"`
	Ops      int64   `json:"ops"`
	OpRate   float64 `json:"op_rate"`
	PkRate   float64 `json:"pk_rate"`
	RowRate  float64 `json:"row_rate"`
	Latency
	Errors int64 `json:"errors"`
	// Stderr is the standard error of the mean interval op rate so far, relative to that
	// mean, as cassandra-stress prints it: a run is steady when it is small.
	Stderr float64 `json:"stderr"`
}

// RunResult is one run: one mode in one round. Latency is response time; at a fixed rate it
// runs from each operation's scheduled start, so that queueing behind a stall counts.
type RunResult struct {
	Round     int       `json:"round"`    // from 1
	Position  int       `json:"position"` // place in the round's order, from 1
	Target    string    `json:"target"`
	StartedAt time.Time `json:"started_at"`
	DurationS float64   `json:"duration_s"`
	Ops       int64     `json:"ops"`
	Rows      int64     `json:"rows"`
	Errors    int64     `json:"errors"`
	// Unsent counts operations that a fixed rate scheduled before the end of the run but
	// that were not sent, because the target fell behind the rate.
	Unsent     int64      `json:"unsent"`
	OpRate     float64    `json:"op_rate"`
	PkRate     float64    `json:"pk_rate"`
	RowRate    float64    `json:"row_rate"`
	Latency               // response time
	Service    Latency    `json:"service"` // service time: from the actual send
	CPUSeconds float64    `json:"cpu_s"`
	CPUUsPerOp float64    `json:"cpu_us_per_op"`
	FirstError string     `json:"first_error,omitempty"`
	Intervals  []Interval `json:"intervals"`

	// Sidecars are the requests each sidecar of a cluster saw during the run.
	Sidecars []SidecarRequests `json:"sidecars,omitempty"`
}

// ModeResult is one mode over all rounds. Rates are means over rounds; latencies come from
// the merged histograms of its runs.
type ModeResult struct {
	Name         string    `json:"name"`
	Spec         string    `json:"spec"`
	Target       string    `json:"target"`
	Baseline     bool      `json:"baseline"`
	OpRate       float64   `json:"op_rate"`
	OpRateStdev  float64   `json:"op_rate_stdev"`
	OpRateStderr float64   `json:"op_rate_stderr"`
	OpRateMedian float64   `json:"op_rate_median"`
	Rounds       []float64 `json:"rounds"` // op rate of each round
	PkRate       float64   `json:"pk_rate"`
	RowRate      float64   `json:"row_rate"`
	Latency
	Service Latency `json:"service"`
	Ops     int64   `json:"ops"`
	Rows    int64   `json:"rows"`
	Errors  int64   `json:"errors"`
	Unsent  int64   `json:"unsent"`
	// DegradationPct is 100·(1 − op_rate/baseline op_rate); DegradationErr its standard
	// error, propagated from both means' standard errors.
	DegradationPct float64 `json:"degradation_pct"`
	DegradationErr float64 `json:"degradation_err"`
	// PValue is the two-sided Welch t-test p-value of the round op rates against the
	// baseline's; null with fewer than two rounds.
	PValue *float64 `json:"p_value"`
	T      *float64 `json:"t"`
	DF     *float64 `json:"df"`
	// The paired figures compare each round with the baseline's run of the same round:
	// the mean and standard error of the per-round degradations, and a one-sample t-test
	// of them (the paired t-test). Drift between rounds cancels out of them; the
	// guardrail uses the Welch test all the same, as specified.
	PairedDegradationPct float64     `json:"paired_degradation_pct"`
	PairedDegradationErr float64     `json:"paired_degradation_err"`
	PairedPValue         *float64    `json:"paired_p_value"`
	CPUSeconds           float64     `json:"cpu_s"`
	CPUUsPerOp           float64     `json:"cpu_us_per_op"`
	CPUSecondsPer10kOps  float64     `json:"cpu_s_per_10k_ops"`
	Runs                 []RunResult `json:"runs"`

	resp, svc *hdrhistogram.Histogram
}

// Breach is a mode whose degradation is over its budget and significant.
type Breach struct {
	Mode           string  `json:"mode"`
	BudgetPct      float64 `json:"budget_pct"`
	DegradationPct float64 `json:"degradation_pct"`
	DegradationErr float64 `json:"degradation_err"`
	PValue         float64 `json:"p_value"`
}

// Verdict is the guardrail's decision on one budget.
type Verdict struct {
	Mode           string   `json:"mode"`
	BudgetPct      float64  `json:"budget_pct"`
	DegradationPct float64  `json:"degradation_pct"`
	DegradationErr float64  `json:"degradation_err"`
	PValue         *float64 `json:"p_value"`
	Breached       bool     `json:"breached"`
	Reason         string   `json:"reason"`
}

// Settings records how the check ran.
type Settings struct {
	Node        string  `json:"node,omitempty"`
	Sidecar     string  `json:"sidecar,omitempty"`
	Admin       string  `json:"admin,omitempty"`
	NodeAPI     string  `json:"node_api,omitempty"`
	Embedded    bool    `json:"embedded"`
	Workload    string  `json:"workload"`
	WriteFrac   float64 `json:"write_fraction"`
	Pop         string  `json:"pop"`
	Rounds      int     `json:"rounds"`
	DurationS   float64 `json:"duration_s"`
	WarmupS     float64 `json:"warmup_s"`
	Ops         int64   `json:"ops_per_run"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate"`
	CL          string  `json:"cl"`
	Compression string  `json:"compression"`
	Connections int     `json:"connections"`
}

// CPUSummary is the client's CPU cost over all runs, set beside cassandra-stress's.
type CPUSummary struct {
	Seconds                  float64 `json:"cpu_s"`
	Ops                      int64   `json:"ops"`
	UsPerOp                  float64 `json:"cpu_us_per_op"`
	SecondsPer10kOps         float64 `json:"cpu_s_per_10k_ops"`
	OpsPerCPUSecond          float64 `json:"ops_per_cpu_s"`
	Scope                    string  `json:"scope"`
	ReferenceOpsPerCPUSecond float64 `json:"reference_ops_per_cpu_s"`
	Reference                string  `json:"reference"`
}

// cassandra-stress's client efficiency, from latte's BENCHMARKS.md.
const (
	stressOpsPerCPUSecond = 27000
	stressReference       = "cassandra-stress: about 27,000 inserts per CPU-second (latte BENCHMARKS.md)"
)

// Report is the outcome of a load check. Its JSON form is the --json contract. Run does
// not touch a Report after returning it, so it is safe for concurrent reads.
type Report struct {
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt time.Time    `json:"finished_at"`
	Baseline   string       `json:"baseline"`
	Settings   Settings     `json:"settings"`
	Order      [][]string   `json:"order"` // the order of the modes in each round
	Modes      []ModeResult `json:"modes"`
	Guardrail  []Verdict    `json:"guardrail"`
	Breaches   []Breach     `json:"breaches"`
	CPU        CPUSummary   `json:"cpu"`
	Notes      []string     `json:"notes,omitempty"`

	// Cluster is, against a cluster of sidecars (several --admin URLs), the requests each
	// sidecar saw in each mode's runs.
	Cluster *ClusterReport `json:"cluster,omitempty"`
}

// Mode returns the result of the named mode, or nil.
func (r *Report) Mode(name string) *ModeResult {
	for i := range r.Modes {
		if r.Modes[i].Name == name {
			return &r.Modes[i]
		}
	}
	return nil
}

func newRunResult(m *mode, round, pos int, started time.Time, res *phaseResult, cpu time.Duration) *runResult {
	rr := &runResult{resp: res.resp, svc: res.svc}
	rr.RunResult = RunResult{
		Round: round + 1, Position: pos + 1, Target: m.target, StartedAt: started,
		DurationS: res.elapsed.Seconds(), Ops: res.ops, Rows: res.rows, Errors: res.errs, Unsent: res.unsent,
		Latency: latencyOf(res.resp), Service: latencyOf(res.svc),
		CPUSeconds: cpu.Seconds(), Intervals: res.intervals,
	}
	if rr.Intervals == nil {
		rr.Intervals = []Interval{}
	}
	if s := res.elapsed.Seconds(); s > 0 {
		rr.OpRate = float64(res.ops) / s
		rr.PkRate = rr.OpRate
		rr.RowRate = float64(res.rows) / s
	}
	if res.ops > 0 {
		rr.CPUUsPerOp = cpu.Seconds() * 1e6 / float64(res.ops)
	}
	if res.firstErr != nil {
		rr.FirstError = res.firstErr.Error()
	}
	return rr
}

// report computes the per-mode statistics and the guardrail's verdicts.
func (c *checker) report(started time.Time) *Report {
	cfg := c.cfg
	rep := &Report{
		StartedAt: started, FinishedAt: time.Now(), Baseline: c.baseline, Order: c.order,
		Settings: Settings{
			Node: cfg.Node, Sidecar: cfg.Sidecar, Admin: cfg.Admin, NodeAPI: cfg.NodeAPI, Embedded: cfg.Embedded,
			Workload: c.wl.name, WriteFrac: c.wl.writeFrac, Pop: c.wl.pop.String(), Rounds: cfg.Rounds,
			DurationS: cfg.Duration.Seconds(), WarmupS: cfg.Warmup.Seconds(), Ops: cfg.Ops,
			Concurrency: cfg.Concurrency, Rate: cfg.Rate, CL: strings.ToUpper(cfg.CL), Compression: cfg.Compression,
			Connections: cfg.Connections,
		},
		Notes: c.notes,
	}
	for i, m := range c.modes {
		rep.Modes = append(rep.Modes, modeResult(m, c.runs[i], m.name == c.baseline))
	}
	compare(rep)
	rep.Guardrail, rep.Breaches = judge(rep, cfg.MaxOverhead)
	rep.CPU = cpuSummary(rep.Modes, cfg.Embedded)
	return rep
}

func modeResult(m *mode, runs []*runResult, baseline bool) ModeResult {
	mr := ModeResult{Name: m.name, Spec: m.spec, Target: m.target, Baseline: baseline,
		resp: newHist(), svc: newHist(), Rounds: []float64{}, Runs: []RunResult{}}
	var dur float64
	for _, r := range runs {
		mr.Rounds = append(mr.Rounds, r.OpRate)
		mr.Runs = append(mr.Runs, r.RunResult)
		mr.resp.Merge(r.resp)
		mr.svc.Merge(r.svc)
		mr.Ops += r.Ops
		mr.Rows += r.Rows
		mr.Errors += r.Errors
		mr.Unsent += r.Unsent
		mr.CPUSeconds += r.CPUSeconds
		dur += r.DurationS
	}
	s := summarize(mr.Rounds)
	mr.OpRate, mr.OpRateStdev, mr.OpRateStderr = s.mean, s.stdev, s.stderr
	mr.OpRateMedian = median(mr.Rounds)
	mr.PkRate = mr.OpRate
	if mr.Ops > 0 {
		mr.RowRate = mr.OpRate * float64(mr.Rows) / float64(mr.Ops)
		mr.CPUUsPerOp = mr.CPUSeconds * 1e6 / float64(mr.Ops)
		mr.CPUSecondsPer10kOps = mr.CPUSeconds * 1e4 / float64(mr.Ops)
	}
	mr.Latency = latencyOf(mr.resp)
	mr.Service = latencyOf(mr.svc)
	return mr
}

// compare fills each mode's degradation and p-value against the baseline.
func compare(rep *Report) {
	base := rep.Mode(rep.Baseline)
	if base == nil {
		return
	}
	bs := summarize(base.Rounds)
	for i := range rep.Modes {
		m := &rep.Modes[i]
		if m.Name == base.Name {
			one := 1.0
			m.PValue = &one
			continue
		}
		pct, err := degradation(summarize(m.Rounds), bs)
		m.DegradationPct, m.DegradationErr = finite(pct), finite(err)
		if t := welch(m.Rounds, base.Rounds); t.ok && !math.IsNaN(t.p) {
			p, tv, df := t.p, finite(t.t), finite(t.df)
			m.PValue, m.T, m.DF = &p, &tv, &df
		}
		if d := pairedDegradation(m.Rounds, base.Rounds); d != nil {
			s := summarize(d)
			m.PairedDegradationPct, m.PairedDegradationErr = s.mean, s.stderr
			if t := oneSampleT(d); t.ok && !math.IsNaN(t.p) {
				p := t.p
				m.PairedPValue = &p
			}
		}
	}
}

// judge applies the budgets: a mode breaches its budget when its degradation is over it and
// the difference from the baseline is significant.
func judge(rep *Report, budgets map[string]float64) ([]Verdict, []Breach) {
	verdicts, breaches := []Verdict{}, []Breach{}
	for _, m := range rep.Modes {
		budget, ok := budgets[m.Name]
		if !ok {
			continue
		}
		v := decide(m, budget, rep.Baseline)
		verdicts = append(verdicts, v)
		if v.Breached {
			breaches = append(breaches, Breach{Mode: m.Name, BudgetPct: budget,
				DegradationPct: m.DegradationPct, DegradationErr: m.DegradationErr, PValue: *v.PValue})
		}
	}
	return verdicts, breaches
}

// decide judges one mode against its budget. Significance comes from the paired t-test
// over rounds when there is one: every round runs every mode once, in alternating order,
// so a round is a block, and pairing removes the drift of a busy machine between rounds,
// which the Welch test (still reported as p_value) counts as noise.
func decide(m ModeResult, budget float64, baseline string) Verdict {
	p, test := m.PValue, "Welch"
	if m.PairedPValue != nil {
		p, test = m.PairedPValue, "paired"
	}
	v := Verdict{Mode: m.Name, BudgetPct: budget, DegradationPct: m.DegradationPct,
		DegradationErr: m.DegradationErr, PValue: p}
	cost := fmt.Sprintf("%s costs %.2f%% ± %.2f%% of %s's op rate", m.Name, m.DegradationPct, m.DegradationErr, baseline)
	switch {
	case m.Name == baseline:
		v.Reason = fmt.Sprintf("%s is the baseline", m.Name)
	case m.DegradationPct <= budget:
		v.Reason = fmt.Sprintf("%s, within its %g%% budget", cost, budget)
	case p == nil:
		v.Reason = fmt.Sprintf("%s, over its %g%% budget, but significance needs at least 2 rounds", cost, budget)
	case *p >= Significance:
		v.Reason = fmt.Sprintf("%s, over its %g%% budget but not significantly (%s p = %.3g ≥ %g)", cost, budget, test, *p, Significance)
	default:
		v.Breached = true
		v.Reason = fmt.Sprintf("%s, over its %g%% budget (%s p = %.3g < %g)", cost, budget, test, *p, Significance)
	}
	return v
}

func cpuSummary(modes []ModeResult, embedded bool) CPUSummary {
	s := CPUSummary{Scope: "the loadcheck process (the client)", ReferenceOpsPerCPUSecond: stressOpsPerCPUSecond, Reference: stressReference}
	if embedded {
		s.Scope = "the whole process: the client, and the embedded node and sidecar it runs"
	}
	for _, m := range modes {
		s.Seconds += m.CPUSeconds
		s.Ops += m.Ops
	}
	if s.Ops > 0 {
		s.UsPerOp = s.Seconds * 1e6 / float64(s.Ops)
		s.SecondsPer10kOps = s.Seconds * 1e4 / float64(s.Ops)
	}
	if s.Seconds > 0 {
		s.OpsPerCPUSecond = float64(s.Ops) / s.Seconds
	}
	return s
}

// commas formats x rounded to an integer with thousands separators.
func commas(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// intervalHeader and intervalLine follow cassandra-stress's interval output. Latencies are
// in milliseconds, time in seconds since the run started.
const intervalHeader = "type       total ops,    op/s,    pk/s,   row/s,    mean,     med,     .95,     .99,    .999,     max,   time,   stderr, errors"

func intervalLine(iv Interval) string {
	return fmt.Sprintf("%-10s%10d,%8.0f,%8.0f,%8.0f,%8.2f,%8.2f,%8.2f,%8.2f,%8.2f,%8.2f,%7.1f,%9.5f,%7d",
		"total,", iv.TotalOps, iv.OpRate, iv.PkRate, iv.RowRate, iv.MeanMs, iv.P50Ms, iv.P95Ms, iv.P99Ms, iv.P999Ms, iv.MaxMs, iv.TimeS, iv.Stderr, iv.Errors)
}

// printResults prints a cassandra-stress-style Results block for one run.
func printResults(p *printer, r *runResult, fixedRate bool) {
	var b bytes.Buffer
	line := func(label, value string) { fmt.Fprintf(&b, "%-26s: %s\n", label, value) }
	ms := func(v float64) string { return fmt.Sprintf("%.3f ms", v) }
	b.WriteString("\nResults:\n")
	line("Op rate", commas(r.OpRate)+" op/s")
	line("Partition rate", commas(r.PkRate)+" pk/s")
	line("Row rate", commas(r.RowRate)+" row/s")
	line("Latency mean", ms(r.MeanMs))
	line("Latency median", ms(r.P50Ms))
	line("Latency 95th percentile", ms(r.P95Ms))
	line("Latency 99th percentile", ms(r.P99Ms))
	line("Latency 99.9th percentile", ms(r.P999Ms))
	line("Latency max", ms(r.MaxMs))
	if fixedRate {
		line("Service time mean", ms(r.Service.MeanMs))
		line("Service time median", ms(r.Service.P50Ms))
		line("Service time 99th", ms(r.Service.P99Ms))
		line("Service time max", ms(r.Service.MaxMs))
	}
	line("Total partitions", commas(float64(r.Ops)))
	line("Total errors", commas(float64(r.Errors)))
	if r.Unsent > 0 {
		line("Not sent", commas(float64(r.Unsent))+" scheduled operations: the target fell behind the rate, so the latencies understate")
	}
	if r.FirstError != "" {
		line("First error", r.FirstError)
	}
	line("Client CPU", fmt.Sprintf("%.2f s, %.1f µs/op", r.CPUSeconds, r.CPUUsPerOp))
	d := time.Duration(r.DurationS * float64(time.Second)).Round(time.Second)
	line("Total operation time", fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60))
	p.printf("%s", b.String())
}

// printComparison prints the final table, laid out like the one in ScyllaDB's fast slow
// query tracing PR: a row per round, then avg, stdev, stderr and the degradation.
func printComparison(p *printer, rep *Report) {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(m *ModeResult) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for i := range rep.Modes {
			fmt.Fprintf(tw, "%s\t", cell(&rep.Modes[i]))
		}
		fmt.Fprintln(tw)
	}
	b.WriteString("\nComparison (op rate in op/s, latency in ms; baseline " + rep.Baseline + ")\n")
	row("op rate", func(m *ModeResult) string { return m.Name })
	for _, cr := range comparisonRows(rep) {
		row(cr.label, cr.cell)
	}
	tw.Flush()
	for i, o := range rep.Order {
		fmt.Fprintf(&b, "round %d order: %s\n", i+1, strings.Join(o, ", "))
	}
	for _, m := range rep.Modes {
		if m.Baseline {
			continue
		}
		verb := "below"
		d := m.DegradationPct
		if d < 0 {
			verb, d = "above", -d
		}
		sig := "no p-value with one round"
		if m.PValue != nil {
			sig = fmt.Sprintf("Welch p = %.2g, ", *m.PValue)
			if *m.PValue < Significance {
				sig += "significant"
			} else {
				sig += "not significant"
			}
			if m.PairedPValue != nil {
				sig += fmt.Sprintf("; paired by round: %.2f%% ± %.2f%%, p = %.2g", m.PairedDegradationPct, m.PairedDegradationErr, *m.PairedPValue)
			}
		}
		fmt.Fprintf(&b, "%s: %.2f%% ± %.2f%% %s %s (%s)\n", m.Name, d, m.DegradationErr, verb, rep.Baseline, sig)
	}
	var worst float64
	for _, m := range rep.Modes {
		if m.OpRate > 0 {
			worst = math.Max(worst, 100*m.OpRateStderr/m.OpRate)
		}
	}
	if worst > noisyStderrPct {
		fmt.Fprintf(&b, "note: a mode's op rate has a standard error of %.1f%% over rounds: the machine is busy or the runs are short; more --rounds or a longer --duration narrow the error bars\n", worst)
	}
	c := rep.CPU
	if c.Ops > 0 && c.Seconds > 0 {
		fmt.Fprintf(&b, "CPU: %.3f CPU-s per 10k ops (%.1f µs/op, %s ops per CPU-second) for %s; %s\n",
			c.SecondsPer10kOps, c.UsPerOp, commas(c.OpsPerCPUSecond), c.Scope, c.Reference)
	}
	p.printf("%s", b.String())
}

// noisyStderrPct is the relative standard error of a mode's op rate above which the
// comparison warns that its error bars are wide.
const noisyStderrPct = 5

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func pct(x, of float64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*x/of)
}

// printGuardrail prints each budget's verdict; a breach says so plainly.
func printGuardrail(p *printer, rep *Report) {
	for _, v := range rep.Guardrail {
		if v.Breached {
			p.printf("GUARDRAIL BREACHED: %s\n", v.Reason)
		} else {
			p.printf("guardrail ok: %s\n", v.Reason)
		}
	}
}

// writeReports writes the JSON, CSV and HTML files that cfg asks for.
func writeReports(cfg *Config, rep *Report) error {
	for _, f := range []struct {
		path  string
		write func(io.Writer, *Report) error
	}{
		{cfg.JSON, writeJSON},
		{cfg.CSV, writeCSV},
		{cfg.HTML, writeHTML},
	} {
		if f.path == "" {
			continue
		}
		if err := writeFile(f.path, rep, f.write); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, rep *Report, write func(io.Writer, *Report) error) error {
	var b bytes.Buffer
	if err := write(&b, rep); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func writeJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// csvHeader lists the CSV columns: a "mode" row per mode (over all rounds) and a "run" row
// per run.
var csvHeader = []string{"kind", "mode", "round", "position", "target", "ops", "errors", "unsent", "duration_s",
	"op_rate", "op_rate_median", "op_rate_stdev", "op_rate_stderr", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms",
	"service_p50_ms", "service_p99_ms", "service_max_ms", "degradation_pct", "degradation_err", "p_value",
	"paired_degradation_pct", "paired_degradation_err", "paired_p_value", "cpu_us_per_op"}

func writeCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	i := func(x int64) string { return strconv.FormatInt(x, 10) }
	cw.Write(csvHeader)
	for _, m := range rep.Modes {
		pv, ppv := "", ""
		if m.PValue != nil {
			pv = f(*m.PValue)
		}
		if m.PairedPValue != nil {
			ppv = f(*m.PairedPValue)
		}
		var dur float64
		for _, r := range m.Runs {
			dur += r.DurationS
		}
		cw.Write([]string{"mode", m.Name, "", "", m.Target, i(m.Ops), i(m.Errors), i(m.Unsent), f(dur),
			f(m.OpRate), f(m.OpRateMedian), f(m.OpRateStdev), f(m.OpRateStderr), f(m.MeanMs), f(m.P50Ms), f(m.P95Ms), f(m.P99Ms), f(m.P999Ms), f(m.MaxMs),
			f(m.Service.P50Ms), f(m.Service.P99Ms), f(m.Service.MaxMs), f(m.DegradationPct), f(m.DegradationErr), pv,
			f(m.PairedDegradationPct), f(m.PairedDegradationErr), ppv, f(m.CPUUsPerOp)})
		for _, r := range m.Runs {
			cw.Write([]string{"run", m.Name, strconv.Itoa(r.Round), strconv.Itoa(r.Position), r.Target, i(r.Ops), i(r.Errors), i(r.Unsent), f(r.DurationS),
				f(r.OpRate), "", "", "", f(r.MeanMs), f(r.P50Ms), f(r.P95Ms), f(r.P99Ms), f(r.P999Ms), f(r.MaxMs),
				f(r.Service.P50Ms), f(r.Service.P99Ms), f(r.Service.MaxMs), "", "", "", "", "", "", f(r.CPUUsPerOp)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// comparisonRow is one row of the comparison table: a label and a cell per mode.
type comparisonRow struct {
	label string
	cell  func(m *ModeResult) string
}

// comparisonRows are the rows of the comparison table, below its header, shared by the
// printed table and the HTML report. A row with an empty label separates groups.
func comparisonRows(rep *Report) []comparisonRow {
	var rows []comparisonRow
	row := func(label string, cell func(m *ModeResult) string) {
		rows = append(rows, comparisonRow{label, cell})
	}
	for r := 0; r < rep.Settings.Rounds; r++ {
		row(fmt.Sprintf("round %d", r+1), func(m *ModeResult) string {
			if r < len(m.Rounds) {
				return commas(m.Rounds[r])
			}
			return "-"
		})
	}
	row("avg", func(m *ModeResult) string { return commas(m.OpRate) })
	row("median", func(m *ModeResult) string { return commas(m.OpRateMedian) })
	row("stdev", func(m *ModeResult) string { return fmt.Sprintf("%.1f", m.OpRateStdev) })
	row("stderr", func(m *ModeResult) string { return fmt.Sprintf("%.1f", m.OpRateStderr) })
	row("stderr %", func(m *ModeResult) string { return pct(m.OpRateStderr, m.OpRate) })
	row("%[1-mode/"+rep.Baseline+"]", func(m *ModeResult) string {
		if m.Baseline {
			return "-"
		}
		return fmt.Sprintf("%.2f%% ± %.2f%%", m.DegradationPct, m.DegradationErr)
	})
	row("p-value (Welch)", func(m *ModeResult) string {
		if m.Baseline || m.PValue == nil {
			return "-"
		}
		return fmt.Sprintf("%.2g", *m.PValue)
	})
	row("paired %[1-mode/"+rep.Baseline+"]", func(m *ModeResult) string {
		if m.Baseline || m.PairedPValue == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f%% ± %.2f%%", m.PairedDegradationPct, m.PairedDegradationErr)
	})
	row("paired p-value", func(m *ModeResult) string {
		if m.Baseline || m.PairedPValue == nil {
			return "-"
		}
		return fmt.Sprintf("%.2g", *m.PairedPValue)
	})
	row("", func(*ModeResult) string { return "" })
	f := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	row("latency mean", func(m *ModeResult) string { return f(m.MeanMs) })
	row("latency median", func(m *ModeResult) string { return f(m.P50Ms) })
	row("latency 95th", func(m *ModeResult) string { return f(m.P95Ms) })
	row("latency 99th", func(m *ModeResult) string { return f(m.P99Ms) })
	row("latency 99.9th", func(m *ModeResult) string { return f(m.P999Ms) })
	row("latency max", func(m *ModeResult) string { return f(m.MaxMs) })
	if rep.Settings.Rate > 0 {
		row("service median", func(m *ModeResult) string { return f(m.Service.P50Ms) })
		row("service 99th", func(m *ModeResult) string { return f(m.Service.P99Ms) })
	}
	row("errors", func(m *ModeResult) string { return commas(float64(m.Errors)) })
	row("CPU-s per 10k ops", func(m *ModeResult) string { return fmt.Sprintf("%.3f", m.CPUSecondsPer10kOps) })
	return rows
}
