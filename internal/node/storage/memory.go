package storage

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tracecar/tracecar/internal/cql"
)

// How the node bounds its memory. Every table (and view) a user creates counts the bytes
// its data holds, as an estimate charged by the write that adds them: a partition's key and
// struct, a row's clustering key, struct and cells, a cell's value (TableData.charge and
// chargeNew, in storage.go). The engine sums them in one atomic counter, a Memory, and a
// write (INSERT, UPDATE, or a batch with one) that finds the sum at the tables' share of the
// limit (TableShare: the rest is the headroom of the runtime, the connections and the
// garbage not yet collected) is refused with Overloaded before it changes anything. Reads,
// DELETE, TRUNCATE and DROP are never refused: a deletion gives back the value bytes it
// purges, a TRUNCATE or DROP the whole table's count, so that writes get in again. The
// estimate follows Go's allocations (struct sizes, a map entry, slice headers); the
// runtime's own overhead and the garbage not yet collected come on top (docs/node.md has
// the figures).
//
// The estimate can fall short of what the data costs the runtime (a map's buckets grown,
// a value's size class), and a long load would then pass the limit by that shortfall: the
// 5.9 GiB default limit held 6.3 GiB of RSS after two minutes of cassandra-stress's LWT
// profile. So when the process is the node's (the runtime's soft memory limit is the
// node's RuntimeLimit, as `tracecar node` sets it), Admit also reads the runtime's live heap, as
// the last collection marked it (at most every liveEvery), and refuses when that is at the
// tables' share: whichever of the estimate and the runtime's count is larger is held to it.
// An engine that shares its process (a test, a program embedding it) counts the estimate
// alone: the heap is not all its own.

// Sizes of what a write allocates beside its structures, as the estimate charges them.
const (
	sliceBytes = int64(unsafe.Sizeof([]byte(nil)))
	allocBytes = 8 // the rounding of a small allocation to its size class, on average
)

// TableShare is the part of the memory limit the tables may hold, in eighths: the other
// eighth is the headroom of the runtime, the connections and the garbage not yet collected,
// with the Go runtime's soft memory limit at the limit (cmd/tracecar sets it).
const TableShare = 7

// Memory is an engine's count of the bytes its user tables hold, against its limit. It is
// safe for concurrent use; a nil *Memory counts nothing and refuses nothing.
type Memory struct {
	limit   int64 // bytes; 0 means none
	tables  int64 // what the tables may hold: TableShare eighths of limit
	held    atomic.Int64
	refused atomic.Uint64

	ownHeap bool // the process's heap is the node's: Admit also checks live
	live    liveHeap
	// ceiling is what the tables may hold by the estimate: tables, or less once the live
	// heap reached tables first (the estimate fell short), until a TRUNCATE or DROP.
	ceiling atomic.Int64
}

// collections counts the runtime's garbage collections, each as its cleanups run: the live
// heap changes only at a collection, so Admit reads it again only after one, and a write's
// check is an atomic load (a clock read per write cost 6% of the node's CPU per op). The
// count comes from a cleanup that re-arms itself on a new object at every collection; it
// starts with the first Memory of a process whose heap is the node's.
var (
	collections      atomic.Uint64
	watchCollections sync.Once
)

// gcSentinel is the object a collection frees to tick collections: it holds a pointer, so
// it is not a tiny allocation sharing its block (and its lifetime) with others.
type gcSentinel struct{ _ *byte }

func countCollections() {
	runtime.AddCleanup(&gcSentinel{}, func(struct{}) {
		collections.Add(1)
		countCollections()
	}, struct{}{})
}

// liveHeap caches the runtime's live heap bytes, read again after each collection. After a
// TRUNCATE or DROP (forget) the figure is the last collection's, which still counts what was
// let go of: it is set aside until a collection has run since.
type liveHeap struct {
	bytes  atomic.Int64
	seen   atomic.Uint64 // collections as of the last read
	after  atomic.Uint64 // the figure counts only once the runtime's collections pass this
	mu     sync.Mutex    // one reader at a time; the others use the cached figure
	sample [2]metrics.Sample
}

// read reads the live heap and the collections so far.
func (l *liveHeap) read() (live int64, cycles uint64) {
	l.sample[0].Name, l.sample[1].Name = "/gc/heap/live:bytes", "/gc/cycles/total:gc-cycles"
	metrics.Read(l.sample[:])
	if l.sample[0].Value.Kind() == metrics.KindUint64 && l.sample[1].Value.Kind() == metrics.KindUint64 {
		return int64(l.sample[0].Value.Uint64()), l.sample[1].Value.Uint64()
	}
	return 0, 0
}

