package adminapi

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/latencyhist"
)

// Paths of the per-statement statistics.
const (
	PathStatementStats  = "/tracecar/statement_stats"
	PathStatements      = "/tracecar/statements"
	PathStatementsReset = "/tracecar/statements/reset"
)

// StatementStats is the JSON of GET and POST /tracecar/statement_stats.
type StatementStats struct {
	Enabled bool   `json:"enabled"`
	Max     int    `json:"max"`
	Entries int    `json:"entries"`
	Evicted uint64 `json:"evicted"`
}

// Statement is one statement's statistics, an element of GET /tracecar/statements.
type Statement struct {
	Statement   string            `json:"statement"`
	Prepared    bool              `json:"prepared"`
	Keyspace    string            `json:"keyspace"`
	Table       string            `json:"table"`
	Calls       uint64            `json:"calls"`
	Errors      map[string]uint64 `json:"errors"`
	TotalTimeUS uint64            `json:"total_time_us"`
	MeanUS      float64           `json:"mean_us"`
	MaxUS       uint64            `json:"max_us"`
	P50US       uint64            `json:"p50_us"`
	P99US       uint64            `json:"p99_us"`
	P999US      uint64            `json:"p999_us"`
	Rows        uint64            `json:"rows"`
	Consistency map[string]uint64 `json:"consistency"`
	FirstSeen   time.Time         `json:"first_seen"`
	LastSeen    time.Time         `json:"last_seen"`
	// AntiPatterns are the anti-pattern kinds its requests have shown.
	AntiPatterns []string `json:"antipatterns,omitempty"`
	// LastTraceID is the session id of the statement's last trace taken by the trace floor
	// ("" without one), and LastTraceAt when that request started (null without one).
	LastTraceID string     `json:"last_trace_id"`
	LastTraceAt *time.Time `json:"last_trace_at"`
	// Histogram holds the non-empty latency buckets, [index, count], in the layout of
	// package latencyhist, when asked for (histogram=true): what Merge needs.
	Histogram []Bucket `json:"histogram,omitempty"`
}

// Statements is the JSON of GET /tracecar/statements.
type Statements []Statement

// Bucket is one non-empty bucket of a statement's latency histogram: its index and count.
type Bucket = latencyhist.Bucket

// ErrorCount returns the total of s.Errors.
func (s *Statement) ErrorCount() uint64 {
	var n uint64
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// SortOrders are the orders of GET /tracecar/statements?sort=, descending.
var SortOrders = []string{"total_time", "calls", "p99", "errors"}

// SortStatements sorts st by order (one of SortOrders), descending, ties by text, as the
// server sorts them.
func SortStatements(st []Statement, order string) {
	val := func(x *Statement) uint64 {
		switch order {
		case "calls":
			return x.Calls
		case "p99":
			return x.P99US
		case "errors":
			return x.ErrorCount()
		}
		return x.TotalTimeUS
	}
	sort.SliceStable(st, func(i, j int) bool {
		a, b := val(&st[i]), val(&st[j])
		if a != b {
			return a > b
		}
		if st[i].Statement != st[j].Statement {
			return st[i].Statement < st[j].Statement
		}
		return st[i].Prepared && !st[j].Prepared
	})
}

// IsSystemKeyspace reports whether ks is one of the node's own keyspaces (system,
// system_schema, system_auth, …), which the API's include_system leaves out by default.
func IsSystemKeyspace(ks string) bool {
	return ks == "system" || strings.HasPrefix(ks, "system_")
}

// Merge merges statements from several sources (sidecars) by key (text, prepared):
// counts, times, rows, errors and consistency levels add up, max is the largest, first and
// last seen the earliest and latest, and histograms add bucket by bucket, the percentiles
// being read from the merged histogram (never averaged). Every input must carry its
// histogram; ok is false for an entry that had calls but no histogram.
func Merge(sources ...[]Statement) (merged []Statement, ok bool) {
	type key struct {
		text     string
		prepared bool
	}
	ok = true
	byKey := map[key]*Statement{}
	var order []key
	dense := map[key]*latencyhist.Dense{}
	for _, src := range sources {
		for _, st := range src {
			k := key{st.Statement, st.Prepared}
			if st.Calls > 0 && len(st.Histogram) == 0 {
				ok = false
			}
			m := byKey[k]
			if m == nil {
				m = emptyLike(st)
				byKey[k] = m
				order = append(order, k)
				dense[k] = new(latencyhist.Dense)
			}
			m.add(st)
			dense[k].Add(st.Histogram)
		}
	}
	for _, k := range order {
		m, d := byKey[k], dense[k]
		n := d.Total()
		m.P50US = d.Quantile(n, 0.5, m.MaxUS)
		m.P99US = d.Quantile(n, 0.99, m.MaxUS)
		m.P999US = d.Quantile(n, 0.999, m.MaxUS)
		m.MeanUS = 0
		if m.Calls > 0 {
			m.MeanUS = float64(m.TotalTimeUS) / float64(m.Calls)
		}
		m.Histogram = d.Sparse()
		sortKinds(m.AntiPatterns)
		merged = append(merged, *m)
	}
	return merged, ok
}

// emptyLike returns a statement with st's key, target and times, and nothing counted.
func emptyLike(st Statement) *Statement {
	c := st
	c.Errors, c.Consistency, c.Histogram = map[string]uint64{}, map[string]uint64{}, nil
	c.AntiPatterns = nil
	c.Calls, c.TotalTimeUS, c.Rows, c.MaxUS = 0, 0, 0, 0
	return &c
}

// add adds st's counts, times, last trace and anti-patterns to m (its histogram apart).
func (m *Statement) add(st Statement) {
	m.Calls += st.Calls
	m.TotalTimeUS += st.TotalTimeUS
	m.Rows += st.Rows
	m.MaxUS = max(m.MaxUS, st.MaxUS)
	for c, n := range st.Errors {
		m.Errors[c] += n
	}
	for c, n := range st.Consistency {
		m.Consistency[c] += n
	}
	if st.FirstSeen.Before(m.FirstSeen) {
		m.FirstSeen = st.FirstSeen
	}
	if st.LastSeen.After(m.LastSeen) {
		m.LastSeen = st.LastSeen
	}
	if st.LastTraceAt != nil && (m.LastTraceAt == nil || st.LastTraceAt.After(*m.LastTraceAt)) {
		m.LastTraceID, m.LastTraceAt = st.LastTraceID, st.LastTraceAt
	}
	for _, a := range st.AntiPatterns {
		if !slices.Contains(m.AntiPatterns, a) {
			m.AntiPatterns = append(m.AntiPatterns, a)
		}
	}
}

// ParseStatements decodes GET /tracecar/statements.
func ParseStatements(body []byte) ([]Statement, error) {
	var out []Statement
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, badBody(PathStatements, body, err)
	}
	return out, nil
}

// AntiPatternKinds are the anti-pattern kinds a statement's antipatterns name, in the
// order the API lists them (tracing/statements.AntiPatternKinds, which a test ties to it).
var AntiPatternKinds = []string{
	"unprepared", "allow_filtering", "unpaged_read", "logged_batch_multi_partition",
	"cl_all", "cl_any", "serial_without_lwt", "select_star", "full_scan",
}

// sortKinds orders anti-pattern kind names as AntiPatternKinds lists them.
func sortKinds(kinds []string) {
	slices.SortFunc(kinds, func(a, b string) int {
		return slices.Index(AntiPatternKinds, a) - slices.Index(AntiPatternKinds, b)
	})
}

func (StatementStats) shape() {}
func (Statements) shape()     {}
