package node

import (
	"bytes"
	"slices"
)

// fullRow returns a row's values in SELECT * order. The caller holds the shard lock.
func fullRow(t *table, part *partition, row *row, now int64) [][]byte {
	pkVals, ok := decodePK(part.key, len(t.pk))
	if !ok {
		return nil
	}
	out := make([][]byte, 0, len(t.cols))
	for _, col := range t.cols {
		out = append(out, cellValue(col, pkVals, part, row, now))
	}
	return out
}

// viewKey is the key of a view row: its encoded partition key and clustering values (up
// to four in the key itself, so that a write's keys stay on its stack); ok is false when
// there is no view row (a key column is null).
type viewKey struct {
	pk     []byte
	ckBuf  [4][]byte
	nck    int
	ckHeap [][]byte // more than four clustering columns
	ok     bool
}

// ck returns the clustering values; they must be copied to be kept.
func (k *viewKey) ck() [][]byte {
	if k.ckHeap != nil {
		return k.ckHeap
	}
	return k.ckBuf[:k.nck]
}

func (k *viewKey) same(o *viewKey) bool {
	a, b := k.ck(), o.ck()
	if !bytes.Equal(k.pk, o.pk) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// oldRow is a base row as it was before a write: its clustering key and, per view, the
// key of its view row.
type oldRow struct {
	ck   [][]byte
	keys []viewKey
}

// oldKeys returns the view keys of base row r, one per view. The caller holds r's shard
// lock; the keys hold only values, which never change once written.
func (t *table) oldKeys(pkVals [][]byte, r *row, now int64) []viewKey {
	keys := make([]viewKey, len(t.views))
	for j, l := range t.views {
		keys[j] = l.key(pkVals, r, false, now)
	}
	return keys
}

// applyWithViews applies m to t, a base table of views, and updates the views: it reads
// the view keys of the rows m changes before it, and after it replaces their view rows
// from the rows as they are, under the base shard's lock (a base shard's lock is taken
// before a view shard's, never after).
func (t *table) applyWithViews(d *tableData, m *mutation, ops []cellOp, now int64) error {
	t.viewMu.Lock()
	defer t.viewMu.Unlock()
	all := m.delPartition || m.delRange != nil
	var pkBuf [4][]byte
	pkVals, ok := decodePKInto(pkBuf[:0], m.pk, len(t.pk))
	if !ok || !all && len(t.ck) > 0 && m.ck == nil {
		return d.apply(t, m, ops, now) // static cells only, which views do not have
	}
	sh := d.shard(m.token)
	if !all {
		return t.applyRowWithViews(d, sh, m, ops, pkVals, now)
	}
	var old []oldRow
	sh.mu.RLock()
	if p := sh.parts[string(m.pk)]; p != nil { // the same partition as m.part: apply never removes one
		for _, r := range p.rows {
			if all || compareCK(t, r.ck, m.ck) == 0 {
				old = append(old, oldRow{ck: r.ck, keys: t.oldKeys(pkVals, r, now)})
			}
		}
	}
	sh.mu.RUnlock()
	if err := d.apply(t, m, ops, now); err != nil || !m.applied {
		return err // a condition that did not hold changed nothing
	}
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	p := m.part
	var rows []*row
	if p != nil {
		rows = p.rows
		if !all {
			rows = nil
			if i, found := p.find(t, m.ck); found {
				rows = p.rows[i : i+1]
			}
		}
	}
	// Both lists are in clustering order: pair them.
	j := 0
	for i := range old {
		for j < len(rows) && compareCK(t, rows[j].ck, old[i].ck) < 0 {
			t.replaceViews(nil, pkVals, rows[j], now)
			j++
		}
		if j < len(rows) && compareCK(t, rows[j].ck, old[i].ck) == 0 {
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

// viewRead is what a write to one row of a base table reads for its views, in the lookup
// of the write itself: the view keys the row had before (when it existed: had) and the row.
// It lives on the writer's stack, with room for the keys of two views.
type viewRead struct {
	had  bool
	buf  [2]viewKey
	more []viewKey // the keys, when there are more views than buf holds
	row  *row
}

// before reads the view keys of r, the row about to be written. The caller holds r's shard
// lock.
func (vr *viewRead) before(t *table, pkVals [][]byte, r *row, now int64) {
	vr.had, vr.row = true, r
	if len(t.views) > len(vr.buf) {
		vr.more = make([]viewKey, len(t.views))
	}
	for j, l := range t.views {
		k := l.key(pkVals, r, false, now)
		if vr.more != nil {
			vr.more[j] = k
		} else {
			vr.buf[j] = k
		}
	}
}

// applyRowWithViews is applyWithViews for a write to one row, the common case: the write's
// own lookup reads the row's view keys before it and finds the row after it (no other
// lookup of the base row), and the keys stay on its stack (up to two views).
func (t *table) applyRowWithViews(d *tableData, sh *shard, m *mutation, ops []cellOp, pkVals [][]byte, now int64) error {
	var vr viewRead
	if err := d.applyRead(t, m, ops, now, pkVals, &vr); err != nil || !m.applied {
		return err // a condition that did not hold changed nothing
	}
	var keys []viewKey
	switch {
	case vr.more != nil:
		keys = vr.more
	case vr.had:
		keys = vr.buf[:len(t.views)]
	}
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	t.replaceViews(keys, pkVals, vr.row, now)
	return nil
}

// replaceViews replaces, in every view, the view row of a base row whose view keys were
// old (nil: it had none) by the one of the row as it is now (nil: gone).
func (t *table) replaceViews(old []viewKey, pkVals [][]byte, r *row, now int64) {
	for j, l := range t.views {
		var nk viewKey
		if r != nil && r.live(now) {
			nk = l.key(pkVals, r, true, now)
		}
		vd := l.v.data.Load()
		if old != nil && old[j].ok && !(nk.ok && old[j].same(&nk)) {
			vd.removeRow(l.v, old[j].pk, old[j].ck())
		}
		if nk.ok {
			vd.putRow(l, &nk, r, now)
		}
	}
}

// decodePKInto is decodePK, appending to out: with an array on the caller's stack, a write
// allocates nothing for it.
func decodePKInto(out [][]byte, b []byte, n int) ([][]byte, bool) {
	if n == 1 {
		return append(out, b), true
	}
	vals, ok := decodePK(b, n)
	return append(out, vals...), ok
}

// baseValue returns the value of base column c in a row of partition key pkVals: a live
// cell's value when live, else any value the cell holds (for the key of a row to remove).
func baseValue(c *column, pkVals [][]byte, r *row, live bool, now int64) []byte {
	switch c.kind {
	case kindPartitionKey:
		return pkVals[c.pos]
	case kindClustering:
		return r.ck[c.pos]
	}
	cl := r.cell(c.pos)
	if cl == nil || cl.ts == noTS || live && !cl.live(now) {
		return nil
	}
	return cl.v
}

// key returns the key of the view row of base row r (live: from its live cells only).
func (l *viewLink) key(pkVals [][]byte, r *row, live bool, now int64) viewKey {
	var pkBuf [4][]byte
	pk := pkBuf[:0]
	for _, c := range l.pk {
		if c == nil {
			return viewKey{}
		}
		v := baseValue(c, pkVals, r, live, now)
		if v == nil {
			return viewKey{}
		}
		pk = append(pk, v)
	}
	k := viewKey{pk: encodePK(pk), ok: true, nck: len(l.ck)}
	ck := k.ckBuf[:]
	if len(l.ck) > len(k.ckBuf) {
		k.ckHeap = make([][]byte, len(l.ck))
		ck = k.ckHeap
	}
	for i, c := range l.ck {
		if c == nil {
			return viewKey{}
		}
		if ck[i] = baseValue(c, pkVals, r, live, now); ck[i] == nil {
			return viewKey{}
		}
	}
	return k
}

// fill makes dst the view row of base row r: its cells, and a marker that keeps it alive
// as long as the base row (or, with a regular column in the view key, as that column's
// cell), expiring with them.
func (l *viewLink) fill(dst, r *row, now int64) {
	var capExp int64
	if l.keyCol != nil {
		kc := r.cell(l.keyCol.pos)
		dst.marker = liveness{ts: kc.ts, exp: kc.exp, ttl: kc.ttl}
		capExp = kc.exp
	} else {
		dst.marker = rowLiveness(r, now)
	}
	for i, bc := range l.cells {
		dst.cells[i] = cell{ts: noTS}
		if bc == nil {
			continue
		}
		if c := r.cell(bc.pos); c != nil && c.live(now) {
			dst.cells[i] = *c
			if capExp != 0 && (c.exp == 0 || c.exp > capExp) {
				dst.cells[i].exp, dst.cells[i].ttl = capExp, dst.marker.ttl
			}
		}
	}
}

// rowLiveness is how long base row r lives: the newest timestamp of its live marker and
// cells, and the latest of their expiries (none if one of them does not expire).
func rowLiveness(r *row, now int64) liveness {
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
		if c := &r.cells[i]; c.live(now) {
			add(c.ts, c.exp, c.ttl)
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
	partition
	ck    [2][]byte
	cells [6]cell
}

// smallViewPart is viewPart for a view of at most four cells (cassandra-stress's table keyed
// by a regular column has four): 416 bytes instead of 512, less for the collector to scan.
type smallViewPart struct {
	partition
	ck    [2][]byte
	cells [4]cell
}

// newViewPart returns a new view partition p with room inline for its first row's
// clustering values and n cells: that room.
func newViewPart(p partition, n int) (*partition, [][]byte, []cell) {
	if n <= 4 {
		vp := &smallViewPart{partition: p}
		return &vp.partition, vp.ck[:], vp.cells[:]
	}
	vp := &viewPart{partition: p}
	return &vp.partition, vp.ck[:], vp.cells[:]
}

// putRow stores the view row of base row r at key k of view l.v, replacing the row there.
// A new partition keeps its first row inline, as the base's do.
func (d *tableData) putRow(l *viewLink, k *viewKey, r *row, now int64) {
	v := l.v
	ck := k.ck()
	token := murmur3Token(k.pk)
	sh := d.shard(token)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.parts[string(k.pk)]
	var dst *row
	switch {
	case p == nil:
		var ckRoom [][]byte
		var cellRoom []cell
		p, ckRoom, cellRoom = newViewPart(partition{key: k.pk, token: token, del: noTS}, len(l.cells))
		sh.parts[unsafeString(k.pk)] = p
		d.version.Add(1)
		dst = &p.first // zero, but for these
		dst.del, dst.marker.ts = noTS, noTS
		if len(ck) <= len(ckRoom) {
			dst.ck = ckRoom[:len(ck):len(ck)]
			copy(dst.ck, ck)
		} else {
			dst.ck = slices.Clone(ck)
		}
		if len(l.cells) <= len(cellRoom) {
			dst.cells = cellRoom[:len(l.cells):len(l.cells)]
		} else {
			dst.cells = make([]cell, len(l.cells))
		}
		p.firstRef[0] = dst
		p.rows = p.firstRef[:]
	default:
		i, found := p.find(v, ck)
		if found {
			dst = p.rows[i] // its clustering values are ck's already
			dst.del = noTS
			if len(dst.cells) != len(l.cells) {
				dst.cells = make([]cell, len(l.cells))
			}
		} else {
			dst = newRow(slices.Clone(ck), len(l.cells))
			p.rows = slices.Insert(p.rows, i, dst)
		}
	}
	l.fill(dst, r, now)
}

// removeRow removes the row of clustering key ck from partition pk of a view, and the
// partition when it has no row left.
func (d *tableData) removeRow(v *table, pk []byte, ck [][]byte) {
	token := murmur3Token(pk)
	sh := d.shard(token)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.parts[string(pk)]
	if p == nil {
		return
	}
	if i, found := p.find(v, ck); found {
		p.rows = slices.Delete(p.rows, i, i+1)
	}
	if len(p.rows) == 0 {
		delete(sh.parts, string(pk))
		d.version.Add(1)
	}
}

// cellValue returns the value of col in a row of a partition, pkVals its partition key's
// values, if live at now. The caller holds the shard lock.
func cellValue(col *column, pkVals [][]byte, part *partition, row *row, now int64) []byte {
	switch col.kind {
	case kindPartitionKey:
		return pkVals[col.pos]
	case kindClustering:
		if row == nil {
			return nil
		}
		return row.ck[col.pos]
	case kindStatic:
		if part.static == nil {
			return nil
		}
		if c := part.static.cell(col.pos); c != nil && c.live(now) {
			return c.v
		}
		return nil
	}
	if row == nil {
		return nil
	}
	if c := row.cell(col.pos); c != nil && c.live(now) {
		return c.v
	}
	return nil
}
