package storage

import (
	"slices"
)

// applyWithViews applies m to t, a base table of views, and updates the views: it reads
// the view keys of the rows m changes before it, and after it replaces their view rows
// from the rows as they are, under the base shard's lock (a base shard's lock is taken
// before a view shard's, never after).
func (t *Table) ApplyWithViews(d *TableData, m *Mutation, ops []CellOp, now int64) error {
	t.ViewMu.Lock()
	defer t.ViewMu.Unlock()
	all := m.DelPartition || m.DelRange != nil
	var pkBuf [4][]byte
	pkVals, ok := DecodePKInto(pkBuf[:0], m.Pk, len(t.Pk))
	if !ok || !all && len(t.Ck) > 0 && m.Ck == nil {
		return d.Apply(t, m, ops, now) // static cells only, which views do not have
	}
	sh := d.Shard(m.Token)
	if !all {
		return t.applyRowWithViews(d, sh, m, ops, pkVals, now)
	}
	var old []oldRow
	sh.Mu.RLock()
	if p := sh.parts[string(m.Pk)]; p != nil { // the same partition as m.part: apply never removes one
		for _, r := range p.Rows {
			if all || CompareCK(t, r.Ck, m.Ck) == 0 {
				old = append(old, oldRow{ck: r.Ck, keys: t.oldKeys(pkVals, r, now)})
			}
		}
	}
	sh.Mu.RUnlock()
	if err := d.Apply(t, m, ops, now); err != nil || !m.Applied {
		return err // a condition that did not hold changed nothing
	}
	sh.Mu.RLock()
	defer sh.Mu.RUnlock()
	p := m.part
	var rows []*Row
	if p != nil {
		rows = p.Rows
		if !all {
			rows = nil
			if i, found := p.Find(t, m.Ck); found {
				rows = p.Rows[i : i+1]
			}
		}
	}
	// Both lists are in clustering order: pair them.
	j := 0
	for i := range old {
		for j < len(rows) && CompareCK(t, rows[j].Ck, old[i].ck) < 0 {
			t.replaceViews(nil, pkVals, rows[j], now)
			j++
		}
		if j < len(rows) && CompareCK(t, rows[j].Ck, old[i].ck) == 0 {
			t.replaceViews(old[i].keys, pkVals, rows[j], now)
			j++
		} else {
			t.replaceViews(old[i].keys, pkVals, nil, now)
		}
	}
	for ; j < len(rows); j++ {
		t.replaceViews(nil, pkVals, rows[j], now)
	}
	return nil
}

// applyRowWithViews is applyWithViews for a write to one row, the common case: the write's
// own lookup reads the row's view keys before it and finds the row after it (no other
// lookup of the base row), and the keys stay on its stack (up to two views).
func (t *Table) applyRowWithViews(d *TableData, sh *shard, m *Mutation, ops []CellOp, pkVals [][]byte, now int64) error {
	var vr viewRead
	if err := d.applyRead(t, m, ops, now, pkVals, &vr); err != nil || !m.Applied {
		return err // a condition that did not hold changed nothing
	}
	var keys []viewKey
	switch {
	case vr.more != nil:
		keys = vr.more
	case vr.had:
		keys = vr.buf[:len(t.Views)]
	}
	sh.Mu.RLock()
	defer sh.Mu.RUnlock()
	t.replaceViews(keys, pkVals, vr.row, now)
	return nil
}

// replaceViews replaces, in every view, the view row of a base row whose view keys were
// old (nil: it had none) by the one of the row as it is now (nil: gone).
func (t *Table) replaceViews(old []viewKey, pkVals [][]byte, r *Row, now int64) {
	for j, l := range t.Views {
		var nk viewKey
		if r != nil && r.Live(now) {
			nk = l.Key(pkVals, r, true, now)
		}
		vd := l.V.Data.Load()
		if old != nil && old[j].Ok && !(nk.Ok && old[j].same(&nk)) {
			vd.removeRow(l.V, old[j].pk, old[j].ck())
		}
		if nk.Ok {
			vd.PutRow(l, &nk, r, now)
		}
	}
}

// fill makes dst the view row of base row r: its cells, and a marker that keeps it alive
// as long as the base row (or, with a regular column in the view key, as that column's
// cell), expiring with them.
func (l *ViewLink) fill(dst, r *Row, now int64) {
	var capExp int64
	if l.KeyCol != nil {
		kc := r.Cell(l.KeyCol.Pos)
		dst.marker = liveness{ts: kc.Ts, exp: kc.Exp, ttl: kc.ttl}
		capExp = kc.Exp
	} else {
		dst.marker = rowLiveness(r, now)
	}
	for i, bc := range l.Cells {
		dst.cells[i] = Cell{Ts: noTS}
		if bc == nil {
			continue
		}
		if c := r.Cell(bc.Pos); c != nil && c.Live(now) {
			dst.cells[i] = *c
			if capExp != 0 && (c.Exp == 0 || c.Exp > capExp) {
				dst.cells[i].Exp, dst.cells[i].ttl = capExp, dst.marker.ttl
			}
		}
	}
}

