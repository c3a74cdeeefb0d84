package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"sort"
	"unsafe"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
)

// The write path: a mutation and its cell operations applied to a table's data (Apply),
// the conditions of a conditional write checked under the partition lock, the clustering
// order, and the memory a write charges (memory.go).

// cellOp is a write to one cell.
type CellOp struct {
	Pos   int
	Kind  CellOpKind
	Field uint16 // the field of cellSetField (in kind's padding: the write path's ops stay 64 bytes)
	V     []byte // the value, or the operand of a collection operation
	Key   []byte // map key or list index for cellSetKey / cellDelKey
}

type CellOpKind uint8

const (
	CellSet        CellOpKind = iota // overwrite (nil deletes)
	CellAppend                       // list append, set union, map put-all
	CellPrepend                      // list prepend
	CellRemove                       // list remove values, set difference, map remove keys
	CellSetKey                       // m[k] = v, l[i] = v
	CellDelKey                       // DELETE m[k], l[i]
	CellCounterAdd                   // counter += v
	CellSetField                     // u.f = v on a non-frozen user type (nil deletes the field)
)

// mutation is a write to one row (or a deletion) of one partition.
type Mutation struct {
	Pk     []byte
	Token  int64
	Ck     [][]byte // the full clustering key; nil for tables without one or static-only writes
	Ts     int64
	Exp    int64
	Ttl    int32
	Marker bool // INSERT: set the row marker

	// Deletions.
	DelPartition bool
	DelRow       bool
	DelRange     *CkFilter // delete the rows matching this filter

	Cond     uint8 // condNone, condNotExists, condExists or condIf
	Conds    []CondVal
	Applied  bool
	Existing [][]byte
	// part is set by apply to the partition it found or created (nil if none), which the
	// maintenance of views reads again without another lookup.
	part *Partition
}

// apply performs m, with its cell operations ops, on t's data. For a conditional write it
// sets m.applied, and m.existing to the current row when the condition fails. ops is not a
// field of m: apply keeps what m's pointers reach (its keys, the values of ops), and a slice
// in m would take its backing array with them, so that a caller's fixed array of operations
// (writePlan.exec's) would move to the heap, 512 bytes with every write.
func (d *TableData) Apply(t *Table, m *Mutation, ops []CellOp, now int64) error {
	return d.applyRead(t, m, ops, now, nil, nil)
}

// applyRead is apply that, when vr is set, reads for the views of t the row m writes (of
// partition key pkVals), in the same lookup: its view keys before the write, and the row.
func (d *TableData) applyRead(t *Table, m *Mutation, ops []CellOp, now int64, pkVals [][]byte, vr *viewRead) error {
	m.Applied, m.Existing, m.part = true, nil, nil
	sh := d.Shard(m.Token)
	sh.Mu.Lock()
	defer sh.Mu.Unlock()
	p := sh.parts[string(m.Pk)]
	m.part = p
	if vr != nil && p != nil {
		if i, found := p.Find(t, m.Ck); found {
			vr.before(t, pkVals, p.Rows[i], now)
		}
	}
	if m.Cond != CondNone {
		if ok, existing := CheckCond(t, p, m.Ck, m.Cond, m.Conds, now); !ok {
			m.Applied, m.Existing = false, existing
			return nil
		}
	}
	if p == nil {
		if m.DelRange != nil {
			return nil
		}
		p = d.newPartition(sh, m)
	}
	if m.DelPartition || m.DelRange != nil {
		d.deleteRows(t, p, m)
		return nil
	}
	if m.Ts < p.del {
		return nil
	}
	r, ok := d.rowOf(t, p, m, ops, vr)
	if !ok {
		return nil
	}
	return d.applyOps(t, p, r, m, ops, now)
}

// newPartition adds the partition m writes to shard sh, whose lock the caller holds, and
// charges it.
func (d *TableData) newPartition(sh *shard, m *Mutation) *Partition {
	p := &Partition{Key: m.Pk, Token: m.Token, del: noTS}
	sh.parts[unsafeString(m.Pk)] = p
	d.version.Add(1)
	m.part = p
	d.chargeNew(p, nil, 0)
	return p
}

