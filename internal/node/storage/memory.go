package storage

import (
	"fmt"
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
}

// NewMemory returns the count for a limit of limit bytes (0: none).
func NewMemory(limit int64) *Memory {
	limit = max(limit, 0)
	return &Memory{limit: limit, tables: limit / 8 * TableShare}
}

// Admit refuses a write with Overloaded when the held bytes have reached the tables' share
// of the limit, and counts the refusal.
func (m *Memory) Admit() error {
	if m == nil || m.limit == 0 || m.held.Load() < m.tables {
		return nil
	}
	m.refused.Add(1)
	return &cql.Error{Code: cql.ErrCodeOverloaded, Message: fmt.Sprintf(
		"node memory limit %s reached (--memory-limit): its tables hold %s, the most they may (%d/8 of it); reads, DELETE, TRUNCATE and DROP still work, and what they free lets writes in again",
		FormatBytes(m.limit), FormatBytes(m.held.Load()), TableShare)}
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
