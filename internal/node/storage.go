package node

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/sharding"
)

// Storage keeps every value as its serialized bytes. Stored byte slices are never
// modified after they are written, so readers may hand them out after releasing the lock.

const numShards = 64

// noTS marks an absent timestamp (never written, not deleted).
const noTS = math.MinInt64

type tableData struct {
	shards [numShards]shard
	// version changes whenever a partition is added or removed, to invalidate scanCache.
	version   atomic.Uint64
	scanMu    sync.Mutex
	scanCache *scanSnapshot
	mem       *memory      // the engine's count for a user table's data (memory.go), or nil
	bytes     atomic.Int64 // what this data holds, counted in mem
}

type shard struct {
	mu    sync.RWMutex
	parts map[string]*partition
	_     [40]byte // keep shards on separate cache lines
}

type scanSnapshot struct {
	version uint64
	parts   []*partition // ordered by token, then key
}

func newTableData() *tableData {
	d := &tableData{}
	for i := range d.shards {
		d.shards[i].parts = map[string]*partition{}
	}
	return d
}

type partition struct {
	key    []byte
	token  int64
	del    int64 // partition deletion timestamp, or noTS
	static *row  // static cells, or nil
	rows   []*row

	// The first row lives inline, which saves two allocations per partition of a table
	// without clustering columns.
	first    row
	firstRef [1]*row
}

type row struct {
	ck     [][]byte
	marker liveness // set by INSERT
	del    int64    // row deletion timestamp, or noTS
	cells  []cell
}

type liveness struct {
	ts  int64 // noTS when absent
	exp int64 // expiry in Unix seconds, 0 for none
	ttl int32
}

type cell struct {
	v   []byte // nil is a tombstone (a deleted or null cell) when ts != noTS
	ts  int64  // noTS when never written
	exp int64
	ttl int32
}

func (c *cell) live(now int64) bool {
	return c.ts != noTS && c.v != nil && (c.exp == 0 || c.exp > now)
}

func (l *liveness) live(now int64) bool {
	return l.ts != noTS && (l.exp == 0 || l.exp > now)
}

// shardOf picks a shard by the partition key's token.
func shardOf(token int64) int {
	return int(uint64(token) >> (64 - 6))
}

func (d *tableData) shard(token int64) *shard { return &d.shards[shardOf(token)] }

// cellOp is a write to one cell.
type cellOp struct {
	pos   int
	kind  cellOpKind
	field uint16 // the field of cellSetField (in kind's padding: the write path's ops stay 64 bytes)
	v     []byte // the value, or the operand of a collection operation
	key   []byte // map key or list index for cellSetKey / cellDelKey
}

type cellOpKind uint8

const (
	cellSet        cellOpKind = iota // overwrite (nil deletes)
	cellAppend                       // list append, set union, map put-all
	cellPrepend                      // list prepend
	cellRemove                       // list remove values, set difference, map remove keys
	cellSetKey                       // m[k] = v, l[i] = v
	cellDelKey                       // DELETE m[k], l[i]
	cellCounterAdd                   // counter += v
	cellSetField                     // u.f = v on a non-frozen user type (nil deletes the field)
)

// mutation is a write to one row (or a deletion) of one partition.
type mutation struct {
	pk     []byte
	token  int64
	ck     [][]byte // the full clustering key; nil for tables without one or static-only writes
	ts     int64
	exp    int64
	ttl    int32
	marker bool // INSERT: set the row marker

	// Deletions.
	delPartition bool
	delRow       bool
	delRange     *ckFilter // delete the rows matching this filter

	cond     uint8 // condNone, condNotExists, condExists or condIf
	conds    []condVal
	applied  bool
	existing [][]byte
	// part is set by apply to the partition it found or created (nil if none), which the
	// maintenance of views reads again without another lookup.
	part *partition
}

// apply performs m, with its cell operations ops, on t's data. For a conditional write it
// sets m.applied, and m.existing to the current row when the condition fails. ops is not a
// field of m: apply keeps what m's pointers reach (its keys, the values of ops), and a slice
// in m would take its backing array with them, so that a caller's fixed array of operations
// (writePlan.exec's) would move to the heap, 512 bytes with every write.
func (d *tableData) apply(t *table, m *mutation, ops []cellOp, now int64) error {
	return d.applyRead(t, m, ops, now, nil, nil)
}

