package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/schedpolicy"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

func runSidecar(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sidecar", stderr)
	var cfg stackConfig
	f := addSidecarFlags(fs, &cfg)
	cf, err := parseSidecarFlags(fs, args)
	if err != nil {
		return err
	}
	policy, err := f.checkTransport(&cfg)
	if err != nil {
		return err
	}
	if err := f.checkTracing(&cfg); err != nil {
		return err
	}
	if err := f.handover.check(&cfg); err != nil {
		return err
	}
	reg, err := f.logs.registry(stderr)
	if err != nil {
		return err
	}
	defer reg.Close()
	cfg.schedPolicy = applySchedPolicy(policy, reg.Logger(logs.Sidecar))
	live := &liveSettings{logs: f.logs, stderr: stderr, tls: f.serverTLS, fs: fs, config: cf}
	if cfg.TLS, err = live.reloadableTLS(cfg.TLS); err != nil {
		return err
	}
	return serveSidecar(ctx, cfg, f.handover, live, reg, stdout)
}

// sidecarFlags are the flags of "tracecar sidecar" that fill stackConfig only once
// checked; the others are its fields.
type sidecarFlags struct {
	ctxKeys, clusterFile, peers, sched *string
	serverTLS                          *serverTLSFlags
	nodeTLS                            *nodeTLSFlags
	maxFrame, inFlight                 *byteSize
	maxVersion                         *protocolVersion
	memory                             *memoryLimit
	logs                               logFlags
	guard                              guardFlags
	handover                           *handoverFlags
}

// addSidecarFlags defines the flags of "tracecar sidecar", in groups.
func addSidecarFlags(fs *flag.FlagSet, cfg *stackConfig) *sidecarFlags {
	addAddressFlags(fs, cfg)
	addAdminFlags(fs, cfg)
	addTracingFlags(fs, cfg)
	f := &sidecarFlags{
		ctxKeys:   fs.String("trace-context-key", tracing.TraceparentKey, "custom payload `keys` a request's W3C traceparent is read from, comma-separated, tried in order"),
		serverTLS: addServerTLSFlags(fs),
		nodeTLS:   addNodeTLSFlags(fs),
	}
	f.clusterFile = fs.String("cluster-file", "", "file mapping peer node addresses to their sidecars', one NODE=SIDECAR a line, when sidecars are not on their nodes' IPs at --peer-port")
	f.peers = fs.String("peers", "", "the same mapping as --cluster-file, as NODE=SIDECAR,…")
	addLimitFlags(fs, cfg, f)
	f.sched = fs.String("sched-policy", schedpolicy.Normal.String(), "Linux scheduling `policy` of the sidecar's threads: normal (SCHED_OTHER, the system's default) or batch (SCHED_BATCH, an opt-in: a packet that wakes the sidecar never preempts the node or the application, so fewer wake-ups per request, about 9% of the sidecar's CPU unthrottled; but on a saturated core a woken sidecar can wait up to a scheduler tick)")
	f.logs = addLogFlags(fs)
	f.guard = addGuardFlags(fs)
	addStatementFlags(fs, &cfg.Statements)
	addCaptureFlags(fs, cfg)
	addAuditFlags(fs, &cfg.Audit)
	f.handover = addHandoverFlags(fs)
	return f
}

