package tracing

import (
	"strconv"
	"time"
)

// Session modes, as they appear in Session.Mode.
const (
	ModeFast    = "fast"
	ModeFull    = "full"
	ModeSampled = "sampled"
	ModeClient  = "client"
	// ModeParent is a request traced because its W3C trace context has the sampled flag
	// and Config.FollowClientSampling is on.
	ModeParent = "parent"
	// ModeFloor is a request traced because the trace floor (Config.FloorInterval) picked
	// its statement.
	ModeFloor = "floor"
)

// nodeTraced reports whether a request traced in mode has the tracing flag set for the node
// by the sidecar (unless Tracer.asksNode refuses it), and so the tracing id stripped from
// its response: sampled, parent and floor traces.
func nodeTraced(mode string) bool {
	return mode == ModeSampled || mode == ModeParent || mode == ModeFloor
}

// FloorNote is told the session id and start of a floor trace once it is recorded;
// *statements.Entry implements it.
type FloorNote interface {
	FloorTraced(id string, start time.Time)
}

// Event sources.
const (
	SourceSidecar = "sidecar"
	SourceNode    = "node"
)

// Session is one traced request: the JSON shape of /tracecar/slow_log, the OTel span
// attributes and the CQL sink rows. A Session handed to a sink is never modified again, so
// a recorded Session is safe for concurrent reads.
type Session struct {
	ID          string            `json:"session_id"` // a time-based UUID
	StartedAt   time.Time         `json:"started_at"`
	DurationUS  int64             `json:"duration_us"`
	Client      string            `json:"client"`
	Username    string            `json:"username,omitempty"` // SASL PLAIN username of the connection
	Coordinator string            `json:"coordinator"`
	Command     string            `json:"command"` // the opcode's name: QUERY, EXECUTE, BATCH, PREPARE…
	Request     string            `json:"request"` // e.g. "Execute CQL3 prepared query"
	Mode        string            `json:"mode"`
	Parameters  map[string]string `json:"parameters"`
	Events      []Event           `json:"events"`
	Error       string            `json:"error,omitempty"`
	// TraceID and ParentSpanID are the caller's W3C trace id and span id, in lower-case
	// hex, when the request carried a valid trace context; the session is then a span of
	// that trace, a child of that span. TraceState is the request's tracestate, kept for
	// the span.
	TraceID      string `json:"trace_id,omitempty"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
	TraceState   string `json:"trace_state,omitempty"`
	traceFlags   byte   // the caller's trace flags, for the span's remote parent
	// note is told the session's id once it is recorded: a floor trace's statement.
	note FloorNote
}

// Event is one step of a session. SourceElapsedUS counts from the start of the session as
// its source saw it: the sidecar's request received, or the node's own session start.
type Event struct {
	Activity        string `json:"activity"`
	Source          string `json:"source"`
	SourceElapsedUS int64  `json:"source_elapsed_us"`
	// Time is when the event happened, by its source's clock, when the source tells it
	// (a node event's event_id); zero otherwise.
	Time time.Time `json:"time,omitzero"`
}

// Standard sidecar events, in the order they happen.
const (
	EventReceived      = "request received"
	EventParsed        = "request parsed"
	EventSentToNode    = "sent to node"
	EventNodeResponded = "node responded"
	EventResponseSent  = "response sent"
)

// indexed returns the key of Session.Parameters under which k of a BATCH's statement i is
// recorded ("query[1]"), or k itself for i < 0, a request's only statement.
func indexed(k string, i int) string {
	if i < 0 {
		return k
	}
	return k + "[" + strconv.Itoa(i) + "]"
}
