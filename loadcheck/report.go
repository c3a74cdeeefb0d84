package loadcheck

import (
	"encoding/json"
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/tracecar/tracecar/loadcheck/replay"
	"github.com/tracecar/tracecar/loadcheck/stats"
)

// Latency summarizes a latency histogram, in milliseconds.
type Latency = stats.Latency

// The "replay" section of the report: a replay's counts and keys, captured and replayed.
type (
	ReplayReport    = replay.Report
	ReplayStatement = replay.Statement
	ReplayKeys      = replay.Keys
	ReplayKey       = replay.Key
)

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
	Unsent     int64   `json:"unsent"`
	OpRate     float64 `json:"op_rate"`
	PkRate     float64 `json:"pk_rate"`
	RowRate    float64 `json:"row_rate"`
	Latency            // response time
	Service    Latency `json:"service"` // service time: from the actual send
	CPUSeconds float64 `json:"cpu_s"`
	CPUUsPerOp float64 `json:"cpu_us_per_op"`
	FirstError string  `json:"first_error,omitempty"`
	// SidecarCPUUsPerOp and NodeCPUUsPerOp are the CPU time the sidecar's and the node's
	// processes spent per operation of the run, from their /metrics before and after it;
	// null when unknown.
	SidecarCPUUsPerOp *float64 `json:"sidecar_cpu_us_per_op"`
	NodeCPUUsPerOp    *float64 `json:"node_cpu_us_per_op"`
	// SidecarUserCPUUsPerOp is the user-space part of SidecarCPUUsPerOp: the sidecar's own
	// code, without the kernel's work on its system calls, whose number per operation
	// follows how busy the machine is.
	SidecarUserCPUUsPerOp *float64 `json:"sidecar_user_cpu_us_per_op"`
	// AddedP50Ms and AddedP99Ms are percentiles of the time responses spent in the sidecar
	// itself during the run (tracecar_added_latency_seconds), interpolated in the bucket
	// that holds them; null when the sidecar has no such histogram or saw no request.
	AddedP50Ms *float64   `json:"added_p50_ms"`
	AddedP99Ms *float64   `json:"added_p99_ms"`
	Intervals  []Interval `json:"intervals"`
	// SessionsRecorded is the sessions the sidecar recorded during the run
	// (tracecar_slow_sessions_total); null when unknown.
	SessionsRecorded *int64 `json:"sessions_recorded"`

	// Sidecars are the requests each sidecar of a cluster saw during the run.
	Sidecars []SidecarRequests `json:"sidecars,omitempty"`

	// PerOp are a profile's operations in the run, and Partitions the partitions they
	// wrote or returned; absent for the built-in workloads.
	PerOp      []OpResult `json:"per_op,omitempty"`
	Partitions int64      `json:"partitions,omitempty"`
}

