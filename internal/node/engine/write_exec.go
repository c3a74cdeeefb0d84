package engine

import (
	"strconv"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// A write's execution: its keys and cell operations evaluated, its timestamp and TTL, its
// conditions checked, the mutation applied to the table (and its views), and the result of
// a conditional write.

func (p *writePlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	t := p.t
	if t.Dropped.Load() {
		return nil, invalidf("unconfigured table %s", t.Name)
	}
	if p.name != "DELETE" && !x.batch { // a batch's statements are admitted with it (admitBatch)
		if err := e.mem.Admit(); err != nil {
			return nil, err
		}
	}
	cond := p.cond
	if x.noCond {
		cond = storage.CondNone // a conditional batch checked the conditions already
	}
	if cond != storage.CondNone {
		// Conditional writes of a table, batches of them included, are serialized, as
		// Paxos orders the LWTs of a partition.
		t.CasMu.Lock()
		defer t.CasMu.Unlock()
	}
	now := x.seconds()
	m := storage.Mutation{Marker: p.marker}
	if err := p.timing(e, x, &m, now); err != nil {
		return nil, err
	}
	var onePK [1][]byte
	pks, cks, err := p.keysOf(x, &onePK)
	if err != nil {
		return nil, err
	}
	// Evaluate the cell operations once, into an owned buffer with the keys.
	var opsBuf [8]storage.CellOp
	ops, size, err := p.evalOps(x, opsBuf[:0])
	if err != nil {
		return nil, err
	}
	for _, pk := range pks {
		size += len(pk)
	}
	for _, ck := range cks {
		for _, v := range ck {
			size += len(v)
		}
	}
	o := owner{buf: make([]byte, 0, size)}
	for i := range ops {
		ops[i].V = o.own(ops[i].V)
		ops[i].Key = o.own(ops[i].Key)
	}
	if p.del && p.ckRange != nil {
		f, err := ckFilterFor(t, p.ckRange, p.keys.ck, x)
		if err != nil {
			return nil, err
		}
		m.DelRange = f
	}
	if m.Conds, err = evalConds(nil, p.conds, x); err != nil {
		return nil, err
	}
	m.Cond = cond
	w, err := p.apply(&m, pks, cks, ops, &o, now)
	if err != nil {
		return nil, err
	}
	if x.tr != nil {
		if w.applied {
			x.tr.Event("Applied " + strconv.Itoa(w.mutations) + " mutations to " + t.Name)
		} else {
			x.tr.Event("Condition not met on " + t.Name + ": " + strconv.Itoa(w.mutations) + " mutations applied")
		}
	}
	if cond != storage.CondNone {
		return p.lwtResult(w, m.Conds), nil
	}
	return cql.VoidResult{}, nil
}

// owner copies the values a write keeps into one buffer, sized beforehand.
type owner struct{ buf []byte }

func (o *owner) own(b []byte) []byte {
	if b == nil {
		return nil
	}
	s := len(o.buf)
	o.buf = append(o.buf, b...)
	return o.buf[s:len(o.buf):len(o.buf)]
}

// timing sets the write's timestamp (USING TIMESTAMP, else the engine's clock) and its TTL
// (USING TTL, else the table's default) into m.
func (p *writePlan) timing(e *Engine, x *execCtx, m *storage.Mutation, now int64) error {
	ts, ok, err := evalTimestamp(p.ts, x)
	if err != nil {
		return err
	}
	if !ok {
		ts = e.timestamp(x)
	}
	m.Ts = ts
	ttl := p.t.Ttl
	if p.ttl != nil {
		b, unset, err := p.ttl.eval(x)
		if err != nil {
			return err
		}
		if !unset && b != nil {
			v, ok := cqlvalue.Int32Value(b)
			if !ok {
				return invalidf("Invalid TTL value")
			}
			if v < 0 {
				return invalidf("A TTL must be greater or equal to 0, but was %d", v)
			}
			if v > storage.MaxTTL {
				return invalidf("ttl is too large. requested (%d) maximum (%d)", v, storage.MaxTTL)
			}
			ttl = v
		}
	}
	if ttl > 0 {
		m.Ttl, m.Exp = ttl, now+int64(ttl)
	}
	return nil
}

// noClustering is the clustering keys of a write to a table without clustering columns (or
// to a partition): one, nil. Read only.
var noClustering = [][][]byte{nil}

// keysOf returns the partition keys and the clustering keys (one nil one when the table
// has none) the write's WHERE clause names.
func (p *writePlan) keysOf(x *execCtx, onePK *[1][]byte) (pks [][]byte, cks [][][]byte, err error) {
	if pks, err = p.keys.partitionKeys(x, onePK); err != nil {
		return nil, nil, err
	}
	if len(p.keys.ck) == 0 {
		return pks, noClustering, nil
	}
	if cks, err = product(p.keys.ck, x); err != nil {
		return nil, nil, err
	}
	return pks, cks, nil
}

// evalOps appends to ops the write's cell operations, their values bound, and returns the
// bytes their values and keys take.
func (p *writePlan) evalOps(x *execCtx, ops []storage.CellOp) ([]storage.CellOp, int, error) {
	t, size := p.t, 0
	for i := range p.ops {
		o := &p.ops[i]
		op := storage.CellOp{Pos: o.pos, Kind: o.kind, Field: uint16(o.field)}
		if o.val != nil {
			b, unset, err := o.val.eval(x)
			if err != nil {
				return nil, 0, err
			}
			if unset {
				continue
			}
			if o.kind != storage.CellSet && o.kind != storage.CellSetKey && o.kind != storage.CellSetField && b == nil {
				return nil, 0, invalidf("Invalid null value for %s operation on %s", p.name, t.Cells[o.pos].Name)
			}
			if o.neg {
				v, ok := cqlvalue.Int64Value(b)
				if !ok {
					return nil, 0, invalidf("Invalid counter increment")
				}
				b = cqlvalue.EncBigint(-v)
			}
			op.V = b
		}
		if o.key != nil {
			b, unset, err := o.key.eval(x)
			if err != nil {
				return nil, 0, err
			}
			if unset || b == nil {
				return nil, 0, invalidf("Invalid null value for %s key", t.Cells[o.pos].Name)
			}
			op.Key = b
		}
		size += len(op.V) + len(op.Key)
		ops = append(ops, op)
	}
	return ops, size, nil
}

// written is what a write did: whether its condition held (and the row it found when
// not), and how many rows, ranges or partitions it wrote to the in-memory store.
type written struct {
	applied   bool
	existing  [][]byte
	mutations int
}

// apply applies m, with ops, to each row of the partitions pks and clustering keys cks,
// their keys owned by o.
func (p *writePlan) apply(m *storage.Mutation, pks [][]byte, cks [][][]byte, ops []storage.CellOp, o *owner, now int64) (written, error) {
	t := p.t
	w := written{applied: true}
	d := t.Data.Load()
	for _, pk := range pks {
		m.Pk = o.own(pk)
		m.Token = storage.Murmur3Token(m.Pk)
		for _, ck := range cks {
			if ck != nil && !p.static {
				owned := make([][]byte, len(ck))
				for i, v := range ck {
					owned[i] = o.own(v)
				}
				m.Ck = owned
			} else {
				m.Ck = nil
			}
			switch {
			case p.del && m.DelRange == nil && (ck == nil || len(ck) < len(t.Ck)):
				if ck == nil || len(ck) == 0 {
					m.DelPartition = true
				} else {
					m.DelRange = &storage.CkFilter{Eq: m.Ck}
					m.Ck = nil
				}
			case p.del && m.DelRange == nil:
				m.DelRow = true
			}
			var err error
			if len(t.Views) == 0 {
				err = d.Apply(t, m, ops, now)
			} else {
				err = t.ApplyWithViews(d, m, ops, now)
			}
			if err != nil {
				return w, err
			}
			if !m.Applied {
				w.applied = false
				w.existing = m.Existing
			} else {
				w.mutations++
			}
			if p.del && m.DelRange != nil && p.ckRange == nil {
				m.DelRange = nil
			}
		}
	}
	return w, nil
}

// lwtResult is a conditional write's result: [applied], and the row found when the
// condition did not hold.
func (p *writePlan) lwtResult(w written, condVals []storage.CondVal) cql.Message {
	t := p.t
	row := [][]byte{cqlvalue.EncBool(w.applied)}
	specs := p.lwtSpecs
	if !w.applied && w.existing != nil {
		row = append(row, w.existing...)
		specs = append([]cql.ColumnSpec{}, specs...)
		if p.cond == storage.CondIf {
			for _, col := range storage.CondColumns(condVals) {
				specs = append(specs, cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: col.Name, Type: col.Typ})
			}
		} else {
			specs = append(specs, t.StarSpecs...)
		}
	}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: [][][]byte{row}}
}