// deleteRows performs m's deletion of partition p, or of its rows in m's range, and gives
// back the values it purges.
func (d *TableData) deleteRows(t *Table, p *Partition, m *Mutation) {
	if m.DelPartition {
		if m.Ts >= p.del {
			p.del = m.Ts
		}
		d.purgePartition(p)
		return
	}
	for _, r := range p.Rows {
		if m.DelRange.Matches(t, r.Ck) && m.Ts >= r.del {
			r.del = m.Ts
			d.purgeRow(r)
		}
	}
}

// rowOf returns the row of partition p that m writes, added when new (and then handed to
// vr), with m's row deletion or row marker applied; nil when m writes static cells only.
// ok is false when m has nothing left to write: a row deletion, or a write older than the
// row's deletion.
func (d *TableData) rowOf(t *Table, p *Partition, m *Mutation, ops []CellOp, vr *viewRead) (r *Row, ok bool) {
	if !writesRow(t, m, ops) {
		return nil, true
	}
	i, found := p.Find(t, m.Ck)
	if found {
		r = p.Rows[i]
	} else {
		r = d.insertRow(t, p, i, m.Ck)
		if vr != nil {
			vr.row = r
		}
	}
	if m.DelRow {
		if m.Ts >= r.del {
			r.del = m.Ts
		}
		d.purgeRow(r)
		return nil, false
	}
	if m.Ts < r.del {
		return nil, false
	}
	if m.Marker && m.Ts >= r.marker.ts {
		r.marker = liveness{ts: m.Ts, exp: m.Exp, ttl: m.Ttl}
	}
	return r, true
}

// writesRow reports whether m writes a row rather than static cells only: an INSERT's
// marker, a row deletion, or a regular cell.
func writesRow(t *Table, m *Mutation, ops []CellOp) bool {
	if m.Marker || m.DelRow {
		return true
	}
	for i := range ops {
		if t.Cells[ops[i].Pos].Kind != KindStatic {
			return true
		}
	}
	return false
}

// insertRow adds a row of clustering key ck at index i of partition p, and charges it: the
// partition's first row lives inline.
func (d *TableData) insertRow(t *Table, p *Partition, i int, ck [][]byte) *Row {
	var r *Row
	if p.Rows == nil && p.firstRef[0] == nil {
		r = &p.first
		initRow(r, ck, len(t.Cells))
		p.firstRef[0] = r
		p.Rows = p.firstRef[:]
	} else {
		r = newRow(ck, len(t.Cells))
		p.Rows = slices.Insert(p.Rows, i, r)
	}
	d.chargeNew(nil, r, len(t.Cells))
	return r
}

