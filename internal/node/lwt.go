package node

import (
	"bytes"
	"slices"

	"github.com/tracecar/tracecar/internal/cql"
)

// Batches, and lightweight transactions in them: a conditional batch checks every
// condition against the partition as it is before the batch, then applies all of its
// statements or none, as Cassandra's BatchStatement.executeWithConditions.

// batchStep is one statement of a batch with its bound values.
type batchStep struct {
	pl   plan
	vals []cql.Value
}

// writeOf returns the write a batch statement is, or nil.
func writeOf(pl plan) *writePlan {
	switch p := pl.(type) {
	case *writePlan:
		return p
	case *jsonInsert:
		return p.w
	}
	return nil
}

// runBatch runs a batch's statements; usingTS says that the batch has USING TIMESTAMP.
func (e *Engine) runBatch(x *execCtx, steps []batchStep, usingTS bool) (cql.Message, error) {
	if err := e.mem.admitBatch(steps); err != nil {
		return nil, err
	}
	conditional := false
	for _, st := range steps {
		if w := writeOf(st.pl); w != nil && w.cond != condNone {
			conditional = true
		}
	}
	if conditional {
		return e.casBatch(x, steps, usingTS)
	}
	for _, st := range steps {
		x.vals = st.vals
		if _, err := st.pl.exec(e, x); err != nil {
			return nil, err
		}
	}
	return cql.VoidResult{}, nil
}

// casStep is a conditional statement of a batch, evaluated.
type casStep struct {
	w     *writePlan
	ck    [][]byte
	conds []condVal
}

func (e *Engine) casBatch(x *execCtx, steps []batchStep, usingTS bool) (cql.Message, error) {
	if usingTS {
		return nil, invalidf("Cannot provide custom timestamp for conditional BATCH")
	}
	var t *table
	var pk []byte
	var cas []casStep
	for _, st := range steps {
		w := writeOf(st.pl)
		if w == nil {
			return nil, invalidf("Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed")
		}
		if w.ts != nil {
			return nil, invalidf("Cannot provide custom timestamp for conditional updates")
		}
		if t == nil {
			t = w.t
		} else if w.t.tableStore != t.tableStore {
			return nil, invalidf("Batch with conditions cannot span multiple tables")
		}
		x.vals = st.vals
		if j, ok := st.pl.(*jsonInsert); ok {
			if err := j.load(x); err != nil {
				return nil, err
			}
		}
		var onePK [1][]byte
		pks, err := w.keys.partitionKeys(x, &onePK)
		if err != nil {
			return nil, err
		}
		if len(pks) != 1 {
			return nil, invalidf("IN on the partition key is not supported with conditional updates")
		}
		if pk == nil {
			pk = pks[0]
		} else if !bytes.Equal(pk, pks[0]) {
			return nil, invalidf("Batch with conditions cannot span multiple partitions")
		}
		if w.cond == condNone {
			continue
		}
		cs := casStep{w: w}
		if len(w.keys.ck) > 0 && !w.static {
			cks, err := product(w.keys.ck, x)
			if err != nil {
				return nil, err
			}
			if len(cks) != 1 {
				return nil, invalidf("IN on the clustering key columns is not supported with conditional updates")
			}
			cs.ck = cks[0]
		}
		if cs.conds, err = evalConds(cs.conds, w.conds, x); err != nil {
			return nil, err
		}
		cas = append(cas, cs)
	}
	if t.dropped.Load() {
		return nil, invalidf("unconfigured table %s", t.name)
	}
	t.casMu.Lock()
	defer t.casMu.Unlock()
	now := x.seconds()
	d := t.data.Load()
	sh := d.shard(murmur3Token(pk))
	sh.mu.RLock()
	part := sh.get(pk)
	holds := true
	for _, cs := range cas {
		if ok, _ := checkCond(t, part, cs.ck, cs.w.cond, cs.conds, now); !ok {
			holds = false
		}
	}
	var failed cql.Message
	if !holds {
		failed = casFailure(t, part, cas, now)
	}
	sh.mu.RUnlock()
	if !holds {
		return failed, nil
	}
	x.noCond = true
	defer func() { x.noCond = false }()
	x.ts = e.timestamp(&execCtx{now: x.now})
	for _, st := range steps {
		x.vals = st.vals
		if _, err := st.pl.exec(e, x); err != nil {
			return nil, err
		}
	}
	specs := []cql.ColumnSpec{{Keyspace: t.ks, Table: t.name, Name: "[applied]", Type: cql.TypeInfo{ID: cql.TypeBoolean}}}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: 1}, Rows: [][][]byte{{encBool(true)}}}, nil
}

// casFailure is the result of a conditional batch whose conditions do not all hold:
// [applied] = false beside each existing row the conditions read, in clustering order,
// with the primary key and the condition columns (every column if a statement has
// IF EXISTS or IF NOT EXISTS). The caller holds the shard lock.
func casFailure(t *table, part *partition, cas []casStep, now int64) cql.Message {
	wildcard := false
	var conds []condVal
	for _, cs := range cas {
		if cs.w.cond != condIf {
			wildcard = true
		}
		conds = append(conds, cs.conds...)
	}
	var cols []*column
	if wildcard {
		cols = t.cols
	} else {
		cols = append(append(slices.Clone(t.pk), t.ck...), condColumns(conds)...)
	}
	specs := []cql.ColumnSpec{{Keyspace: t.ks, Table: t.name, Name: "[applied]", Type: cql.TypeInfo{ID: cql.TypeBoolean}}}
	for _, c := range cols {
		specs = append(specs, cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: c.name, Type: c.typ})
	}
	var cks [][][]byte
	for _, cs := range cas {
		if !slices.ContainsFunc(cks, func(ck [][]byte) bool { return compareCK(t, ck, cs.ck) == 0 && len(ck) == len(cs.ck) }) {
			cks = append(cks, cs.ck)
		}
	}
	slices.SortFunc(cks, func(a, b [][]byte) int { return compareCK(t, a, b) })
	var rows [][][]byte
	if part != nil {
		r := &selectRun{p: &selectPlan{t: t}, now: now}
		pkVals, _ := decodePK(part.key, len(t.pk))
		for _, ck := range cks {
			var row *row
			if ck == nil && len(t.ck) == 0 && len(part.rows) > 0 {
				row = part.rows[0]
			} else if i, ok := part.find(t, ck); ok && ck != nil {
				row = part.rows[i]
			}
			if row == nil || !row.live(now) {
				if !(ck == nil && part.static != nil && part.static.live(now)) {
					continue
				}
				row = nil
			}
			out := [][]byte{encBool(false)}
			for _, c := range cols {
				out = append(out, r.value(c, pkVals, part, row))
			}
			rows = append(rows, out)
		}
	}
	if len(rows) == 0 {
		return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs[:1], ColumnCount: 1}, Rows: [][][]byte{{encBool(false)}}}
	}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: rows}
}