// evalTimestamp evaluates a USING TIMESTAMP term; ok is false when there is none, or its
// bound value is unset or null.
func evalTimestamp(t *expr, x *execCtx) (ts int64, ok bool, err error) {
	if t == nil {
		return 0, false, nil
	}
	b, unset, err := t.eval(x)
	if err != nil || unset || b == nil {
		return 0, false, err
	}
	v, ok := cqlvalue.Int64Value(b)
	if !ok {
		return 0, false, invalidf("Invalid timestamp value")
	}
	return v, true, nil
}

// partitionKeys returns every partition key addressed (a cartesian product for IN). A single
// key is returned in one, the caller's, so that the common write allocates no slice for it.
func (k *keyPlan) partitionKeys(x *execCtx, one *[1][]byte) ([][]byte, error) {
	if len(k.pk) == 1 && k.pk[0].eq != nil {
		b, err := boundValue(k.pk[0].eq, k.pk[0].col.Name, x)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, invalidf("Key may not be empty")
		}
		if len(b) > maxKeyLen {
			return nil, invalidf("Key length of %d is longer than maximum of %d", len(b), maxKeyLen)
		}
		one[0] = b
		return one[:], nil
	}
	combos, err := product(k.pk, x)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(combos))
	for i, c := range combos {
		for _, v := range c {
			if len(v) > maxKeyLen {
				return nil, invalidf("Key length of %d is longer than maximum of %d", len(v), maxKeyLen)
			}
		}
		out[i] = storage.EncodePK(c)
		if len(out[i]) == 0 {
			return nil, invalidf("Key may not be empty")
		}
	}
	return out, nil
}