// get returns the live heap as of the last collection, read again when a collection has
// run since the last read, or 0 when no collection has run since forget.
func (l *liveHeap) get() int64 {
	seen := collections.Load()
	if seen == l.seen.Load() || !l.mu.TryLock() {
		return l.bytes.Load()
	}
	defer l.mu.Unlock()
	live, cycles := l.read()
	if cycles <= l.after.Load() {
		live = 0
	}
	l.bytes.Store(live)
	l.seen.Store(seen)
	return live
}

// forget sets the figure aside until the next collection: memory was let go of.
func (l *liveHeap) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := collections.Load()
	_, cycles := l.read()
	l.after.Store(cycles)
	l.bytes.Store(0)
	l.seen.Store(seen)
}

// RuntimeLimit is the Go runtime's soft memory limit for a node of limit bytes: 15/16 of
// it, the rest for what the runtime does not count (the binary, thread stacks, the memory
// freed but not yet returned). At the limit itself, the LWT profile's run peaked at the
// limit plus 2% of RSS.
func RuntimeLimit(limit int64) int64 { return limit - limit/16 }

// NewMemory returns the count for a limit of limit bytes (0: none). When the runtime's soft
// memory limit is already RuntimeLimit(limit), the process's heap is taken as the node's.
func NewMemory(limit int64) *Memory {
	limit = max(limit, 0)
	own := limit > 0 && debug.SetMemoryLimit(-1) == RuntimeLimit(limit)
	m := &Memory{limit: limit, tables: limit / 8 * TableShare, ownHeap: own}
	if own {
		watchCollections.Do(countCollections)
	}
	m.ceiling.Store(m.tables)
	return m
}

// Admit refuses a write with Overloaded when the held bytes have reached the tables' share
// of the limit, or the runtime's live heap has, and counts the refusal. A live heap at the
// share lowers the ceiling of the held bytes to what they are then, so that the refusals
// hold steady (the live heap also counts what comes and goes, such as requests' buffers)
// until a deletion frees some of the tables' bytes, or a TRUNCATE or DROP raises the
// ceiling back to the share.
func (m *Memory) Admit() error {
	if m == nil || m.limit == 0 {
		return nil
	}
	held := m.held.Load()
	if held < m.ceiling.Load() && m.ownHeap && m.live.get() >= m.tables {
		m.lower(held)
	}
	if held < m.ceiling.Load() {
		return nil
	}
	held = max(held, m.live.bytes.Load())
	m.refused.Add(1)
	return &cql.Error{Code: cql.ErrCodeOverloaded, Message: fmt.Sprintf(
		"node memory limit %s reached (--memory-limit): its tables hold %s, the most they may (%d/8 of it); reads, DELETE, TRUNCATE and DROP still work, and what they free lets writes in again",
		FormatBytes(m.limit), FormatBytes(held), TableShare)}
}

// released notes that a TRUNCATE or DROP let a table's data go: the runtime's live heap
// counts it until the next collection.
func (m *Memory) released() {
	if m.ownHeap {
		m.live.forget()
		m.ceiling.Store(m.tables)
	}
}

// lower lowers the ceiling to held, unless it is lower already.
func (m *Memory) lower(held int64) {
	for {
		c := m.ceiling.Load()
		if held >= c || m.ceiling.CompareAndSwap(c, held) {
			return
		}
	}
}

// Held returns the estimated bytes the tables hold.
func (m *Memory) Held() int64 { return m.held.Load() }

// Limit returns the limit in bytes; 0 means none.
func (m *Memory) Limit() int64 { return m.limit }

// Refused returns the writes Admit has refused.
func (m *Memory) Refused() uint64 { return m.refused.Load() }

// valueBytes is what a cell's value holds.
func valueBytes(v []byte) int64 {
	if v == nil {
		return 0
	}
	return int64(len(v)) + allocBytes
}

// ckBytes is what a clustering key holds: its slice of values and each value.
func ckBytes(ck [][]byte) int64 {
	if len(ck) == 0 {
		return 0
	}
	n := int64(len(ck)) * sliceBytes
	for _, v := range ck {
		n += int64(len(v)) + allocBytes
	}
	return n
}

// FormatBytes writes n bytes as the --memory-limit flag takes them: "64 MiB", "2 GiB",
// "1.5 GiB", "512 B".
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d %s", int64(f), units[u])
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}