// ModeResult is one mode over all rounds. Rates are means over rounds; latencies come from
// the merged histograms of its runs.
type ModeResult struct {
	Name string `json:"name"`
	Spec string `json:"spec"`
	// Settings are the mode's effective tracing settings on the sidecar (null for a mode
	// that bypasses it); SessionsRecorded is the sessions its runs recorded (null when
	// unknown). A fast or full mode that recorded none measured the fixed cost alone.
	Settings         *ModeSettings `json:"settings"`
	SessionsRecorded *int64        `json:"sessions_recorded"`
	Target           string        `json:"target"`
	Baseline         bool          `json:"baseline"`
	OpRate           float64       `json:"op_rate"`
	OpRateStdev      float64       `json:"op_rate_stdev"`
	OpRateStderr     float64       `json:"op_rate_stderr"`
	OpRateMedian     float64       `json:"op_rate_median"`
	Rounds           []float64     `json:"rounds"` // op rate of each round
	PkRate           float64       `json:"pk_rate"`
	RowRate          float64       `json:"row_rate"`
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
	PairedDegradationPct float64  `json:"paired_degradation_pct"`
	PairedDegradationErr float64  `json:"paired_degradation_err"`
	PairedPValue         *float64 `json:"paired_p_value"`
	CPUSeconds           float64  `json:"cpu_s"`
	CPUUsPerOp           float64  `json:"cpu_us_per_op"`
	CPUSecondsPer10kOps  float64  `json:"cpu_s_per_10k_ops"`
	// MinDetectablePct is the smallest op-rate difference from the baseline, in percent,
	// that this run's noise lets a two-sided t-test at p < 0.05 tell from zero.
	MinDetectablePct float64 `json:"min_detectable_pct"`

	// The sidecar's and the node's CPU per operation: the mean over rounds and its standard
	// error, null when unknown; then the difference from the baseline (mode − baseline, in
	// µs/op, paired by round when the rounds pair), its standard error, the same in percent
	// of the baseline, its p-value (paired t-test, or Welch's without pairs), Welch's p-value,
	// and the smallest difference this run could detect.
	SidecarCPUUsPerOp                *float64 `json:"sidecar_cpu_us_per_op"`
	SidecarCPUUsPerOpStderr          *float64 `json:"sidecar_cpu_us_per_op_stderr"`
	SidecarCPUUsPerOpDiff            *float64 `json:"sidecar_cpu_us_per_op_diff"`
	SidecarCPUUsPerOpDiffStderr      *float64 `json:"sidecar_cpu_us_per_op_diff_stderr"`
	SidecarCPUUsPerOpDiffPct         *float64 `json:"sidecar_cpu_us_per_op_diff_pct"`
	SidecarCPUUsPerOpDiffPValue      *float64 `json:"sidecar_cpu_us_per_op_diff_p_value"`
	SidecarCPUUsPerOpDiffWelchPValue *float64 `json:"sidecar_cpu_us_per_op_diff_welch_p_value"`
	SidecarCPUUsPerOpMinDetectable   *float64 `json:"sidecar_cpu_us_per_op_min_detectable"`
	// SidecarCPUCoresDiff is SidecarCPUUsPerOpDiff at the mode's measured op rate, in cores
	// (CPU-seconds per second): what the mode costs the sidecar's host at that rate.
	SidecarCPUCoresDiff *float64 `json:"sidecar_cpu_cores_diff,omitempty"`
	// The same for the user-space part of the sidecar's CPU.
	SidecarUserCPUUsPerOp                *float64 `json:"sidecar_user_cpu_us_per_op"`
	SidecarUserCPUUsPerOpStderr          *float64 `json:"sidecar_user_cpu_us_per_op_stderr"`
	SidecarUserCPUUsPerOpDiff            *float64 `json:"sidecar_user_cpu_us_per_op_diff"`
	SidecarUserCPUUsPerOpDiffStderr      *float64 `json:"sidecar_user_cpu_us_per_op_diff_stderr"`
	SidecarUserCPUUsPerOpDiffPct         *float64 `json:"sidecar_user_cpu_us_per_op_diff_pct"`
	SidecarUserCPUUsPerOpDiffPValue      *float64 `json:"sidecar_user_cpu_us_per_op_diff_p_value"`
	SidecarUserCPUUsPerOpDiffWelchPValue *float64 `json:"sidecar_user_cpu_us_per_op_diff_welch_p_value"`
	SidecarUserCPUUsPerOpMinDetectable   *float64 `json:"sidecar_user_cpu_us_per_op_min_detectable"`
	NodeCPUUsPerOp                       *float64 `json:"node_cpu_us_per_op"`
	NodeCPUUsPerOpStderr                 *float64 `json:"node_cpu_us_per_op_stderr"`
	NodeCPUUsPerOpDiff                   *float64 `json:"node_cpu_us_per_op_diff"`
	NodeCPUUsPerOpDiffStderr             *float64 `json:"node_cpu_us_per_op_diff_stderr"`
	NodeCPUUsPerOpDiffPct                *float64 `json:"node_cpu_us_per_op_diff_pct"`
	NodeCPUUsPerOpDiffPValue             *float64 `json:"node_cpu_us_per_op_diff_p_value"`
	NodeCPUUsPerOpDiffWelchPValue        *float64 `json:"node_cpu_us_per_op_diff_welch_p_value"`
	NodeCPUUsPerOpMinDetectable          *float64 `json:"node_cpu_us_per_op_min_detectable"`
	// AddedP50Ms and AddedP99Ms come from the sum of the runs' bucket deltas of the
	// sidecar's tracecar_added_latency_seconds.
	AddedP50Ms *float64 `json:"added_p50_ms"`
	AddedP99Ms *float64 `json:"added_p99_ms"`

	// VsPrevious compares the mode with the one listed before it (other than the baseline
	// and modes that bypass the sidecar), such as full with fast: paired differences of the
	// sidecar's CPU, user CPU and added latency, mode − previous.
	VsPrevious []PairDiff `json:"vs_previous,omitempty"`

	Runs []RunResult `json:"runs"`

	// PerOp are a profile's operations over the mode's runs. The JSON puts them in "ops",
	// where the built-in workloads have the operation count (then in "ops_total").
	PerOp []OpResult `json:"-"`
	// OpsTotal is, for a profile, the operations (Ops, which the JSON gives as "ops" for
	// the built-in workloads), and Partitions the partitions its operations wrote or
	// returned; both absent for the built-in workloads.
	OpsTotal   int64 `json:"ops_total,omitempty"`
	Partitions int64 `json:"partitions,omitempty"`

	resp, svc *hdrhistogram.Histogram
	added     bucket
	diffs     map[string]metricDiff // by budget metric, against the baseline
}

