package statements

import (
	"sort"
	"time"

	"github.com/tracecar/tracecar/internal/latencyhist"
)

// Reading the statistics: the list the admin API serves and its orders. The merge of
// several sidecars' lists is the clients', in package adminapi.

// Statement is one statement's statistics as the admin API serves them.
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
	// AntiPatterns are the anti-pattern kinds (AntiPatternKinds) its requests have shown.
	AntiPatterns []string `json:"antipatterns,omitempty"`
	// LastTraceID is the session id of the statement's last trace taken by the trace floor
	// ("" without one), and LastTraceAt when that request started (null without one).
	LastTraceID string     `json:"last_trace_id"`
	LastTraceAt *time.Time `json:"last_trace_at"`
	// Histogram holds the non-empty latency buckets, [index, count], in HistogramLayout,
	// when asked for: what merging statistics across sidecars needs.
	Histogram []Bucket `json:"histogram,omitempty"`
}

// ErrorCount returns the total of s.Errors.
func (s *Statement) ErrorCount() uint64 {
	var n uint64
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// Sort orders of List.
var SortOrders = []string{"total_time", "calls", "p99", "errors"}

// List returns the statements, sorted by order (one of SortOrders, descending), at most
// limit of them (limit ≤ 0: all); withHistogram adds each one's histogram buckets.
func (s *Stats) List(order string, limit int, withHistogram bool) []Statement {
	s.mu.RLock()
	es := make([]*Entry, 0, len(s.entries))
	for _, e := range s.entries {
		es = append(es, e)
	}
	s.mu.RUnlock()
	out := make([]Statement, 0, len(es))
	var dense latencyhist.Dense
	for _, e := range es {
		n := e.hist.snapshot(&dense)
		st := Statement{
			Statement: e.key.text, Prepared: e.key.prepared,
			Keyspace: e.shape.keyspace, Table: e.shape.table,
			Calls: e.calls.Load(), TotalTimeUS: e.totalUS.Load(), MaxUS: e.maxUS.Load(),
			Rows: e.rows.Load(), Errors: map[string]uint64{}, Consistency: map[string]uint64{},
			FirstSeen: s.wall(e.first.Load()), LastSeen: s.wall(e.last.Load()),
			AntiPatterns: e.antiPatterns(),
		}
		st.LastTraceID, st.LastTraceAt = e.lastTrace()
		st.P50US = dense.Quantile(n, 0.5, st.MaxUS)
		st.P99US = dense.Quantile(n, 0.99, st.MaxUS)
		st.P999US = dense.Quantile(n, 0.999, st.MaxUS)
		if st.Calls > 0 {
			st.MeanUS = float64(st.TotalTimeUS) / float64(st.Calls)
		}
		for i := range e.errs {
			if c := e.errs[i].Load(); c != 0 {
				st.Errors[errName(i)] = c
			}
		}
		for i := range e.cls {
			if c := e.cls[i].Load(); c != 0 {
				st.Consistency[clName(i)] = c
			}
		}
		if withHistogram {
			st.Histogram = dense.Sparse()
		}
		out = append(out, st)
	}
	SortStatements(out, order)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func (s *Stats) wall(mono int64) time.Time {
	return s.baseWall.Add(time.Duration(mono - s.baseMono)).UTC().Truncate(time.Millisecond)
}

// SortStatements sorts st by order (one of SortOrders), descending, ties by text.
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
