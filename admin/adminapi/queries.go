package adminapi

import (
	"encoding/json"
	"time"
)

// PathQueries lists the requests in flight.
const PathQueries = "/tracecar/queries"

// Query is one request in flight, from GET /tracecar/queries.
type Query struct {
	Client        string     `json:"client"`
	Username      string     `json:"username"`
	Opcode        string     `json:"opcode"`
	Stream        int16      `json:"stream"`
	ElapsedUS     int64      `json:"elapsed_us"` // -1: unknown
	StartedAt     *time.Time `json:"started_at,omitempty"`
	Statement     string     `json:"statement"`
	Keyspace      string     `json:"keyspace"`
	Table         string     `json:"table"`
	Consistency   string     `json:"consistency"`
	StatementFrom string     `json:"statement_from"`
	TraceMode     string     `json:"trace_mode"`
}

// ParseQueries decodes GET /tracecar/queries.
func ParseQueries(body []byte) ([]Query, error) {
	var qs []Query
	if err := json.Unmarshal(body, &qs); err != nil {
		return nil, badBody(PathQueries, body, err)
	}
	return qs, nil
}
