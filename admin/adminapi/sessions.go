package adminapi

import (
	"encoding/json"
	"net/netip"
	"time"
)

// Paths of the recorded sessions and the trace filter.
const (
	PathSlowLog     = "/tracecar/slow_log"
	PathSessions    = "/tracecar/sessions/"
	PathTraceFilter = "/tracecar/trace_filter"
)

// Session is one recorded tracing session, GET /tracecar/sessions/{id} and an element of
// GET /tracecar/slow_log.
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
	// hex, when the request carried a valid trace context; TraceState its tracestate.
	TraceID      string `json:"trace_id,omitempty"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
	TraceState   string `json:"trace_state,omitempty"`
}

// Event is one step of a session. SourceElapsedUS counts from the start of the session as
// its source saw it; Time is when it happened by its source's clock, when the source
// tells it.
type Event struct {
	Activity        string    `json:"activity"`
	Source          string    `json:"source"`
	SourceElapsedUS int64     `json:"source_elapsed_us"`
	Time            time.Time `json:"time,omitzero"`
}

// Sessions is the JSON of GET /tracecar/slow_log.
type Sessions []Session

// ParseSessions decodes GET /tracecar/slow_log.
func ParseSessions(body []byte) ([]Session, error) {
	var out []Session
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, badBody(PathSlowLog, body, err)
	}
	return out, nil
}

// ParseSession decodes GET /tracecar/sessions/{id}.
func ParseSession(body []byte) (Session, error) {
	var s Session
	if err := json.Unmarshal(body, &s); err != nil {
		return Session{}, badBody(PathSessions+"{id}", body, err)
	}
	return s, nil
}

// TraceFilter is the JSON of GET, POST and DELETE /tracecar/trace_filter: the filter in
// force, {} for none. Its conditions are ANDed.
type TraceFilter struct {
	Keyspace  string       `json:"keyspace,omitempty"`  // the keyspace the statement's text names
	Table     string       `json:"table,omitempty"`     // the table the statement's text names
	User      string       `json:"user,omitempty"`      // the connection's SASL PLAIN username
	Client    netip.Prefix `json:"client,omitzero"`     // the client's address
	Statement string       `json:"statement,omitempty"` // 0x… prepared id, or a substring of the normalized text
	Opcode    string       `json:"opcode,omitempty"`    // QUERY, EXECUTE, BATCH or PREPARE
}

func (Session) shape()     {}
func (Sessions) shape()    {}
func (TraceFilter) shape() {}