// OpWeight is one operation of a profile's mix and its weight.
type OpWeight struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// PairDiff is the difference of one metric between a mode and another one.
type PairDiff struct {
	Mode   string   `json:"mode"`   // the other mode
	Metric string   `json:"metric"` // a budget metric name: cpu, cpu-user, node-cpu, p99, added-p99
	Diff   float64  `json:"diff"`   // in the metric's unit: µs/op, or ms for latencies
	Stderr float64  `json:"stderr"`
	PValue *float64 `json:"p_value"` // paired t-test, or Welch's without pairs
}

// Breach is a budget whose verdict fails the run: under breach, a cost shown over its
// limit; under prove, a cost not shown within it. The
// budget_pct and degradation fields are the op-rate ones, kept for the ops metric; limit,
// value and unit hold every metric's.
type Breach struct {
	Mode           string  `json:"mode"`
	Metric         string  `json:"metric"`
	Limit          float64 `json:"limit"`
	Value          float64 `json:"value"`
	ValueErr       float64 `json:"value_err"`
	Unit           string  `json:"unit"`
	BudgetPct      float64 `json:"budget_pct"`
	DegradationPct float64 `json:"degradation_pct"`
	DegradationErr float64 `json:"degradation_err"`
	PValue         float64 `json:"p_value"`
	// Verdict and Outcome are the verdict's: under prove a budget not shown within its
	// limit (not resolved, or unknown) fails the run too.
	Verdict      string `json:"verdict"`
	Outcome      string `json:"outcome"`
	RoundsNeeded int    `json:"rounds_needed,omitempty"`
}

// Verdict is the guardrail's decision on one budget.
type Verdict struct {
	Mode           string  `json:"mode"`
	Metric         string  `json:"metric"`
	Limit          float64 `json:"limit"`
	Value          float64 `json:"value"`
	ValueErr       float64 `json:"value_err"`
	Unit           string  `json:"unit"`
	BudgetPct      float64 `json:"budget_pct"`
	DegradationPct float64 `json:"degradation_pct"`
	DegradationErr float64 `json:"degradation_err"`
	// PValue is the verdict's p-value, adjusted for the number of budgets when the rule
	// calls for it (PAdjusted, the same); POneSided is the unadjusted one.
	PValue   *float64 `json:"p_value"`
	Breached bool     `json:"breached"` // the verdict fails the run: exit 3
	Reason   string   `json:"reason"`

	// Verdict is the rule: breach (fail when a budget is shown over its limit) or prove
	// (fail unless every budget is shown within it). Outcome is within, over, not
	// resolved or unknown. Value is the estimate (mode − baseline), ValueErr its standard
	// error; Lower95 and Upper95 are its one-sided 95% bounds, each the bound a one-sided
	// test at p < 0.05 uses (together, a two-sided 90% interval). T is (value − limit) /
	// stderr with DF degrees of freedom, from Test: a paired t-test by round when the
	// rounds pair, else Welch's. Adjustment says how the p-value was adjusted for several
	// budgets. RoundsNeeded is, for a budget not resolved, the rounds in all that the
	// observed variance says would resolve it.
	Verdict      string   `json:"verdict"`
	Outcome      string   `json:"outcome"`
	Test         string   `json:"test,omitempty"`
	T            *float64 `json:"t"`
	DF           *float64 `json:"df"`
	Lower95      *float64 `json:"lower95"`
	Upper95      *float64 `json:"upper95"`
	POneSided    *float64 `json:"p_one_sided"`
	PAdjusted    *float64 `json:"p_adjusted"`
	Adjustment   string   `json:"adjustment,omitempty"`
	RoundsNeeded int      `json:"rounds_needed,omitempty"`

	verdictText string // the rule's clause of Reason
}

