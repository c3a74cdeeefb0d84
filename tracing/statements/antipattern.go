package statements

import "github.com/prometheus/client_golang/prometheus"

// Counting the anti-patterns (per entry, on the data path) and reading their counters (the
// admin API, Prometheus).

// selectStarColumns is the number of columns above which SELECT * counts.
const selectStarColumns = 20

// count counts a request of e that follows anti-pattern k: the Prometheus counter of its
// kind, keyspace and table, and the kind in the entry's own set. The set is written once
// per kind: after that, one load of a word that stays in every core's cache.
func (e *Entry) count(k antiKind) {
	e.anti[k].Add(1)
	if bit := uint32(1) << k; e.seen.bits.Load()&bit == 0 {
		e.seen.bits.Or(bit)
	}
}

// AntiPatterns returns the counter of kind for keyspace ks and table, 0 when never counted.
func (s *Stats) AntiPatterns(kind, ks, table string) uint64 {
	for i, name := range AntiPatternKinds {
		if name == kind {
			s.anti.mu.Lock()
			defer s.anti.mu.Unlock()
			if c := s.anti.m[antiKey{antiKind(i), ks, table}]; c != nil {
				return c.Load()
			}
		}
	}
	return 0
}

var antiDesc = prometheus.NewDesc("tracecar_cql_antipatterns_total",
	"CQL requests that follow an anti-pattern (see docs/tracing.md, \"CQL anti-patterns\"), counted while statement statistics are on.",
	[]string{"kind", "keyspace", "table"}, nil)

var evictedDesc = prometheus.NewDesc("tracecar_statement_stats_evicted_total",
	"Statement statistics entries evicted (least called first) because --statement-stats-max was reached, since the last reset.", nil, nil)

var entriesDesc = prometheus.NewDesc("tracecar_statement_stats_entries",
	"Statements that statement statistics hold.", nil, nil)

// Describe implements prometheus.Collector.
func (s *Stats) Describe(ch chan<- *prometheus.Desc) {
	ch <- antiDesc
	ch <- evictedDesc
	ch <- entriesDesc
}

// Collect implements prometheus.Collector: the non-zero anti-pattern counters.
func (s *Stats) Collect(ch chan<- prometheus.Metric) {
	s.anti.mu.Lock()
	for k, c := range s.anti.m {
		if v := c.Load(); v != 0 {
			ch <- prometheus.MustNewConstMetric(antiDesc, prometheus.CounterValue, float64(v),
				AntiPatternKinds[k.kind], k.keyspace, k.table)
		}
	}
	s.anti.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(evictedDesc, prometheus.CounterValue, float64(s.evicted.Load()))
	s.mu.RLock()
	n := len(s.entries)
	s.mu.RUnlock()
	ch <- prometheus.MustNewConstMetric(entriesDesc, prometheus.GaugeValue, float64(n))
}
