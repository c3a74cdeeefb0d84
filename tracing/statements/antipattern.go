package statements

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/internal/cql"
)

// antiKind is a CQL anti-pattern.
type antiKind uint8

const (
	kindUnprepared antiKind = iota
	kindAllowFiltering
	kindUnpagedRead
	kindLoggedBatchMultiPartition
	kindCLAll
	kindCLAny
	kindSerialWithoutLWT
	kindSelectStar
	kindFullScan
	numKinds
)

// AntiPatternKinds are the kind label values of tracecar_cql_antipatterns_total, by antiKind.
var AntiPatternKinds = [numKinds]string{
	"unprepared", "allow_filtering", "unpaged_read", "logged_batch_multi_partition",
	"cl_all", "cl_any", "serial_without_lwt", "select_star", "full_scan",
}

// selectStarColumns is the number of columns above which SELECT * counts.
const selectStarColumns = 20

type antiKey struct {
	kind            antiKind
	keyspace, table string
}

// antiRegistry holds the anti-pattern counters by kind, keyspace and table. Entries hold
// pointers to their counters, so counting is one atomic add.
type antiRegistry struct {
	mu sync.Mutex
	m  map[antiKey]*atomic.Uint64
}

func (r *antiRegistry) counter(kind antiKind, ks, table string) *atomic.Uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := antiKey{kind, ks, table}
	c := r.m[k]
	if c == nil {
		c = new(atomic.Uint64)
		r.m[k] = c
	}
	return c
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

// Error codes, indexed for the per-statement counts.
var errCodes = [...]int32{
	cql.ErrCodeServer, cql.ErrCodeProtocol, cql.ErrCodeBadCredentials, cql.ErrCodeUnavailable,
	cql.ErrCodeOverloaded, cql.ErrCodeBootstrapping, cql.ErrCodeTruncate, cql.ErrCodeWriteTimeout,
	cql.ErrCodeReadTimeout, cql.ErrCodeReadFailure, cql.ErrCodeFunctionFailure, cql.ErrCodeWriteFailure,
	cql.ErrCodeSyntax, cql.ErrCodeUnauthorized, cql.ErrCodeInvalid, cql.ErrCodeConfig,
	cql.ErrCodeAlreadyExists, cql.ErrCodeUnprepared,
}

var errNames = [...]string{
	"server_error", "protocol_error", "bad_credentials", "unavailable",
	"overloaded", "is_bootstrapping", "truncate_error", "write_timeout",
	"read_timeout", "read_failure", "function_failure", "write_failure",
	"syntax_error", "unauthorized", "invalid", "config_error",
	"already_exists", "unprepared", "other",
}

const numErrCodes = len(errCodes) + 1

func errIndex(code int32) int {
	for i, c := range errCodes {
		if c == code {
			return i
		}
	}
	return numErrCodes - 1
}

func errName(i int) string { return errNames[i] }

// Consistency levels are counted by value, 0 (ANY) to 10 (LOCAL_ONE); index 11 is any
// other value or an unreadable request.
const numCLs = 12

func clIndex(c cql.Consistency) int {
	if c <= cql.LocalOne {
		return int(c)
	}
	return numCLs - 1
}

func clName(i int) string {
	if i == numCLs-1 {
		return "other"
	}
	s := cql.Consistency(i).String()
	if s == "" {
		return strconv.Itoa(i)
	}
	return s
}