// Outcomes of one budget's test, in Verdict.Outcome.
const (
	OutcomeWithin      = "within"       // the upper 95% bound is under the limit
	OutcomeOver        = "over"         // breach: adjusted p < 0.05; prove: the lower 95% bound is over the limit
	OutcomeNotResolved = "not resolved" // the 95% bounds straddle the limit
	OutcomeUnknown     = "unknown"      // no figure, or one round: nothing to test
)

// Settings records how the check ran.
type Settings struct {
	Node           string  `json:"node,omitempty"`
	Sidecar        string  `json:"sidecar,omitempty"`
	Admin          string  `json:"admin,omitempty"`
	NodeAPI        string  `json:"node_api,omitempty"`
	Embedded       bool    `json:"embedded"`
	SidecarMetrics string  `json:"sidecar_metrics,omitempty"`
	NodeMetrics    string  `json:"node_metrics,omitempty"`
	TargetErrorPct float64 `json:"target_error_pct"`
	MaxRounds      int     `json:"max_rounds"`
	MaxTimeS       float64 `json:"max_time_s"`
	Workload       string  `json:"workload"`
	WriteFrac      float64 `json:"write_fraction"`
	Pop            string  `json:"pop"`
	Rounds         int     `json:"rounds"`
	DurationS      float64 `json:"duration_s"`
	WarmupS        float64 `json:"warmup_s"`
	Ops            int64   `json:"ops_per_run"`
	Concurrency    int     `json:"concurrency"`
	Rate           float64 `json:"rate"`
	CL             string  `json:"cl"`
	Compression    string  `json:"compression"`
	Protocol       int     `json:"protocol_version,omitempty"` // 0: negotiated
	Connections    int     `json:"connections"`
	TraceContext   string  `json:"trace_context"`
	// Profile is the cassandra-stress profile a profile run ran (--profile), and OpMix its
	// operations' weights (--ops), in the order given; both absent for the built-in
	// workloads.
	Profile string     `json:"profile,omitempty"`
	OpMix   []OpWeight `json:"op_mix,omitempty"`
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
	// Outcome is the run's over its budgets: ok, breached (one shown over its limit: exit
	// 3) or not resolved (under prove, one not shown within: exit 3, more rounds would
	// decide); absent without --max-overhead.
	Outcome string `json:"outcome,omitempty"`

	// Cluster is, against a cluster of sidecars (several --admin URLs), the requests each
	// sidecar saw in each mode's runs.
	Cluster *ClusterReport `json:"cluster,omitempty"`
	// Replay compares a replay with its capture (--workload replay:FILE).
	Replay *ReplayReport `json:"replay,omitempty"`
}

// fixedCostOnly reports whether a mode that traces by the threshold recorded no session:
// its figures are the fixed cost of tracing, without the recording.
func (m *ModeResult) fixedCostOnly() bool {
	return m.Settings.recordsSlow() && m.SessionsRecorded != nil && *m.SessionsRecorded == 0
}

// fixedCostNote is what the figures of such a mode say next to them.
const fixedCostNote = "measured the fixed cost only: no request was over the threshold"

// Mode returns the result of the named mode, or nil.
func (r *Report) Mode(name string) *ModeResult {
	for i := range r.Modes {
		if r.Modes[i].Name == name {
			return &r.Modes[i]
		}
	}
	return nil
}

func ptr(x float64) *float64 { return &x }

// The run's outcome over its budgets (Report.Outcome): ok when no budget fails the run,
// breached when one is shown over its limit, not resolved when the ones that fail it (under
// prove) are not shown over: more rounds would decide.
const (
	RunOK          = "ok"
	RunBreached    = "breached"
	RunNotResolved = "not resolved"
)