// rowLiveness is how long base row r lives: the newest timestamp of its live marker and
// cells, and the latest of their expiries (none if one of them does not expire).
func rowLiveness(r *Row, now int64) liveness {
	out := liveness{ts: noTS}
	noExp := false
	add := func(ts, exp int64, ttl int32) {
		out.ts = max(out.ts, ts)
		if exp == 0 {
			noExp = true
		} else if exp > out.exp {
			out.exp, out.ttl = exp, ttl
		}
	}
	if r.marker.live(now) {
		add(r.marker.ts, r.marker.exp, r.marker.ttl)
	}
	for i := range r.cells {
		if c := &r.cells[i]; c.Live(now) {
			add(c.Ts, c.Exp, c.ttl)
		}
	}
	if noExp {
		out.exp, out.ttl = 0, 0
	}
	return out
}

// viewPart is a view partition with room for its first row's clustering values and cells,
// so that a new one is one allocation.
type viewPart struct {
	Partition
	ck    [2][]byte
	cells [6]Cell
}

// smallViewPart is viewPart for a view of at most four cells (cassandra-stress's table keyed
// by a regular column has four): 416 bytes instead of 512, less for the collector to scan.
type smallViewPart struct {
	Partition
	ck    [2][]byte
	cells [4]Cell
}

// newViewPart returns a new view partition p with room inline for its first row's
// clustering values and n cells: that room.
func newViewPart(p Partition, n int) (*Partition, [][]byte, []Cell) {
	if n <= 4 {
		vp := &smallViewPart{Partition: p}
		return &vp.Partition, vp.ck[:], vp.cells[:]
	}
	vp := &viewPart{Partition: p}
	return &vp.Partition, vp.ck[:], vp.cells[:]
}

// putRow stores the view row of base row r at key k of view l.v, replacing the row there.
// A new partition keeps its first row inline, as the base's do.
func (d *TableData) PutRow(l *ViewLink, k *viewKey, r *Row, now int64) {
	v := l.V
	ck := k.ck()
	token := Murmur3Token(k.pk)
	sh := d.Shard(token)
	sh.Mu.Lock()
	defer sh.Mu.Unlock()
	p := sh.parts[string(k.pk)]
	var dst *Row
	switch {
	case p == nil:
		var ckRoom [][]byte
		var cellRoom []Cell
		p, ckRoom, cellRoom = newViewPart(Partition{Key: k.pk, Token: token, del: noTS}, len(l.Cells))
		sh.parts[unsafeString(k.pk)] = p
		d.version.Add(1)
		dst = &p.first // zero, but for these
		dst.del, dst.marker.ts = noTS, noTS
		if len(ck) <= len(ckRoom) {
			dst.Ck = ckRoom[:len(ck):len(ck)]
			copy(dst.Ck, ck)
		} else {
			dst.Ck = slices.Clone(ck)
		}
		if len(l.Cells) <= len(cellRoom) {
			dst.cells = cellRoom[:len(l.Cells):len(l.Cells)]
		} else {
			dst.cells = make([]Cell, len(l.Cells))
		}
		p.firstRef[0] = dst
		p.Rows = p.firstRef[:]
	default:
		i, found := p.Find(v, ck)
		if found {
			dst = p.Rows[i] // its clustering values are ck's already
			dst.del = noTS
			if len(dst.cells) != len(l.Cells) {
				dst.cells = make([]Cell, len(l.Cells))
			}
		} else {
			dst = newRow(slices.Clone(ck), len(l.Cells))
			p.Rows = slices.Insert(p.Rows, i, dst)
		}
	}
	l.fill(dst, r, now)
}

// removeRow removes the row of clustering key ck from partition pk of a view, and the
// partition when it has no row left.
func (d *TableData) removeRow(v *Table, pk []byte, ck [][]byte) {
	token := Murmur3Token(pk)
	sh := d.Shard(token)
	sh.Mu.Lock()
	defer sh.Mu.Unlock()
	p := sh.parts[string(pk)]
	if p == nil {
		return
	}
	if i, found := p.Find(v, ck); found {
		p.Rows = slices.Delete(p.Rows, i, i+1)
	}
	if len(p.Rows) == 0 {
		delete(sh.parts, string(pk))
		d.version.Add(1)
	}
}
