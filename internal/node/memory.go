package node

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tracecar/tracecar/internal/cql"
)

// How the node bounds its memory. Every table (and view) a user creates counts the bytes
// its data holds, as an estimate charged by the write that adds them: a partition's key and
// struct, a row's clustering key, struct and cells, a cell's value. The engine sums them in
// one atomic counter, and a write (INSERT, UPDATE, or a batch with one) that finds the sum
// at the tables' share of the limit (TableShare: the rest is the headroom of the runtime,
// the connections and the garbage not yet collected) is refused with Overloaded before it
// changes anything. Reads, DELETE,
// TRUNCATE and DROP are never refused: a deletion gives back the value bytes it purges, a
// TRUNCATE or DROP the whole table's count, so that writes get in again. The estimate
// follows Go's allocations (struct sizes, a map entry, slice headers); the runtime's own
// overhead and the garbage not yet collected come on top (docs/node.md has the figures).

// Sizes of the structures a write allocates, as the estimate charges them.
const (
	partitionBytes = int64(unsafe.Sizeof(partition{})) + 48 // + the shard map's entry (key header, pointer, bucket share)
	rowBytes       = int64(unsafe.Sizeof(row{})) + 8        // + its pointer in the partition's rows
	cellBytes      = int64(unsafe.Sizeof(cell{}))
	sliceBytes     = int64(unsafe.Sizeof([]byte(nil)))
	allocBytes     = 8 // the rounding of a small allocation to its size class, on average
)

// TableShare is the part of the memory limit the tables may hold, in eighths: the other
// eighth is the headroom of the runtime, the connections and the garbage not yet collected,
// with the Go runtime's soft memory limit at the limit (cmd/tracecar sets it).
const TableShare = 7

// memory is an engine's count of the bytes its user tables hold, against its limit. It is
// safe for concurrent use; a nil *memory counts nothing and refuses nothing.
type memory struct {
	limit   int64 // bytes; 0 means none
	tables  int64 // what the tables may hold: TableShare eighths of limit
	held    atomic.Int64
	refused atomic.Uint64
}

// newMemory returns the count for a limit of limit bytes (0: none).
func newMemory(limit int64) *memory {
	limit = max(limit, 0)
	return &memory{limit: limit, tables: limit / 8 * TableShare}
}

// admit refuses a write when the held bytes have reached the limit.
func (m *memory) admit() error {
	if m == nil || m.limit == 0 || m.held.Load() < m.tables {
		return nil
	}
	m.refused.Add(1)
	return &cql.Error{Code: cql.ErrCodeOverloaded, Message: fmt.Sprintf(
		"node memory limit %s reached (--memory-limit): its tables hold %s, the most they may (%d/8 of it); reads, DELETE, TRUNCATE and DROP still work, and what they free lets writes in again",
		FormatBytes(m.limit), FormatBytes(m.held.Load()), TableShare)}
}

// admitWrite refuses a write statement (not a DELETE) when the held bytes have reached
// the limit.
// A statement of a batch was admitted with its batch (admitBatch).
func (m *memory) admitWrite(p *writePlan, inBatch bool) error {
	if inBatch || p.name == "DELETE" {
		return nil
	}
	return m.admit()
}

// admitBatch refuses a batch with a write (not only DELETEs) when the held bytes have
// reached the limit, before any of its statements applies.
func (m *memory) admitBatch(steps []batchStep) error {
	for _, st := range steps {
		if w := writeOf(st.pl); w != nil && w.name != "DELETE" {
			return m.admit()
		}
	}
	return nil
}

// newData returns empty data for a user table, counted against m.
func (m *memory) newData() *tableData {
	d := newTableData()
	d.mem = m
	return d
}

// renew returns empty data in place of old, a table's data that TRUNCATE lets go of, and
// gives back old's bytes.
func (m *memory) renew(old *tableData) *tableData {
	if old == nil || old.mem == nil {
		return newTableData()
	}
	m.release(old)
	return old.mem.newData()
}

// release gives back the bytes of d, a table's data that TRUNCATE or DROP let go of.
func (m *memory) release(d *tableData) {
	if m == nil || d == nil || d.mem != m {
		return
	}
	m.held.Add(-d.bytes.Swap(0))
}

// charge counts n more bytes (fewer when negative) held by d.
func (d *tableData) charge(n int64) {
	if d.mem != nil && n != 0 {
		d.bytes.Add(n)
		d.mem.held.Add(n)
	}
}

// chargeNew counts a partition or a row that a write just created.
func (d *tableData) chargeNew(p *partition, r *row, ncells int) {
	if d.mem == nil {
		return
	}
	var n int64
	if p != nil {
		n += partitionBytes + int64(len(p.key)) + allocBytes
	}
	if r != nil {
		n += rowBytes + int64(ncells)*cellBytes + ckBytes(r.ck)
	}
	d.charge(n)
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

// purgePartition purges p's cells shadowed by its deletion, and gives back their values.
func (d *tableData) purgePartition(p *partition) {
	if d.mem == nil {
		p.purge(p.del)
		return
	}
	before := partitionValueBytes(p)
	p.purge(p.del)
	d.charge(partitionValueBytes(p) - before)
}

// purgeRow purges r's cells shadowed by its deletion, and gives back their values.
func (d *tableData) purgeRow(r *row) {
	before := rowValueBytes(r)
	r.purge(r.del)
	d.charge(rowValueBytes(r) - before)
}

// valueBytes is what a cell's value holds.
func valueBytes(v []byte) int64 {
	if v == nil {
		return 0
	}
	return int64(len(v)) + allocBytes
}

// rowValueBytes sums the values a row's cells hold, for a deletion to give back what its
// purge drops.
func rowValueBytes(r *row) int64 {
	if r == nil {
		return 0
	}
	var n int64
	for i := range r.cells {
		n += valueBytes(r.cells[i].v)
	}
	return n
}

// partitionValueBytes sums the values of a partition's rows and static row.
func partitionValueBytes(p *partition) int64 {
	n := rowValueBytes(p.static)
	for _, r := range p.rows {
		n += rowValueBytes(r)
	}
	return n
}

// MemoryHeld returns the estimated bytes the engine's user tables hold.
func (e *Engine) MemoryHeld() int64 { return e.mem.held.Load() }

// MemoryLimit returns the engine's memory limit in bytes; 0 means none. Its tables may hold
// TableShare eighths of it.
func (e *Engine) MemoryLimit() int64 { return e.mem.limit }

// MemoryRefused returns the writes the memory limit has refused.
func (e *Engine) MemoryRefused() uint64 { return e.mem.refused.Load() }

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