// outcome is the run's outcome over its budgets' verdicts; "" with no budget.
func outcome(vs []Verdict) string {
	if len(vs) == 0 {
		return ""
	}
	out := RunOK
	for _, v := range vs {
		switch {
		case !v.Breached:
		case v.Outcome == OutcomeOver:
			return RunBreached
		default:
			out = RunNotResolved
		}
	}
	return out
}

// verdictOutcome is the word for one budget's verdict: ok, breached or not resolved.
func verdictOutcome(v Verdict) string { return outcome([]Verdict{v}) }

// cores converts a CPU cost per operation (µs/op) at an op rate (op/s) into cores: the
// CPU-seconds per second it costs, which is what a capacity plan counts.
func cores(usPerOp *float64, opRate float64) (float64, bool) {
	if usPerOp == nil || opRate <= 0 {
		return 0, false
	}
	return *usPerOp * opRate / 1e6, true
}

// coresText formats a cost in cores at an op rate: "+0.090 core (9.0% of a core) at 2,000 op/s".
func coresText(c, opRate float64) string {
	return fmt.Sprintf("%+.3f core (%+.1f%% of a core) at %s op/s", c, 100*c, commas(opRate))
}

// OpResult is one operation of a profile over a run or a mode: its count, rates, the rows
// and partitions it wrote or returned, and its latency (service time, from the send).
type OpResult struct {
	Name       string  `json:"name"`
	Count      int64   `json:"count"`
	OpRate     float64 `json:"op_rate"`
	Rows       int64   `json:"rows"`
	Partitions int64   `json:"partitions"`
	Errors     int64   `json:"errors"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	// RowRate and PkRate are the rows and partitions per second; MeanMs the mean latency.
	RowRate float64 `json:"row_rate"`
	PkRate  float64 `json:"pk_rate"`
	MeanMs  float64 `json:"mean_ms"`
	hist    *hdrhistogram.Histogram
}

func (r *OpResult) finish(seconds float64) {
	if seconds > 0 {
		r.OpRate = float64(r.Count) / seconds
		r.RowRate = float64(r.Rows) / seconds
		r.PkRate = float64(r.Partitions) / seconds
	}
	l := latencyOf(r.hist)
	r.P50Ms, r.P99Ms, r.MeanMs = l.P50Ms, l.P99Ms, l.MeanMs
}

// modeResultJSON is ModeResult without its MarshalJSON.
type modeResultJSON ModeResult

// MarshalJSON writes a mode; for a profile, "ops" holds its operations
// ([{"name","count","op_rate","rows","partitions","errors","p50_ms","p99_ms",…}]) and
// "ops_total" the count that "ops" holds for the built-in workloads.
func (m ModeResult) MarshalJSON() ([]byte, error) {
	if m.PerOp == nil {
		return json.Marshal(modeResultJSON(m))
	}
	return json.Marshal(struct {
		modeResultJSON
		Ops []OpResult `json:"ops"`
	}{modeResultJSON(m), m.PerOp})
}

// SidecarRequests are the requests one sidecar of a cluster saw during a run.
type SidecarRequests struct {
	Admin    string `json:"admin"`
	Requests uint64 `json:"requests"`
}

// ClusterReport sums, per mode, the requests each sidecar saw over all rounds.
type ClusterReport struct {
	Sidecars []string      `json:"sidecars"` // admin API URLs
	Modes    []ClusterMode `json:"modes"`
}

// ClusterMode is one mode's requests per sidecar, in the order of ClusterReport.Sidecars.
type ClusterMode struct {
	Name     string   `json:"name"`
	Requests []uint64 `json:"requests"`
	Total    uint64   `json:"total"`
}

// metricDiff compares a per-round figure of a mode with the baseline's.
type metricDiff struct {
	ok              bool
	n               int
	mean, baseMean  float64
	diff, diffErr   float64 // mode − baseline; paired by round when the rounds pair
	pct, pctErr     float64 // the same, in percent of the baseline's mean
	pairedP, welchP *float64
	minDetect       float64 // smallest |diff| a two-sided test at Significance could detect
	df              float64 // of diffErr: n−1 paired, Welch's otherwise; 0 without a test
	test            string  // "paired t" or "Welch t"
}
