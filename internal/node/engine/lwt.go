package engine

import (
	"bytes"
	"slices"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/storage"
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

// admitBatch refuses a batch with a write (not only DELETEs) when the engine's tables hold
// what its memory limit lets them (storage.Memory.Admit), before any statement applies.
func admitBatch(m *storage.Memory, steps []batchStep) error {
	for _, st := range steps {
		if w := writeOf(st.pl); w != nil && w.name != "DELETE" {
			return m.Admit()
		}
	}
	return nil
}

// runBatch runs a batch's statements; usingTS says that the batch has USING TIMESTAMP.
func (e *Engine) runBatch(x *execCtx, steps []batchStep, usingTS bool) (cql.Message, error) {
	if err := admitBatch(e.mem, steps); err != nil {
		return nil, err
	}
	conditional := false
	for _, st := range steps {
		if w := writeOf(st.pl); w != nil && w.cond != storage.CondNone {
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
	conds []storage.CondVal
}

func (e *Engine) casBatch(x *execCtx, steps []batchStep, usingTS bool) (cql.Message, error) {
	if usingTS {
		return nil, invalidf("Cannot provide custom timestamp for conditional BATCH")
	}
	t, pk, cas, err := casSteps(x, steps)
	if err != nil {
		return nil, err
	}
	if t.Dropped.Load() {
		return nil, invalidf("unconfigured table %s", t.Name)
	}
	t.CasMu.Lock()
	defer t.CasMu.Unlock()
	if failed := casCheck(t, pk, cas, x.seconds()); failed != nil {
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
	specs := []cql.ColumnSpec{{Keyspace: t.Ks, Table: t.Name, Name: "[applied]", Type: cql.TypeInfo{ID: cql.TypeBoolean}}}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: 1}, Rows: [][][]byte{{cqlvalue.EncBool(true)}}}, nil
}

// casSteps evaluates the statements of a conditional batch, which must all write one
// partition (pk) of one table (t) without a timestamp of their own, and returns the
// conditional ones with their conditions.
func casSteps(x *execCtx, steps []batchStep) (*storage.Table, []byte, []casStep, error) {
	var t *storage.Table
	var pk []byte
	var cas []casStep
	for _, st := range steps {
		w := writeOf(st.pl)
		if w == nil {
			return nil, nil, nil, invalidf("Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed")
		}
		if w.ts != nil {
			return nil, nil, nil, invalidf("Cannot provide custom timestamp for conditional updates")
		}
		if t == nil {
			t = w.t
		} else if w.t.TableStore != t.TableStore {
			return nil, nil, nil, invalidf("Batch with conditions cannot span multiple tables")
		}
		x.vals = st.vals
		stepPK, err := casPartition(x, st.pl, w)
		if err != nil {
			return nil, nil, nil, err
		}
		if pk == nil {
			pk = stepPK
		} else if !bytes.Equal(pk, stepPK) {
			return nil, nil, nil, invalidf("Batch with conditions cannot span multiple partitions")
		}
		if w.cond == storage.CondNone {
			continue
		}
		cs, err := casStepOf(x, w)
		if err != nil {
			return nil, nil, nil, err
		}
		cas = append(cas, cs)
	}
	return t, pk, cas, nil
}

// casPartition returns the one partition key that write w, statement pl of a conditional
// batch, writes with the values of x.
func casPartition(x *execCtx, pl plan, w *writePlan) ([]byte, error) {
	if j, ok := pl.(*jsonInsert); ok {
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
	return pks[0], nil
}

// casStepOf evaluates conditional write w with the values of x: the one row it writes (no
// clustering key for a static or partition-wide write) and its conditions.
func casStepOf(x *execCtx, w *writePlan) (casStep, error) {
	cs := casStep{w: w}
	if len(w.keys.ck) > 0 && !w.static {
		cks, err := product(w.keys.ck, x)
		if err != nil {
			return cs, err
		}
		if len(cks) != 1 {
			return cs, invalidf("IN on the clustering key columns is not supported with conditional updates")
		}
		cs.ck = cks[0]
	}
	var err error
	cs.conds, err = evalConds(cs.conds, w.conds, x)
	return cs, err
}

// casCheck checks the conditions of a conditional batch against partition pk of table t as
// it is, and returns casFailure's result when they do not all hold, else nil. The caller
// holds t.CasMu.
func casCheck(t *storage.Table, pk []byte, cas []casStep, now int64) cql.Message {
	sh := t.Data.Load().Shard(storage.Murmur3Token(pk))
	sh.Mu.RLock()
	defer sh.Mu.RUnlock()
	part := sh.Get(pk)
	holds := true
	for _, cs := range cas {
		if ok, _ := storage.CheckCond(t, part, cs.ck, cs.w.cond, cs.conds, now); !ok {
			holds = false
		}
	}
	if holds {
		return nil
	}
	return casFailure(t, part, cas, now)
}

// casFailure is the result of a conditional batch whose conditions do not all hold:
// [applied] = false beside each existing row the conditions read, in clustering order,
// with the primary key and the condition columns (every column if a statement has
// IF EXISTS or IF NOT EXISTS). The caller holds the shard lock.
func casFailure(t *storage.Table, part *storage.Partition, cas []casStep, now int64) cql.Message {
	wildcard := false
	var conds []storage.CondVal
	for _, cs := range cas {
		if cs.w.cond != storage.CondIf {
			wildcard = true
		}
		conds = append(conds, cs.conds...)
	}
	var cols []*storage.Column
	if wildcard {
		cols = t.Cols
	} else {
		cols = append(append(slices.Clone(t.Pk), t.Ck...), storage.CondColumns(conds)...)
	}
	specs := []cql.ColumnSpec{{Keyspace: t.Ks, Table: t.Name, Name: "[applied]", Type: cql.TypeInfo{ID: cql.TypeBoolean}}}
	for _, c := range cols {
		specs = append(specs, cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: c.Name, Type: c.Typ})
	}
	var cks [][][]byte
	for _, cs := range cas {
		if !slices.ContainsFunc(cks, func(ck [][]byte) bool { return storage.CompareCK(t, ck, cs.ck) == 0 && len(ck) == len(cs.ck) }) {
			cks = append(cks, cs.ck)
		}
	}
	slices.SortFunc(cks, func(a, b [][]byte) int { return storage.CompareCK(t, a, b) })
	var rows [][][]byte
	if part != nil {
		r := &selectRun{p: &selectPlan{t: t}, now: now}
		pkVals, _ := storage.DecodePK(part.Key, len(t.Pk))
		for _, ck := range cks {
			var row *storage.Row
			if ck == nil && len(t.Ck) == 0 && len(part.Rows) > 0 {
				row = part.Rows[0]
			} else if i, ok := part.Find(t, ck); ok && ck != nil {
				row = part.Rows[i]
			}
			if row == nil || !row.Live(now) {
				if !(ck == nil && part.Static != nil && part.Static.Live(now)) {
					continue
				}
				row = nil
			}
			out := [][]byte{cqlvalue.EncBool(false)}
			for _, c := range cols {
				out = append(out, r.value(c, pkVals, part, row))
			}
			rows = append(rows, out)
		}
	}
	if len(rows) == 0 {
		return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs[:1], ColumnCount: 1}, Rows: [][][]byte{{cqlvalue.EncBool(false)}}}
	}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: rows}
}
