package adminapi

import (
	"encoding/json"
	"time"
)

// Status is the JSON of GET /tracecar/status.
type Status struct {
	// Mode is the tracing mode: off, fast, full, sampled or parent; "" without a tracer.
	Mode string `json:"mode"`
	// SlowQuery and TraceProbability are the configuration, as the Scylla endpoints show it.
	SlowQuery        *SlowQuery `json:"slow_query,omitempty"`
	TraceProbability float64    `json:"trace_probability"`
	// Counters are the tracer's counters since start.
	Counters Counters `json:"counters"`
	// SinkDropped counts, per sink, the sessions dropped because its queue was full.
	SinkDropped map[string]uint64 `json:"sink_dropped"`
	// SinkErrors counts, per sink, the writes that failed.
	SinkErrors map[string]uint64 `json:"sink_errors"`
	// TraceContext is how requests' W3C trace contexts are read and followed.
	TraceContext *TraceContextStatus `json:"trace_context,omitempty"`
	// Guardrail is the overhead guardrail's state.
	Guardrail Guardrail `json:"guardrail"`
	// Loggers maps each logger to its level.
	Loggers map[string]string `json:"loggers"`
	// Capture is the workload capture's state, with its warning for values=keep.
	Capture *Capture `json:"capture,omitempty"`
	// UptimeSeconds is the time since the server was created.
	UptimeSeconds int64 `json:"uptime_s"`
	// Process is the sidecar process, and the one it took over, if any.
	Process *Process `json:"process,omitempty"`
	// Shards are the ScyllaDB shard figures, once there are any.
	Shards *Shards `json:"shards,omitempty"`
	// Audit is the audit log's state: its settings, records by category, drops and each
	// sink's state (GET /tracecar/audit); nil from a server without one.
	Audit *Audit `json:"audit,omitempty"`
	// NodeLogin is the sidecar's own login to its node (node events, the CQL sink, the
	// audit table); a refused one also makes /readyz answer 503. Nil from a server without
	// one.
	NodeLogin *NodeLogin `json:"node_login,omitempty"`
	// Timers are the toggles' running timers (for=DURATION), soonest first: what each
	// puts back, to what, and when.
	Timers []Timer `json:"timers"`
}

// ParseStatus decodes GET /tracecar/status.
func ParseStatus(body []byte) (Status, error) {
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return Status{}, badBody(PathStatus, body, err)
	}
	return st, nil
}

// Counters are the request counters in Status.
type Counters struct {
	Requests     uint64 `json:"requests"`
	Traced       uint64 `json:"traced"`
	SlowSessions uint64 `json:"slow_sessions"`
}

// PathTraceContext is the trace context's endpoint.
const PathTraceContext = "/tracecar/trace_context"

// TraceContext is the JSON of GET and POST /tracecar/trace_context: whether parent-based
// sampling is on, and the custom payload keys a request's traceparent is read from.
type TraceContext struct {
	FollowClientSampling bool     `json:"follow_client_sampling"`
	Keys                 []string `json:"keys"`
}

// TraceContextStatus is the trace context part of Status: the settings, and the
// malformed contexts ignored since start, by reason.
type TraceContextStatus struct {
	TraceContext
	Invalid map[string]uint64 `json:"invalid"`
}

// Process is the process part of Status: this sidecar process and how it came to be,
// started afresh or by taking another over (tracecar sidecar --takeover).
type Process struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// ControlSocket is where a successor connects to take this process over; empty when
	// there is none.
	ControlSocket string `json:"control_socket,omitempty"`
	// SchedPolicy is the scheduling policy the process's threads run under, as the
	// sidecar's --sched-policy names it (batch or normal); empty when none was set (not
	// Linux, or refused by the system).
	SchedPolicy string `json:"sched_policy,omitempty"`
	// Predecessor is the process this one took over; nil for a process started afresh.
	Predecessor *ProcessPeer `json:"predecessor,omitempty"`
	// Handover is the handover that made this process; nil for one started afresh.
	Handover *Handover `json:"handover,omitempty"`
	// Build is the running binary.
	Build Build `json:"build"`
}