// applyOps performs m's cell operations ops on its row r (nil when they are all static) of
// partition p, and charges the bytes their values add (or gives back those they drop).
func (d *TableData) applyOps(t *Table, p *Partition, r *Row, m *Mutation, ops []CellOp, now int64) error {
	var held int64 // the bytes the ops add (fewer when negative), charged once
	for i := range ops {
		op := &ops[i]
		col := t.Cells[op.Pos]
		target := r
		if col.Kind == KindStatic {
			if p.Static == nil {
				p.Static = newRow(nil, len(t.Cells))
				d.chargeNew(nil, p.Static, len(t.Cells))
			}
			target = p.Static
		}
		if op.Pos >= len(target.cells) {
			held += int64(len(t.Cells)-len(target.cells)) * cellBytes
			target.grow(len(t.Cells))
		}
		c := &target.cells[op.Pos]
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

// checkCond evaluates a conditional write's condition on partition p (nil when absent), for
// the row of clustering key ck. When it does not hold it also returns what Cassandra shows
// beside [applied] = false: for IF EXISTS and IF NOT EXISTS the row (SELECT * order), for
// IF the values of the condition's columns (condColumns), and nothing when the row those
// would come from does not exist. The caller holds the shard lock.
func CheckCond(t *Table, p *Partition, ck [][]byte, cond uint8, conds []CondVal, now int64) (bool, [][]byte) {
	var r *Row
	if p != nil {
		if ck == nil && len(t.Ck) == 0 && len(p.Rows) > 0 {
			r = p.Rows[0]
		} else if i, ok := p.Find(t, ck); ok && ck != nil {
			r = p.Rows[i]
		}
	}
	exists := r != nil && r.Live(now)
	if cond != CondIf {
		if exists != (cond == CondNotExists) {
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
		var c *Cell
		if cv.Col.Kind == KindStatic {
			if p != nil && p.Static != nil {
				c = p.Static.Cell(cv.Col.Pos)
			}
		} else {
			staticOnly = false
			if r != nil {
				c = r.Cell(cv.Col.Pos)
			}
		}
		var v []byte
		if c != nil && c.Live(now) {
			v = c.v
		}
		if !cv.holds(v) {
			ok = false
		}
	}
	if ok {
		return true, nil
	}
	if !exists && !(staticOnly && p != nil && p.Static != nil && p.Static.Live(now)) {
		return false, nil
	}
	cols := CondColumns(conds)
	vals := make([][]byte, len(cols))
	for i, col := range cols {
		var c *Cell
		if col.Kind == KindStatic {
			if p != nil && p.Static != nil {
				c = p.Static.Cell(col.Pos)
			}
		} else if r != nil {
			c = r.Cell(col.Pos)
		}
		if c != nil && c.Live(now) {
			vals[i] = c.v
		}
	}
	return false, vals
}

// condColumns returns the columns of an IF, each once, in the order of the conditions.
func CondColumns(conds []CondVal) []*Column {
	var out []*Column
	for i := range conds {
		if !slices.Contains(out, conds[i].Col) {
			out = append(out, conds[i].Col)
		}
	}
	return out
}

// find returns the index of the row with clustering key ck, or where it would go.
func (p *Partition) Find(t *Table, ck [][]byte) (int, bool) {
	n := len(p.Rows)
	if n > 0 {
		// Appending in order is the common case of time series.
		if c := CompareCK(t, p.Rows[n-1].Ck, ck); c < 0 {
			return n, false
		} else if c == 0 {
			return n - 1, true
		}
	}
	i := sort.Search(n, func(i int) bool { return CompareCK(t, p.Rows[i].Ck, ck) >= 0 })
	return i, i < n && CompareCK(t, p.Rows[i].Ck, ck) == 0
}

// compareCK orders clustering keys (or prefixes: a shorter prefix sorts first) in storage
// order, honouring each column's DESC.
func CompareCK(t *Table, a, b [][]byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		c := cqlvalue.CompareValues(t.Ck[i].Typ, a[i], b[i])
		if c != 0 {
			if t.Ck[i].Desc {
				return -c
			}
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func (c *Cell) apply(col *Column, op *CellOp, m *Mutation, now int64) error {
	if op.Kind == CellSet {
		if m.Ts >= c.Ts {
			*c = Cell{v: op.V, Ts: m.Ts, Exp: m.Exp, ttl: m.Ttl}
			if op.V == nil {
				c.Exp, c.ttl = 0, 0
			}
		}
		return nil
	}
	var old []byte
	if c.Live(now) {
		old = c.v
	}
	v, err := CollectionOp(col, op, old)
	if err != nil {
		return err
	}
	ts := m.Ts
	if c.Ts > ts {
		ts = c.Ts
	}
	*c = Cell{v: v, Ts: ts, Exp: m.Exp, ttl: m.Ttl}
	if op.Kind == CellCounterAdd {
		c.Exp, c.ttl = 0, 0
	}
	return nil
}

// collectionOp computes the new value of a collection (or counter) cell.
func CollectionOp(col *Column, op *CellOp, old []byte) ([]byte, error) {
	t := col.Typ
	switch op.Kind {
	case CellSetField:
		return setField(t, op, old), nil
	case CellCounterAdd:
		var a int64
		if len(old) == 8 {
			a = int64(binary.BigEndian.Uint64(old))
		}
		b, _ := cqlvalue.Int64Value(op.V)
		return cqlvalue.EncBigint(a + b), nil
	}
	per := cqlvalue.ElemsPerEntry(t)
	cur, _ := cqlvalue.DecCollection(old, per)
	argPer := per
	if op.Kind == CellRemove {
		argPer = 1 // map - set<key>
	}
	arg, _ := cqlvalue.DecCollection(op.V, argPer)
	kt := cqlvalue.ElemType(t)
	if t.ID == cql.TypeMap {
		kt = cqlvalue.KeyType(t)
	}
	var out [][]byte
	switch op.Kind {
	case CellAppend:
		if t.ID == cql.TypeList {
			out = append(slices.Clip(cur), arg...)
			break
		}
		out = mergeSorted(kt, cur, arg, per)
	case CellPrepend:
		out = append(slices.Clone(arg), cur...)
	case CellRemove:
		out = removeEntries(cur, arg, per)
	case CellSetKey, CellDelKey:
		if t.ID != cql.TypeList {
			out = setMapKey(kt, cur, op)
			break
		}
		var err error
		if out, err = setListIndex(cur, op); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	b := cqlvalue.EncCollection(out)
	binary.BigEndian.PutUint32(b, uint32(len(out)/per))
	return b, nil
}

// setField returns the value of a non-frozen user type (of type t) old with op's field
// set (nil deletes it), or nil when no field is left.
func setField(t cql.TypeInfo, op *CellOp, old []byte) []byte {
	elems, _ := cqlvalue.DecTuple(old)
	for len(elems) < len(t.Fields) {
		elems = append(elems, nil)
	}
	elems = slices.Clone(elems)
	elems[int(op.Field)] = op.V
	if !slices.ContainsFunc(elems, func(e []byte) bool { return e != nil }) {
		return nil
	}
	return cqlvalue.EncTuple(elems)
}

// removeEntries returns the entries of cur (per values each: 1 for a list or set, 2 for a
// map) whose first value is not in arg.
func removeEntries(cur, arg [][]byte, per int) [][]byte {
	var out [][]byte
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
	return out
}

// setListIndex returns the list cur with the element at op's index set to op's value, or
// deleted (DELETE l[i], or a null value); the index must be in the list.
func setListIndex(cur [][]byte, op *CellOp) ([][]byte, error) {
	idx, ok := cqlvalue.Int32Value(op.Key)
	if !ok || idx < 0 || int(idx) >= len(cur) {
		return nil, cqlvalue.Invalidf("List index %d out of bound, list has size %d", idx, len(cur))
	}
	out := slices.Clone(cur)
	if op.Kind == CellDelKey || op.V == nil {
		return slices.Delete(out, int(idx), int(idx)+1), nil
	}
	out[idx] = op.V
	return out, nil
}

// setMapKey returns the map entries cur (keys of type kt) with op's key set to op's value,
// or deleted (DELETE m[k], or a null value).
func setMapKey(kt cql.TypeInfo, cur [][]byte, op *CellOp) [][]byte {
	var out [][]byte
	for i := 0; i+1 < len(cur); i += 2 {
		if !bytes.Equal(cur[i], op.Key) {
			out = append(out, cur[i], cur[i+1])
		}
	}
	if op.Kind == CellSetKey && op.V != nil {
		out = mergeSorted(kt, out, [][]byte{op.Key, op.V}, 2)
	}
	return out
}

// mergeSorted merges sorted entries of a set (per=1) or map (per=2); b wins on equal keys.
func mergeSorted(kt cql.TypeInfo, a, b [][]byte, per int) [][]byte {
	out := make([][]byte, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		c := cqlvalue.CompareValues(kt, a[i], b[j])
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
type CkBound struct {
	Vals      [][]byte
	Inclusive bool
}

// ckFilter selects rows of a partition by clustering key: an equality prefix, then an
// optional range on the next column.
type CkFilter struct {
	Eq       [][]byte
	Lo, Hi   *CkBound // in clustering-value terms (not storage order): lo ≤ value ≤ hi
	RangeCol int      // index of the column the range applies to
}

func (f *CkFilter) Matches(t *Table, ck [][]byte) bool {
	if f == nil {
		return true
	}
	for i, v := range f.Eq {
		if i >= len(ck) || cqlvalue.CompareValues(t.Ck[i].Typ, ck[i], v) != 0 {
			return false
		}
	}
	if f.Lo == nil && f.Hi == nil {
		return true
	}
	i := f.RangeCol
	if i >= len(ck) {
		return false
	}
	typ := t.Ck[i].Typ
	if f.Lo != nil {
		c := cqlvalue.CompareValues(typ, ck[i], f.Lo.Vals[0])
		if c < 0 || c == 0 && !f.Lo.Inclusive {
			return false
		}
	}
	if f.Hi != nil {
		c := cqlvalue.CompareValues(typ, ck[i], f.Hi.Vals[0])
		if c > 0 || c == 0 && !f.Hi.Inclusive {
			return false
		}
	}
	return true
}

// Sizes of the structures a write allocates, as the memory estimate (memory.go) charges
// them.
const (
	partitionBytes = int64(unsafe.Sizeof(Partition{})) + 48 // + the shard map's entry (key header, pointer, bucket share)
	rowBytes       = int64(unsafe.Sizeof(Row{})) + 8        // + its pointer in the partition's rows
	cellBytes      = int64(unsafe.Sizeof(Cell{}))
)

// Charges are what the estimate charges beside the bytes of keys and values: a partition
// (with its key's allocation), a row, a cell, a clustering key's value and a cell's value.
// loadcheck's preload plan sizes partitions with the same figures; a test of loadcheck ties
// its copy to these.
type Charges struct{ Partition, Row, Cell, KeyValue, Value int64 }

// EstimateCharges returns the estimate's Charges.
func EstimateCharges() Charges {
	return Charges{partitionBytes + allocBytes, rowBytes, cellBytes, sliceBytes + allocBytes, allocBytes}
}

// NewData returns empty data for a user table, counted against m.
func (m *Memory) NewData() *TableData {
	d := NewTableData()
	d.mem = m
	return d
}

// Renew returns empty data in place of old, a table's data that TRUNCATE lets go of, and
// gives back old's bytes.
func (m *Memory) Renew(old *TableData) *TableData {
	if old == nil || old.mem == nil {
		return NewTableData()
	}
	m.Release(old)
	return old.mem.NewData()
}

// Release gives back the bytes of d, a table's data that TRUNCATE or DROP let go of.
func (m *Memory) Release(d *TableData) {
	if m == nil || d == nil || d.mem != m {
		return
	}
	m.held.Add(-d.bytes.Swap(0))
	m.released()
}

// charge counts n more bytes (fewer when negative) held by d.
func (d *TableData) charge(n int64) {
	if d.mem != nil && n != 0 {
		d.bytes.Add(n)
		d.mem.held.Add(n)
	}
}

// chargeNew counts a partition or a row that a write just created.
func (d *TableData) chargeNew(p *Partition, r *Row, ncells int) {
	if d.mem == nil {
		return
	}
	var n int64
	if p != nil {
		n += partitionBytes + int64(len(p.Key)) + allocBytes
	}
	if r != nil {
		n += rowBytes + int64(ncells)*cellBytes + ckBytes(r.Ck)
	}
	d.charge(n)
}

// purgePartition purges p's cells shadowed by its deletion, and gives back their values.
func (d *TableData) purgePartition(p *Partition) {
	if d.mem == nil {
		p.purge(p.del)
		return
	}
	before := partitionValueBytes(p)
	p.purge(p.del)
	d.charge(partitionValueBytes(p) - before)
}

// purgeRow purges r's cells shadowed by its deletion, and gives back their values.
func (d *TableData) purgeRow(r *Row) {
	if d.mem == nil {
		r.purge(r.del)
		return
	}
	before := rowValueBytes(r)
	r.purge(r.del)
	d.charge(rowValueBytes(r) - before)
}

// rowValueBytes sums the values a row's cells hold, for a deletion to give back what its
// purge drops.
func rowValueBytes(r *Row) int64 {
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
func partitionValueBytes(p *Partition) int64 {
	n := rowValueBytes(p.Static)
	for _, r := range p.Rows {
		n += rowValueBytes(r)
	}
	return n
}
