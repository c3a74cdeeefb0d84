package statements

import (
	"sync"
	"sync/atomic"
)

// The CQL anti-patterns counted: their kinds, the registry of their counters by kind,
// keyspace and table, and the set of kinds an entry's requests have shown. What counts
// them, and reads them, is antipattern.go's.

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

// seenKinds is a set of antiKinds, one bit each.
type seenKinds struct{ bits atomic.Uint32 }
