package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// Query is one request in flight, as GET /tracecar/queries shows it.
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

// QueriesFunc returns the requests in flight for at least min, longest first, at most
// limit of them. It must be safe for concurrent use.
type QueriesFunc func(min time.Duration, limit int) []Query

// WithQueries serves GET /tracecar/queries from f.
func WithQueries(f QueriesFunc) Option {
	return func(s *Server) { s.queries = f }
}

// Limits of /tracecar/queries.
const (
	DefaultQueriesLimit = 100
	MaxQueriesLimit     = 100000
)

// addQueryRoutes adds GET /tracecar/queries when the server has requests in flight to show.
func (s *Server) addQueryRoutes() {
	if s.queries != nil {
		s.exact["/tracecar/queries"] = route{http.MethodGet: s.getQueries}
	}
}

// getQueries serves GET /tracecar/queries?min_elapsed=D&limit=N: the requests in flight
// for at least D (a duration such as 100ms), longest first, at most N (default 100).
func (s *Server) getQueries(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "min_elapsed", "limit")
	if err != nil {
		return err
	}
	min, _, err := p.duration("min_elapsed", 0, "a duration of 0 or more, such as 100ms or 2s")
	if err != nil {
		return err
	}
	limit, ok, err := p.integer("limit", 1, MaxQueriesLimit, "an integer from 1 to "+strconv.Itoa(MaxQueriesLimit))
	if err != nil {
		return err
	}
	if !ok {
		limit = DefaultQueriesLimit
	}
	out := s.queries(min, int(limit))
	if out == nil {
		out = []Query{}
	}
	return writeJSON(ctx, out)
}