// applyRead is apply that, when vr is set, reads for the views of t the row m writes (of
// partition key pkVals), in the same lookup: its view keys before the write, and the row.
func (d *tableData) applyRead(t *table, m *mutation, ops []cellOp, now int64, pkVals [][]byte, vr *viewRead) error {
	m.applied, m.existing, m.part = true, nil, nil
	sh := d.shard(m.token)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.parts[string(m.pk)]
	m.part = p
	if vr != nil && p != nil {
		if i, found := p.find(t, m.ck); found {
			vr.before(t, pkVals, p.rows[i], now)
		}
	}
	if m.cond != condNone {
		if ok, existing := checkCond(t, p, m.ck, m.cond, m.conds, now); !ok {
			m.applied, m.existing = false, existing
			return nil
		}
	}
	if p == nil {
		if m.delRange != nil {
			return nil
		}
		p = &partition{key: m.pk, token: m.token, del: noTS}
		sh.parts[unsafeString(m.pk)] = p
		d.version.Add(1)
		m.part = p
		d.chargeNew(p, nil, 0)
	}
	switch {
	case m.delPartition:
		if m.ts >= p.del {
			p.del = m.ts
		}
		d.purgePartition(p)
		return nil
	case m.delRange != nil:
		for _, r := range p.rows {
			if m.delRange.matches(t, r.ck) && m.ts >= r.del {
				r.del = m.ts
				d.purgeRow(r)
			}
		}
		return nil
	}
	if m.ts < p.del {
		return nil
	}
	var r *row
	needRow := m.marker || m.delRow
	for i := range ops {
		if t.cells[ops[i].pos].kind != kindStatic {
			needRow = true
		}
	}
	if needRow {
		i, found := p.find(t, m.ck)
		if !found {
			if p.rows == nil && p.firstRef[0] == nil {
				r = &p.first
				initRow(r, m.ck, len(t.cells))
				p.firstRef[0] = r
				p.rows = p.firstRef[:]
			} else {
				r = newRow(m.ck, len(t.cells))
				p.rows = slices.Insert(p.rows, i, r)
			}
			d.chargeNew(nil, r, len(t.cells))
			if vr != nil {
				vr.row = r
			}
		} else {
			r = p.rows[i]
		}
		if m.delRow {
			if m.ts >= r.del {
				r.del = m.ts
			}
			d.purgeRow(r)
			return nil
		}
		if m.ts < r.del {
			return nil
		}
		if m.marker && m.ts >= r.marker.ts {
			r.marker = liveness{ts: m.ts, exp: m.exp, ttl: m.ttl}
		}
	}
	var held int64 // the values' bytes the ops add (fewer when negative), charged once
	for i := range ops {
		op := &ops[i]
		col := t.cells[op.pos]
		target := r
		if col.kind == kindStatic {
			if p.static == nil {
				p.static = newRow(nil, len(t.cells))
				d.chargeNew(nil, p.static, len(t.cells))
			}
			target = p.static
		}
		if op.pos >= len(target.cells) {
			target.grow(len(t.cells))
		}
		c := &target.cells[op.pos]
		before := valueBytes(c.v)
		err := c.apply(col, op, m, now)
		held += valueBytes(c.v) - before
		if err != nil {
			d.charge(held)
			return err
		}
	}
	d.charge(held)
	return nil
}

// cell returns the cell of slot pos, or nil in a row written before the column was added.
func (r *row) cell(pos int) *cell {
	if pos < len(r.cells) {
		return &r.cells[pos]
	}
	return nil
}

// grow gives the row n cells, for columns added after it was written.
func (r *row) grow(n int) {
	for len(r.cells) < n {
		r.cells = append(r.cells, cell{ts: noTS})
	}
}

// checkCond evaluates a conditional write's condition on partition p (nil when absent), for
// the row of clustering key ck. When it does not hold it also returns what Cassandra shows
// beside [applied] = false: for IF EXISTS and IF NOT EXISTS the row (SELECT * order), for
// IF the values of the condition's columns (condColumns), and nothing when the row those
// would come from does not exist. The caller holds the shard lock.
func checkCond(t *table, p *partition, ck [][]byte, cond uint8, conds []condVal, now int64) (bool, [][]byte) {
	var r *row
	if p != nil {
		if ck == nil && len(t.ck) == 0 && len(p.rows) > 0 {
			r = p.rows[0]
		} else if i, ok := p.find(t, ck); ok && ck != nil {
			r = p.rows[i]
		}
	}
	exists := r != nil && r.live(now)
	if cond != condIf {
		if exists != (cond == condNotExists) {
			return true, nil
		}
		if exists {
			return false, fullRow(t, p, r, now)
		}
		return false, nil
	}
	ok := true
	staticOnly := true
	for i := range conds {
		cv := &conds[i]
		var c *cell
		if cv.col.kind == kindStatic {
			if p != nil && p.static != nil {
				c = p.static.cell(cv.col.pos)
			}
		} else {
			staticOnly = false
			if r != nil {
				c = r.cell(cv.col.pos)
			}
		}
		var v []byte
		if c != nil && c.live(now) {
			v = c.v
		}
		if !cv.holds(v) {
			ok = false
		}
	}
	if ok {
		return true, nil
	}
	if !exists && !(staticOnly && p != nil && p.static != nil && p.static.live(now)) {
		return false, nil
	}
	cols := condColumns(conds)
	vals := make([][]byte, len(cols))
	for i, col := range cols {
		var c *cell
		if col.kind == kindStatic {
			if p != nil && p.static != nil {
				c = p.static.cell(col.pos)
			}
		} else if r != nil {
			c = r.cell(col.pos)
		}
		if c != nil && c.live(now) {
			vals[i] = c.v
		}
	}
	return false, vals
}

