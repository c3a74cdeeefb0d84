package adminapi

import (
	"encoding/json"
	"time"
)

// PathQueries lists the requests in flight.
const PathQueries = "/tracecar/queries"

// Query is one request in flight, an element of GET /tracecar/queries.
type Query struct {
	// Client is the client connection's address, and Username the name it authenticated
	// with ("" without authentication).
	Client   string `json:"client"`
	Username string `json:"username"`
	// Opcode is QUERY, EXECUTE, BATCH, PREPARE or another request opcode; Stream its
	// stream id on the connection.
	Opcode string `json:"opcode"`
	Stream int16  `json:"stream"`
	// ElapsedUS is the time since the request arrived at the sidecar, in microseconds, or
	// -1 when it is not known; StartedAt is its arrival, when known.
	ElapsedUS int64      `json:"elapsed_us"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// Statement is the statement text as trace records show it, Keyspace and Table its
	// target, and Consistency its level; StatementFrom says where they were read:
	// "tracing" (the request's tracing record), "statement_stats", or "" when neither
	// kept the request (tracing off and statement statistics off).
	Statement     string `json:"statement"`
	Keyspace      string `json:"keyspace"`
	Table         string `json:"table"`
	Consistency   string `json:"consistency"`
	StatementFrom string `json:"statement_from"`
	// TraceMode is the request's tracing mode, or "" when it is not traced.
	TraceMode string `json:"trace_mode"`
}

// Queries is the JSON of GET /tracecar/queries.
type Queries []Query

// ParseQueries decodes GET /tracecar/queries.
func ParseQueries(body []byte) ([]Query, error) {
	var qs []Query
	if err := json.Unmarshal(body, &qs); err != nil {
		return nil, badBody(PathQueries, body, err)
	}
	return qs, nil
}

func (Queries) shape() {}
