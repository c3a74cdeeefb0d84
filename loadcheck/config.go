package loadcheck

import (
	"crypto/tls"
	"io"
	"strings"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// Defaults applied to zero Config fields. The duration and warmup are short so that the
// default job (five modes, three rounds) takes about a minute; use --duration 10s
// --warmup 2s or more for tighter figures.
const (
	DefaultRounds      = 3
	DefaultDuration    = 3 * time.Second
	DefaultWarmup      = time.Second
	DefaultWorkload    = "write"
	DefaultRatio       = "write=1,read=9"
	DefaultPop         = "uniform(1..100000)"
	DefaultConcurrency = 32
	DefaultCL          = "LOCAL_ONE"
	DefaultCompression = "none"
	DefaultConnections = 2
	DefaultTimeout     = 10 * time.Second
	DefaultInterval    = time.Second
	DefaultMaxRounds   = 10
	// DefaultMaxTime is the --max-time of the command line: adaptive rounds stop adding
	// rounds that would end the run past it, so that the default job on a busy machine, or
	// a profile with a long preload, still ends within three minutes.
	DefaultMaxTime = 150 * time.Second
	// DefaultTargetError is the --target-error of the command line, in percent of the
	// baseline's sidecar CPU per op: at 5 to 10 µs/op, a standard error of 0.05 to 0.1 µs,
	// which resolves differences of a few tenths of a µs.
	DefaultTargetError = 1.0
	// Significance is the p-value below which a degradation counts as real.
	Significance = 0.05
)

// Config configures a load check. Its zero value is completed with the defaults above,
// but at least one target (Node or Sidecar) is needed. Run does not modify the Config
// it is given.
type Config struct {
	Node       string // HOST:PORT of the node: the target of the direct mode and of target=node
	Sidecar    string // HOST:PORT of the sidecar: the target of modes without a target= step
	Admin      string // base URL of the sidecar's admin API, e.g. http://127.0.0.1:10000; for a cluster, every sidecar's, separated by commas
	NodeAPI    string // base URL of the node's API, for node:POST steps
	AdminToken string // bearer token for the admin API, if it requires one
	// TLS, when set, makes every CQL session (to the node and to the sidecar) speak TLS
	// with this client configuration; an empty ServerName means the host dialled.
	TLS *tls.Config

	// Modes lists the modes to run. Empty means direct, off, fast, full and debug when a
	// sidecar is configured (direct only with a Node), else direct alone. A mode defined in
	// ModeSpecs only runs when listed (or when Modes is empty and it overrides a default
	// one); the others are reported as unused. The built-in modes are direct, off, fast,
	// full, debug, node-debug and sampled (DESIGN.md).
	Modes []string
	// ModeSpecs defines or overrides modes: name → SPEC, as --mode NAME=SPEC.
	ModeSpecs map[string]string
	// Baseline is the mode the others are compared with: off by default when a sidecar and
	// its admin API are configured, else the first mode. A baseline not in Modes is run too,
	// first.
	Baseline string

	Rounds   int           // rounds of every mode, the least with TargetError; default 3
	Duration time.Duration // measured time per run; default DefaultDuration
	Warmup   time.Duration // warmup before each run; default DefaultWarmup, negative for none
	Ops      int64         // operations per run; when > 0 it replaces Duration

	Workload    string  // write, read, mixed, or replay:FILE (a capture file); default write
	Ratio       string  // mixed workload weights, e.g. write=1,read=9
	Pop         string  // seq=1..N, uniform(1..N) or gaussian(1..N); default uniform(1..100000)
	Concurrency int     // workers; default 32
	Rate        float64 // target op/s over all workers; 0 runs a closed loop
	CL          string  // consistency level; default LOCAL_ONE
	Compression string  // none, lz4 or snappy
	// ProtocolVersion pins the CQL protocol version of the load's client, 3 or 4; 0 lets
	// it negotiate (v4 against a node of v4 or more). Its client, gocql v1.7, has no v5:
	// 5 is a usage error that says so.
	ProtocolVersion int
	Connections     int           // connections per host; default 2
	Timeout         time.Duration // per request; default 10s

	// ReplaySpeed is the speed of a replay: "1x" (the default, the recorded timing), "2x",
	// a factor, or "max" (as fast as the workers go). ReplayConnections is its number of
	// connections; zero means as many as the capture's. ReplayKeyspace is the keyspace a
	// replay creates its tables in; against a deployment it is required (the replay
	// never writes into the captured keyspaces), on the embedded node the captured names
	// are kept when it is empty.
	ReplaySpeed       string
	ReplayConnections int
	ReplayKeyspace    string

	// Profile is the path of a cassandra-stress user profile (YAML) to run instead of the
	// built-in workloads, and OpsMix its operations' weights, NAME=W,... or ops(NAME=W,...)
	// with NAME insert or one of its queries (default insert=1). Preload is the number of
	// partitions written before the first run for the profile's queries (0: as many as
	// fit the byte budget, see DefaultPreloadBytes; negative: none). PageSize is its
	// queries' page size (0: DefaultPageSize). NodeMemoryLimit is the embedded node's
	// --memory-limit in bytes, which sizes the default preload (0: unknown or none).
	Profile         string
	OpsMix          string
	Preload         int64
	PageSize        int
	NodeMemoryLimit int64
	// keyspace is the keyspace of the sessions: a profile's, once created.
	keyspace string

	// TraceContext puts a fresh W3C traceparent in the custom payload of every request:
	// TraceContextSampled (the sampled flag set), TraceContextUnsampled, or
	// TraceContextNone (the default: no payload). A mode's trace-context= step overrides it.
	TraceContext string

	// MaxOverhead are the budgets: the largest cost of a mode on a metric that it may show
	// significantly. ParseBudgets reads them from --max-overhead.
	MaxOverhead []Budget
	// Verdict is the rule that turns the budgets into an exit: VerdictBreach (the
	// default) fails only on a budget shown over its limit; VerdictProve fails unless
	// every budget is shown within its limit, and with TargetError runs more rounds, up to
	// MaxRounds, while a budget is not resolved.
	Verdict string
	// Threshold, when set, is the slow-query threshold of the built-in fast and full
	// modes (and of guardrail, which runs full); nil leaves the sidecar's own (500ms by
	// default), where a fast request records nothing.
	Threshold *time.Duration

	// SidecarMetrics and NodeMetrics are the URLs of the sidecar's and the node's
	// Prometheus /metrics, read before and after each run for their CPU time and the
	// sidecar's added latency. SidecarMetrics defaults to Admin + "/metrics"; an empty
	// NodeMetrics leaves the node's CPU unknown.
	SidecarMetrics, NodeMetrics string
	// TargetError makes the rounds adaptive: after Rounds rounds, more run until the
	// standard error of every mode's difference from the baseline is under TargetError
	// percent of the baseline's figure (sidecar CPU per op when known, else node CPU per
	// op, else the op rate), or until MaxRounds. Zero runs exactly Rounds rounds.
	TargetError float64
	// MaxRounds caps adaptive rounds; default DefaultMaxRounds.
	MaxRounds int
	// MaxTime caps adaptive rounds by time: no round past Rounds starts when the rounds'
	// pace says it would end more than MaxTime after the run started (preload included).
	// Zero takes DefaultMaxTime; negative means no cap. The first Rounds rounds always run.
	MaxTime time.Duration

	JSON, CSV, HTML string // report files, written when set
	HDRLogDir       string // directory for HdrHistogram interval logs, one per mode and round

	// Out receives the interval lines, the Results blocks and the comparison. Nil discards.
	Out io.Writer
	// Progress shows a live progress line on Out; set it only when Out is a terminal.
	Progress bool
	// Stderr receives the progress of long phases (the preload), a line every few
	// seconds, whatever Out is. Nil discards it.
	Stderr io.Writer
	// Interval is the reporting interval; default 1s.
	Interval time.Duration
	// Embedded says that the node and the sidecar run in this process, so that the CPU
	// figures, which are the process's, include them.
	Embedded bool
}

// admins returns the admin API base URLs listed in Config.Admin, separated by commas.
func (c *Config) admins() []string {
	var out []string
	for _, a := range strings.Split(c.Admin, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, baseURL(a))
		}
	}
	return out
}

// cluster reports whether the check drives a cluster of sidecars.
func (c *Config) cluster() bool { return len(c.admins()) > 1 }

// baseURL accepts "http://host:port", "host:port" and a trailing slash.
func baseURL(s string) string { return adminapi.BaseURL(s) }