// condColumns returns the columns of an IF, each once, in the order of the conditions.
func condColumns(conds []condVal) []*column {
	var out []*column
	for i := range conds {
		if !slices.Contains(out, conds[i].col) {
			out = append(out, conds[i].col)
		}
	}
	return out
}

// live reports whether the row has a live marker or a live cell.
func (r *row) live(now int64) bool {
	if r.marker.live(now) {
		return true
	}
	for i := range r.cells {
		if r.cells[i].live(now) {
			return true
		}
	}
	return false
}

func newRow(ck [][]byte, ncells int) *row {
	r := &row{}
	initRow(r, ck, ncells)
	return r
}

func initRow(r *row, ck [][]byte, ncells int) {
	*r = row{ck: ck, del: noTS, marker: liveness{ts: noTS}, cells: make([]cell, ncells)}
	for i := range r.cells {
		r.cells[i].ts = noTS
	}
}

// purge drops the cells shadowed by a deletion at ts.
func (r *row) purge(ts int64) {
	if r.marker.ts <= ts {
		r.marker = liveness{ts: noTS}
	}
	for i := range r.cells {
		if r.cells[i].ts <= ts {
			r.cells[i] = cell{ts: noTS}
		}
	}
}

func (p *partition) purge(ts int64) {
	if p.static != nil {
		p.static.purge(ts)
	}
	keep := p.rows[:0]
	for _, r := range p.rows {
		r.purge(ts)
		if r.del < ts {
			r.del = ts
		}
		keep = append(keep, r)
	}
	p.rows = keep
}

// find returns the index of the row with clustering key ck, or where it would go.
func (p *partition) find(t *table, ck [][]byte) (int, bool) {
	n := len(p.rows)
	if n > 0 {
		// Appending in order is the common case of time series.
		if c := compareCK(t, p.rows[n-1].ck, ck); c < 0 {
			return n, false
		} else if c == 0 {
			return n - 1, true
		}
	}
	i := sort.Search(n, func(i int) bool { return compareCK(t, p.rows[i].ck, ck) >= 0 })
	return i, i < n && compareCK(t, p.rows[i].ck, ck) == 0
}

