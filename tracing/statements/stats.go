// Package statements keeps per-statement statistics of the CQL requests a sidecar forwards,
// like PostgreSQL's pg_stat_statements: calls, errors by code, latency (total, mean, max and
// percentiles from a small histogram per statement), rows returned, consistency levels,
// first and last seen, and the CQL anti-pattern counters.
//
// A statement's key is its text and whether it was prepared: the text a PREPARE sent for an
// EXECUTE, the normalized text (cql.NormalizeQuery, literals as ?) of a QUERY. Stats holds at
// most Max entries; a new one past that evicts the least-called entry and counts it.
//
// The data path calls Request when a request is forwarded and Response when its response
// comes back. With statistics off, Request costs one atomic load (a PREPARE is still read,
// so that EXECUTEs of statements prepared earlier have their text when statistics are
// turned on). For a statement already known, neither allocates.
//
// # Layers
//
// The files of the package are layers: a file uses declarations of the files below it,
// never of one above it (ci.TestFilesPointDown fails on a cycle, and prints it). From the
// ground up:
//
//	classify.go, hist.go, wire.go  a statement's shape, the latency histogram, a request's parameters
//	codes.go                       the indexes of the counts by error code and consistency level
//	antikinds.go                   the anti-patterns' kinds, their counters' registry, an entry's set
//	floorstate.go                  the trace floor's setting and state
//	stats.go                       Stats and Entry
//	antipattern.go                 the anti-patterns counted and read
//	floor.go                       the trace floor's arming
//	request.go                     the data path: Ticket, Request, Response, the entries they find
//	inflight.go                    what a reader learns of a request in flight and of an entry
//	list.go                        the list the admin API serves, and its merge
//	handover.go                    the statistics handed over to the next process
package statements

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMax is the default bound on the number of statements kept.
const DefaultMax = 5000

// Bounds of the lookup caches: prepared ids, and raw (un-normalized) QUERY texts.
const (
	maxPrepared = 10000
	maxRaw      = 4096
	maxTextLen  = 4096 // normalized text kept per statement, bytes
)

// Options configure Stats.
type Options struct {
	// Max bounds the number of statements kept; zero means DefaultMax.
	Max int
	// Now is the monotonic clock, in nanoseconds, of the times passed to Request and
	// Response; it is read when entries are made and listed. Nil means a clock of this
	// package's own.
	Now func() int64
}

// key identifies a statement.
type key struct {
	text     string
	prepared bool
}

// Entry is one statement's statistics, updated with atomic operations.
type Entry struct {
	key   key
	shape shape
	cols  int // columns of its rows, from the PREPARE result; -1 unknown

	calls   atomic.Uint64
	totalUS atomic.Uint64
	maxUS   atomic.Uint64
	rows    atomic.Uint64
	errs    [numErrCodes]atomic.Uint64
	cls     [numCLs]atomic.Uint64
	first   atomic.Int64 // monotonic; written once made, but by Import
	last    atomic.Int64
	hist    histogram
	anti    [numKinds]*atomic.Uint64
	seen    seenKinds // the anti-patterns its requests have shown
	dead    atomic.Bool

	hasLiterals atomic.Bool // the QUERY texts sent had literals that normalizing replaced

	floor floorState
}

func (e *Entry) literals() bool { return e.hasLiterals.Load() }

// prepInfo is what is known about a prepared statement id.
type prepInfo struct {
	text  string
	cols  int
	entry atomic.Pointer[Entry]
}

// Stats holds the statistics. It is safe for concurrent use.
type Stats struct {
	on  atomic.Bool
	max int
	now func() int64

	baseWall time.Time
	baseMono int64

	mu       sync.RWMutex
	entries  map[key]*Entry
	raw      map[string]*Entry // QUERY text as sent → its entry
	prep     map[string]*prepInfo
	prepList []string // insertion order of prep, a ring
	prepHead int
	evicted  atomic.Uint64
	reset    time.Time

	anti antiRegistry

	floor floor
}

// New returns Stats, off.
func New(o Options) *Stats {
	if o.Max <= 0 {
		o.Max = DefaultMax
	}
	if o.Now == nil {
		epoch := time.Now()
		o.Now = func() int64 { return int64(time.Since(epoch)) + 1 }
	}
	s := &Stats{max: o.Max, now: o.Now, prep: make(map[string]*prepInfo)}
	s.baseWall, s.baseMono = time.Now(), o.Now()
	s.entries = make(map[key]*Entry)
	s.raw = make(map[string]*Entry)
	s.reset = s.baseWall
	s.anti.m = make(map[antiKey]*atomic.Uint64)
	return s
}

// Enabled reports whether statistics are being kept.
func (s *Stats) Enabled() bool { return s.on.Load() }

// SetEnabled turns statistics on or off. What was gathered is kept.
func (s *Stats) SetEnabled(on bool) { s.on.Store(on) }

// Max returns the bound on the number of statements.
func (s *Stats) Max() int { return s.max }

// Evicted returns the number of entries evicted since the last reset.
func (s *Stats) Evicted() uint64 { return s.evicted.Load() }

// Reset forgets every statement's statistics (not the anti-pattern counters, which are
// monotonic Prometheus counters).
func (s *Stats) Reset() {
	s.mu.Lock()
	for _, e := range s.entries {
		e.dead.Store(true)
	}
	s.entries = make(map[key]*Entry)
	s.raw = make(map[string]*Entry)
	s.evicted.Store(0)
	s.reset = time.Now()
	s.mu.Unlock()
}