// ProcessPeer is another sidecar process.
type ProcessPeer struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
}

// Handover describes the handover from the predecessor.
type Handover struct {
	// At is when the listeners and the runtime state were received.
	At time.Time `json:"at"`
	// ConnectionsFrom is when this process, serving, asked for the connections, and
	// ConnectionsTo when the last had arrived (zero until then): the span in which clients
	// may wait for their connection to move.
	ConnectionsFrom time.Time `json:"connections_from"`
	ConnectionsTo   time.Time `json:"connections_to,omitzero"`
	// Received counts the client connections this process took over.
	Received int `json:"connections_received"`
	// ClosedByPredecessor counts those the predecessor drained and closed instead (TLS,
	// or not quiet within its drain timeout), as it reported at the end.
	ClosedByPredecessor int `json:"connections_closed_by_predecessor"`
	// Done is false while the connections are arriving, and stays false when the
	// predecessor went away before it was done (this process keeps what it received).
	Done bool `json:"done"`
}

// Build is a binary: tracecar's version, its VCS revision and the revision's commit time
// (RFC 3339), whether the checkout had uncommitted changes, the Go version.
type Build struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Shards is the ScyllaDB part of Status: what the sidecar sees of its node's shards. It
// is present once the node has named a connection's shard in SUPPORTED, or a connection
// came on the sidecar's shard-aware port.
type Shards struct {
	// RequestsByShard counts the requests of the connections on each shard, by shard
	// number.
	RequestsByShard map[string]uint64 `json:"requests_by_shard"`
	// CrossShardRequests counts the EXECUTEs whose partition key another shard owns than
	// their connection's: 0 for shard-aware drivers, about (n-1)/n of them for others.
	CrossShardRequests uint64 `json:"cross_shard_requests"`
	// ShardAwarePaired counts the connections on the shard-aware port that got the shard
	// they asked for; ShardAwareFallbacks those that got an ordinary node connection
	// instead, by reason.
	ShardAwarePaired    uint64            `json:"shard_aware_paired"`
	ShardAwareFallbacks map[string]uint64 `json:"shard_aware_fallbacks"`
	// MalformedSupported counts the node's SUPPORTED answers whose sharding keys were
	// malformed.
	MalformedSupported uint64 `json:"malformed_supported"`
}

// NodeLogin is the state of the sidecar's own login to its node, for node events, the CQL
// sink and the audit table: State is not_tried, ok, refused or failed; Refused counts the
// refusals since start.
type NodeLogin struct {
	State   string `json:"state"`
	User    string `json:"user"`
	Error   string `json:"error,omitempty"`
	Refused uint64 `json:"refused"`
}

// TimerSetting is one setting that a toggle's timer puts back: its name (slow_query.enable,
// slow_query.fast, slow_query.threshold, slow_query.ttl, trace_probability, "logger NAME",
// trace_filter, statement_stats, trace_floor), the value it goes back to and the value the
// toggle set, as the API writes them (a trace filter as a query string, "" for none).
type TimerSetting struct {
	Setting  string `json:"setting"`
	RevertTo string `json:"reverts_to"`
	SetTo    string `json:"set_to"`
}

// Timer is a toggle's timer as Status shows it: the toggle (its method and path), the
// settings it puts back, when, and whether --toggle-max-duration set it (Imposed) because
// the toggle was costly and came without for.
type Timer struct {
	Toggle           string         `json:"toggle"`
	Settings         []TimerSetting `json:"settings"`
	Due              time.Time      `json:"due"`
	RemainingSeconds float64        `json:"remaining_s"`
	Imposed          bool           `json:"imposed,omitempty"`
}

func (Status) shape()       {}
func (TraceContext) shape() {}