// compareCK orders clustering keys (or prefixes: a shorter prefix sorts first) in storage
// order, honouring each column's DESC.
func compareCK(t *table, a, b [][]byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		c := compareValues(t.ck[i].typ, a[i], b[i])
		if c != 0 {
			if t.ck[i].desc {
				return -c
			}
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func (c *cell) apply(col *column, op *cellOp, m *mutation, now int64) error {
	if op.kind == cellSet {
		if m.ts >= c.ts {
			*c = cell{v: op.v, ts: m.ts, exp: m.exp, ttl: m.ttl}
			if op.v == nil {
				c.exp, c.ttl = 0, 0
			}
		}
		return nil
	}
	var old []byte
	if c.live(now) {
		old = c.v
	}
	v, err := collectionOp(col, op, old)
	if err != nil {
		return err
	}
	ts := m.ts
	if c.ts > ts {
		ts = c.ts
	}
	*c = cell{v: v, ts: ts, exp: m.exp, ttl: m.ttl}
	if op.kind == cellCounterAdd {
		c.exp, c.ttl = 0, 0
	}
	return nil
}

// collectionOp computes the new value of a collection (or counter) cell.
func collectionOp(col *column, op *cellOp, old []byte) ([]byte, error) {
	t := col.typ
	if op.kind == cellSetField {
		elems, _ := decTuple(old)
		for len(elems) < len(t.Fields) {
			elems = append(elems, nil)
		}
		elems = slices.Clone(elems)
		elems[int(op.field)] = op.v
		if !slices.ContainsFunc(elems, func(e []byte) bool { return e != nil }) {
			return nil, nil
		}
		return encTuple(elems), nil
	}
	if op.kind == cellCounterAdd {
		var a int64
		if len(old) == 8 {
			a = int64(binary.BigEndian.Uint64(old))
		}
		b, _ := int64Value(op.v)
		return encBigint(a + b), nil
	}
	per := elemsPerEntry(t)
	cur, _ := decCollection(old, per)
	argPer := per
	if op.kind == cellRemove {
		argPer = 1 // map - set<key>
	}
	arg, _ := decCollection(op.v, argPer)
	kt := elemType(t)
	if t.ID == cql.TypeMap {
		kt = keyType(t)
	}
	var out [][]byte
	switch op.kind {
	case cellAppend:
		if t.ID == cql.TypeList {
			out = append(slices.Clip(cur), arg...)
			break
		}
		out = mergeSorted(kt, cur, arg, per)
	case cellPrepend:
		out = append(slices.Clone(arg), cur...)
	case cellRemove:
		for i := 0; i < len(cur); i += per {
			drop := false
			for j := 0; j < len(arg); j++ {
				if bytes.Equal(cur[i], arg[j]) {
					drop = true
				}
			}
			if !drop {
				out = append(out, cur[i:i+per]...)
			}
		}
	case cellSetKey, cellDelKey:
		if t.ID == cql.TypeList {
			idx, ok := int32Value(op.key)
			if !ok || idx < 0 || int(idx) >= len(cur) {
				return nil, invalidf("List index %d out of bound, list has size %d", idx, len(cur))
			}
			out = slices.Clone(cur)
			if op.kind == cellDelKey || op.v == nil {
				out = slices.Delete(out, int(idx), int(idx)+1)
			} else {
				out[idx] = op.v
			}
			break
		}
		// map
		for i := 0; i+1 < len(cur); i += 2 {
			if !bytes.Equal(cur[i], op.key) {
				out = append(out, cur[i], cur[i+1])
			}
		}
		if op.kind == cellSetKey && op.v != nil {
			out = mergeSorted(kt, out, [][]byte{op.key, op.v}, 2)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	b := encCollection(out)
	binary.BigEndian.PutUint32(b, uint32(len(out)/per))
	return b, nil
}

// mergeSorted merges sorted entries of a set (per=1) or map (per=2); b wins on equal keys.
func mergeSorted(kt cql.TypeInfo, a, b [][]byte, per int) [][]byte {
	out := make([][]byte, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		c := compareValues(kt, a[i], b[j])
		switch {
		case c < 0:
			out = append(out, a[i:i+per]...)
			i += per
		case c > 0:
			out = append(out, b[j:j+per]...)
			j += per
		default:
			out = append(out, b[j:j+per]...)
			i += per
			j += per
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// ckBound is one end of a clustering range: a prefix of the clustering key.
type ckBound struct {
	vals      [][]byte
	inclusive bool
}

// ckFilter selects rows of a partition by clustering key: an equality prefix, then an
// optional range on the next column.
type ckFilter struct {
	eq       [][]byte
	lo, hi   *ckBound // in clustering-value terms (not storage order): lo ≤ value ≤ hi
	rangeCol int      // index of the column the range applies to
}

func (f *ckFilter) matches(t *table, ck [][]byte) bool {
	if f == nil {
		return true
	}
	for i, v := range f.eq {
		if i >= len(ck) || compareValues(t.ck[i].typ, ck[i], v) != 0 {
			return false
		}
	}
	if f.lo == nil && f.hi == nil {
		return true
	}
	i := f.rangeCol
	if i >= len(ck) {
		return false
	}
	typ := t.ck[i].typ
	if f.lo != nil {
		c := compareValues(typ, ck[i], f.lo.vals[0])
		if c < 0 || c == 0 && !f.lo.inclusive {
			return false
		}
	}
	if f.hi != nil {
		c := compareValues(typ, ck[i], f.hi.vals[0])
		if c > 0 || c == 0 && !f.hi.inclusive {
			return false
		}
	}
	return true
}

// partitionSnapshot is the ordered list of partitions for a full scan.
func (d *tableData) scan() []*partition {
	v := d.version.Load()
	d.scanMu.Lock()
	defer d.scanMu.Unlock()
	if c := d.scanCache; c != nil && c.version == v {
		return c.parts
	}
	var parts []*partition
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.RLock()
		for _, p := range sh.parts {
			parts = append(parts, p)
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(parts, comparePartitions)
	d.scanCache = &scanSnapshot{version: v, parts: parts}
	return parts
}

func comparePartitions(a, b *partition) int {
	if a.token != b.token {
		if a.token < b.token {
			return -1
		}
		return 1
	}
	return bytes.Compare(a.key, b.key)
}

// get returns the partition with key pk, or nil. The caller must hold the shard's lock.
func (sh *shard) get(pk []byte) *partition { return sh.parts[string(pk)] }

// encodePK builds the partition key: the value itself for a single column, otherwise
// Cassandra's CompositeType layout.
func encodePK(vals [][]byte) []byte {
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
func decodePK(b []byte, n int) ([][]byte, bool) {
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
func murmur3Token(data []byte) int64 { return sharding.Token(data) }