// evalConds appends to vals the values of the conditions conds (IF col op value, or IN a
// list) for the execution x.
func evalConds(vals []storage.CondVal, conds []condition, x *execCtx) ([]storage.CondVal, error) {
	for _, cd := range conds {
		cv := storage.CondVal{Col: cd.col, Op: cd.op}
		if cd.val != nil {
			b, unset, err := cd.val.eval(x)
			if err != nil {
				return nil, err
			}
			if unset {
				return nil, invalidf("Invalid unset value for column %s", cd.col.Name)
			}
			cv.V = b
		}
		for _, v := range cd.vals {
			b, _, err := v.eval(x)
			if err != nil {
				return nil, err
			}
			cv.List = append(cv.List, b)
		}
		vals = append(vals, cv)
	}
	return vals, nil
}

func (p *jsonInsert) exec(e *Engine, x *execCtx) (cql.Message, error) {
	if err := p.load(x); err != nil {
		return nil, err
	}
	return p.w.exec(e, x)
}

// load puts the JSON's values in x.
func (p *jsonInsert) load(x *execCtx) error {
	if p.vals != nil {
		x.json, x.jsonUnset = p.vals, p.unset
		return nil
	}
	b, unset, err := p.text.eval(x)
	if err != nil {
		return err
	}
	if b == nil || unset {
		return invalidf("Got null for INSERT JSON values")
	}
	x.json, x.jsonUnset, err = jsonValues(p.w.t, string(b), p.unsetDefault)
	return err
}

// maxKeyLen is the longest partition key (or key component) Cassandra accepts.
const maxKeyLen = 65535