// addAddressFlags defines where the sidecar listens, its node, and how it drains.
func addAddressFlags(fs *flag.FlagSet, cfg *stackConfig) {
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:9043", "CQL address clients connect to")
	fs.StringVar(&cfg.Node, "node", "", "the node's CQL address; empty starts an embedded node")
	fs.StringVar(&cfg.Admin, "admin", "127.0.0.1:10000", "admin REST API address")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-address", "", "address written into system.local/peers rpc_address (default: the local address of each client connection)")
	fs.IntVar(&cfg.PeerPort, "peer-port", 0, "port of the sidecars beside peer nodes (default: the advertised port)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 10*time.Second, "how long shutdown, or a handover to a new process (--takeover), waits for in-flight requests")
	fs.StringVar(&cfg.ShardAwareListen, "shard-aware-listen", "", "ScyllaDB's shard-aware port of the sidecar, as IP:PORT, or off; default: the --listen IP with the node's shard-aware port number, once a client's OPTIONS shows the node has several shards")
}

// addAdminFlags defines the admin API's token and TLS.
func addAdminFlags(fs *flag.FlagSet, cfg *stackConfig) {
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer token required by the admin API, and by the embedded node's API (default $TRACECAR_ADMIN_TOKEN)")
	fs.StringVar(&cfg.AdminTLSCert, "admin-tls-cert", "", "PEM certificate: serve the admin API over HTTPS")
	fs.StringVar(&cfg.AdminTLSKey, "admin-tls-key", "", "PEM key for --admin-tls-cert")
	fs.BoolVar(&cfg.AdminInsecure, "admin-insecure", false, "allow the admin API on a non-loopback address without a token")
}

// addTracingFlags defines where trace records go and what they keep.
func addTracingFlags(fs *flag.FlagSet, cfg *stackConfig) {
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", "OTLP base URL for trace spans, such as http://127.0.0.1:4318 (/v1/traces is appended for http/protobuf), or \"stdout\"; default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT")
	fs.StringVar(&cfg.OTLPProtocol, "otlp-protocol", "", "OTLP protocol: http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)")
	fs.StringVar(&cfg.NodeUsername, "node-username", "", "user name for the sidecar's own CQL connections to the node (node events, --cql-sink)")
	fs.StringVar(&cfg.NodePassword, "node-password", "", "password for --node-username (prefer env TRACECAR_NODE_PASSWORD: flags show in ps)")
	fs.BoolVar(&cfg.BindValues, "trace-bind-values", false, "include bound values in trace records (they may hold PII)")
	fs.BoolVar(&cfg.QueryLiterals, "trace-query-literals", false, "keep literal values in recorded query text (they may hold PII); passwords are always redacted")
	fs.IntVar(&cfg.MaxQueryLen, "trace-max-query-len", tracing.DefaultMaxQueryLen, "bytes of query text kept in a trace record; longer text is cut and marked")
	fs.IntVar(&cfg.RingSize, "ring-size", tracing.DefaultRingSize, "sessions kept in memory for /tracecar/slow_log")
	fs.BoolVar(&cfg.CQLSink, "cql-sink", false, "also write slow-query records into the node's tracecar_traces keyspace, with TTL")
	fs.Var(floorFlag{&cfg.TraceFloor}, "trace-floor", "trace floor: every distinct statement gets at least one full trace, with the node's own trace, per this `interval` (such as 60s; 0 is off; also POST /tracecar/trace_floor)")
	fs.BoolVar(&cfg.FollowClientSampling, "follow-client-sampling", false, "parent-based sampling: trace fully, with the node's own trace, every request whose W3C trace context (custom payload) has the sampled flag (also POST /tracecar/trace_context)")
}

// addLimitFlags defines the bounds on frames, protocol versions and connections.
func addLimitFlags(fs *flag.FlagSet, cfg *stackConfig, f *sidecarFlags) {
	f.maxFrame = maxFrameSizeFlag(fs)
	f.maxVersion = maxProtocolVersionFlag(fs, "the sidecar lets through")
	f.memory = memoryLimitFlag(fs, "embedded node (with no --node)")
	f.inFlight = &byteSize{n: sidecar.DefaultMaxRequestDataInFlight, min: 64 << 10, max: 1 << 40}
	fs.Var(f.inFlight, "max-request-data-in-flight", "bytes of large client frames all connections may hold at once, as a `size`; a frame that does not fit waits, its connection unread (at least --max-frame-size)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", defaultMaxConnections, "client connections held at once; more are closed on accept, with a warning in the log (0: no limit)")
}

// checkTransport checks the flags of the connections, the statistics and the guardrail
// into cfg, and returns the scheduling policy.
func (f *sidecarFlags) checkTransport(cfg *stackConfig) (schedpolicy.Policy, error) {
	var none schedpolicy.Policy
	if err := cfg.Statements.check(); err != nil {
		return none, err
	}
	if err := cfg.Audit.check(); err != nil {
		return none, err
	}
	tokenFromEnv(&cfg.AdminToken)
	var err error
	if cfg.TLS, err = f.serverTLS.config(); err != nil {
		return none, err
	}
	if cfg.NodeTLS, err = f.nodeTLS.config(cfg.Node); err != nil {
		return none, err
	}
	if cfg.NodeTLS != nil && cfg.Node == "" {
		return none, usageErrorf("--node-tls and --node-tls-* need --node: the embedded node speaks plaintext")
	}
	cfg.MaxFrameSize = f.maxFrame.n
	cfg.MaxRequestInFlight = f.inFlight.n
	if cfg.MaxProtocolVersion, err = f.maxVersion.check(); err != nil {
		return none, err
	}
	if err := checkShardAwareListen(cfg.ShardAwareListen); err != nil {
		return none, err
	}
	if f.memory.set && cfg.Node != "" {
		return none, usageErrorf("--memory-limit bounds the embedded node: give it without --node")
	}
	cfg.NodeMemory = *f.memory
	if cfg.MaxConnections < 0 {
		return none, usageErrorf("--max-connections must be 0 (no limit) or more, got %d", cfg.MaxConnections)
	}
	policy, err := schedpolicy.Parse(*f.sched)
	if err != nil {
		return none, usageErrorf("--sched-policy: %v", err)
	}
	if err = f.guard.fill(cfg); err != nil {
		return none, err
	}
	if cfg.Peers, err = peerMap(*f.clusterFile, *f.peers); err != nil {
		return none, err
	}
	return policy, nil
}

// checkTracing checks the flags of the admin API's TLS, the trace records, their export
// and the node's credentials into cfg.
func (f *sidecarFlags) checkTracing(cfg *stackConfig) error {
	if (cfg.AdminTLSCert == "") != (cfg.AdminTLSKey == "") {
		return usageErrorf("--admin-tls-cert and --admin-tls-key go together")
	}
	if cfg.MaxQueryLen <= 0 {
		return usageErrorf("--trace-max-query-len must be a positive number of bytes, got %d", cfg.MaxQueryLen)
	}
	if cfg.RingSize <= 0 {
		return usageErrorf("--ring-size must be positive, got %d", cfg.RingSize)
	}
	var err error
	if cfg.TraceContextKeys, err = traceContextKeys(*f.ctxKeys); err != nil {
		return err
	}
	if cfg.OTLPEndpoint != "" && cfg.OTLPEndpoint != "stdout" {
		if _, err := tracing.TracesURL(cfg.OTLPEndpoint); err != nil || !strings.Contains(cfg.OTLPEndpoint, "://") {
			return usageErrorf("--otlp-endpoint must be a URL such as http://127.0.0.1:4318 or \"stdout\", got %q", cfg.OTLPEndpoint)
		}
	}
	if _, err := tracing.ResolveProtocol(cfg.OTLPProtocol); err != nil {
		return usageErrorf("--otlp-protocol (or OTEL_EXPORTER_OTLP_PROTOCOL): %v", err)
	}
	if cfg.NodePassword == "" {
		cfg.NodePassword = os.Getenv("TRACECAR_NODE_PASSWORD")
	}
	if cfg.NodePassword != "" && cfg.NodeUsername == "" {
		return usageErrorf("--node-password (or TRACECAR_NODE_PASSWORD) needs --node-username")
	}
	return nil
}

// traceContextKeys parses --trace-context-key: custom payload keys, comma-separated, each
// a non-empty [string] of the protocol (at most 65535 bytes) given once.
func traceContextKeys(v string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(v, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			return nil, usageErrorf("--trace-context-key %q: want custom payload keys, comma-separated, such as traceparent,x-traceparent", v)
		case len(k) > 65535:
			return nil, usageErrorf("--trace-context-key: a key of %d bytes; a CQL [string] holds at most 65535", len(k))
		case slices.Contains(keys, k):
			return nil, usageErrorf("--trace-context-key: %q given twice", k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// applySchedPolicy puts every thread of the process, and so every thread started later,
// under the scheduling policy p (see package schedpolicy), before the sidecar starts its
// event loops. A policy that cannot be set is a warning, not a failure: the sidecar works
// the same under either, at a different cost per request. It returns the policy's name
// once it is set, "" otherwise.
func applySchedPolicy(p schedpolicy.Policy, log *zerolog.Logger) string {
	n, err := schedpolicy.Apply(p)
	switch {
	case errors.Is(err, schedpolicy.ErrUnsupported):
		log.Debug().Str("sched_policy", p.String()).Msg("scheduling policy: not on Linux, left as it is")
		return ""
	case err != nil:
		log.Warn().Err(err).Str("sched_policy", p.String()).Msg("scheduling policy not set; threads keep the system's (--sched-policy)")
		return ""
	}
	log.Info().Str("sched_policy", p.String()).Int("threads", n).Msg("threads run under " + p.KernelName())
	return p.String()
}
