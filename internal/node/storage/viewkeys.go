package storage

import "bytes"

// The keys of the view rows of a base row, which a write to the base reads before it
// changes the row (viewRead) and after (viewdata.go).

// viewKey is the key of a view row: its encoded partition key and clustering values (up
// to four in the key itself, so that a write's keys stay on its stack); ok is false when
// there is no view row (a key column is null).
type viewKey struct {
	pk     []byte
	ckBuf  [4][]byte
	nck    int
	ckHeap [][]byte // more than four clustering columns
	Ok     bool
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
func (t *Table) oldKeys(pkVals [][]byte, r *Row, now int64) []viewKey {
	keys := make([]viewKey, len(t.Views))
	for j, l := range t.Views {
		keys[j] = l.Key(pkVals, r, false, now)
	}
	return keys
}

// viewRead is what a write to one row of a base table reads for its views, in the lookup
// of the write itself: the view keys the row had before (when it existed: had) and the row.
// It lives on the writer's stack, with room for the keys of two views.
type viewRead struct {
	had  bool
	buf  [2]viewKey
	more []viewKey // the keys, when there are more views than buf holds
	row  *Row
}

// before reads the view keys of r, the row about to be written. The caller holds r's shard
// lock.
func (vr *viewRead) before(t *Table, pkVals [][]byte, r *Row, now int64) {
	vr.had, vr.row = true, r
	if len(t.Views) > len(vr.buf) {
		vr.more = make([]viewKey, len(t.Views))
	}
	for j, l := range t.Views {
		k := l.Key(pkVals, r, false, now)
		if vr.more != nil {
			vr.more[j] = k
		} else {
			vr.buf[j] = k
		}
	}
}

// baseValue returns the value of base column c in a row of partition key pkVals: a live
// cell's value when live, else any value the cell holds (for the key of a row to remove).
func baseValue(c *Column, pkVals [][]byte, r *Row, live bool, now int64) []byte {
	switch c.Kind {
	case KindPartitionKey:
		return pkVals[c.Pos]
	case KindClustering:
		return r.Ck[c.Pos]
	}
	cl := r.Cell(c.Pos)
	if cl == nil || cl.Ts == noTS || live && !cl.Live(now) {
		return nil
	}
	return cl.v
}

// key returns the key of the view row of base row r (live: from its live cells only).
func (l *ViewLink) Key(pkVals [][]byte, r *Row, live bool, now int64) viewKey {
	var pkBuf [4][]byte
	pk := pkBuf[:0]
	for _, c := range l.Pk {
		if c == nil {
			return viewKey{}
		}
		v := baseValue(c, pkVals, r, live, now)
		if v == nil {
			return viewKey{}
		}
		pk = append(pk, v)
	}
	k := viewKey{pk: EncodePK(pk), Ok: true, nck: len(l.Ck)}
	ck := k.ckBuf[:]
	if len(l.Ck) > len(k.ckBuf) {
		k.ckHeap = make([][]byte, len(l.Ck))
		ck = k.ckHeap
	}
	for i, c := range l.Ck {
		if c == nil {
			return viewKey{}
		}
		if ck[i] = baseValue(c, pkVals, r, live, now); ck[i] == nil {
			return viewKey{}
		}
	}
	return k
}
