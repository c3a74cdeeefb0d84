package storage

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tracecar/tracecar/internal/sharding"
)

// The structures of a table's data, below its schema (table.go): shards of partitions,
// their rows and cells, and the partition key's encoding. Storage keeps every value as its
// serialized bytes. Stored byte slices are never modified after they are written, so
// readers may hand them out after releasing the lock.

const numShards = 64

// noTS marks an absent timestamp (never written, not deleted).
const noTS = math.MinInt64

type TableData struct {
	shards [numShards]shard
	// version changes whenever a partition is added or removed, to invalidate scanCache.
	version   atomic.Uint64
	scanMu    sync.Mutex
	scanCache *scanSnapshot
	mem       *Memory      // the engine's count for a user table's data (memory.go), or nil
	bytes     atomic.Int64 // what this data holds, counted in mem
}

type shard struct {
	Mu    sync.RWMutex
	parts map[string]*Partition
	_     [40]byte // keep shards on separate cache lines
}

type scanSnapshot struct {
	version uint64
	parts   []*Partition // ordered by token, then key
}

func NewTableData() *TableData {
	d := &TableData{}
	for i := range d.shards {
		d.shards[i].parts = map[string]*Partition{}
	}
	return d
}

type Partition struct {
	Key    []byte
	Token  int64
	del    int64 // partition deletion timestamp, or noTS
	Static *Row  // static cells, or nil
	Rows   []*Row

	// The first row lives inline, which saves two allocations per partition of a table
	// without clustering columns.
	first    Row
	firstRef [1]*Row
}

type Row struct {
	Ck     [][]byte
	marker liveness // set by INSERT
	del    int64    // row deletion timestamp, or noTS
	cells  []Cell
}

type liveness struct {
	ts  int64 // noTS when absent
	exp int64 // expiry in Unix seconds, 0 for none
	ttl int32
}

type Cell struct {
	v   []byte // nil is a tombstone (a deleted or null cell) when ts != noTS
	Ts  int64  // noTS when never written
	Exp int64
	ttl int32
}

func (c *Cell) Live(now int64) bool {
	return c.Ts != noTS && c.v != nil && (c.Exp == 0 || c.Exp > now)
}

func (l *liveness) live(now int64) bool {
	return l.ts != noTS && (l.exp == 0 || l.exp > now)
}

// shardOf picks a shard by the partition key's token.
func shardOf(token int64) int {
	return int(uint64(token) >> (64 - 6))
}

func (d *TableData) Shard(token int64) *shard { return &d.shards[shardOf(token)] }

// cell returns the cell of slot pos, or nil in a row written before the column was added.
func (r *Row) Cell(pos int) *Cell {
	if pos < len(r.cells) {
		return &r.cells[pos]
	}
	return nil
}

// grow gives the row n cells, for columns added after it was written.
func (r *Row) grow(n int) {
	for len(r.cells) < n {
		r.cells = append(r.cells, Cell{Ts: noTS})
	}
}

// live reports whether the row has a live marker or a live cell.
func (r *Row) Live(now int64) bool {
	if r.marker.live(now) {
		return true
	}
	for i := range r.cells {
		if r.cells[i].Live(now) {
			return true
		}
	}
	return false
}

func newRow(ck [][]byte, ncells int) *Row {
	r := &Row{}
	initRow(r, ck, ncells)
	return r
}

func initRow(r *Row, ck [][]byte, ncells int) {
	*r = Row{Ck: ck, del: noTS, marker: liveness{ts: noTS}, cells: make([]Cell, ncells)}
	for i := range r.cells {
		r.cells[i].Ts = noTS
	}
}

// purge drops the cells shadowed by a deletion at ts.
func (r *Row) purge(ts int64) {
	if r.marker.ts <= ts {
		r.marker = liveness{ts: noTS}
	}
	for i := range r.cells {
		if r.cells[i].Ts <= ts {
			r.cells[i] = Cell{Ts: noTS}
		}
	}
}

func (p *Partition) purge(ts int64) {
	if p.Static != nil {
		p.Static.purge(ts)
	}
	keep := p.Rows[:0]
	for _, r := range p.Rows {
		r.purge(ts)
		if r.del < ts {
			r.del = ts
		}
		keep = append(keep, r)
	}
	p.Rows = keep
}

// partitionSnapshot is the ordered list of partitions for a full scan.
func (d *TableData) Scan() []*Partition {
	v := d.version.Load()
	d.scanMu.Lock()
	defer d.scanMu.Unlock()
	if c := d.scanCache; c != nil && c.version == v {
		return c.parts
	}
	var parts []*Partition
	for i := range d.shards {
		sh := &d.shards[i]
		sh.Mu.RLock()
		for _, p := range sh.parts {
			parts = append(parts, p)
		}
		sh.Mu.RUnlock()
	}
	slices.SortFunc(parts, ComparePartitions)
	d.scanCache = &scanSnapshot{version: v, parts: parts}
	return parts
}

func ComparePartitions(a, b *Partition) int {
	if a.Token != b.Token {
		if a.Token < b.Token {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.Key, b.Key)
}

// get returns the partition with key pk, or nil. The caller must hold the shard's lock.
func (sh *shard) Get(pk []byte) *Partition { return sh.parts[string(pk)] }

// encodePK builds the partition key: the value itself for a single column, otherwise
// Cassandra's CompositeType layout.
func EncodePK(vals [][]byte) []byte {
	if len(vals) == 1 {
		return vals[0]
	}
	n := 0
	for _, v := range vals {
		n += 3 + len(v)
	}
	b := make([]byte, 0, n)
	for _, v := range vals {
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
		b = append(b, 0)
	}
	return b
}

// decodePK splits a composite partition key into its components.
func DecodePK(b []byte, n int) ([][]byte, bool) {
	if n == 1 {
		return [][]byte{b}, true
	}
	out := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		if len(b) < 2 {
			return nil, false
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 3+l {
			return nil, false
		}
		out = append(out, b[2:2+l:2+l])
		b = b[3+l:]
	}
	return out, len(b) == 0
}

// murmur3Token is Cassandra's Murmur3Partitioner token, as the sidecar computes it too.
func Murmur3Token(data []byte) int64 { return sharding.Token(data) }

// decodePKInto is decodePK, appending to out: with an array on the caller's stack, a write
// allocates nothing for it.
func DecodePKInto(out [][]byte, b []byte, n int) ([][]byte, bool) {
	if n == 1 {
		return append(out, b), true
	}
	vals, ok := DecodePK(b, n)
	return append(out, vals...), ok
}

// unsafeString views b as a string; b must never change afterwards.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (r *Row) clear(slots []int) {
	for _, s := range slots {
		if s < len(r.cells) {
			r.cells[s] = Cell{Ts: noTS}
		}
	}
}
