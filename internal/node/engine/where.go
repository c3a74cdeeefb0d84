package engine

import (
	"slices"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The WHERE clause: its relations compiled into restrictions by column (colRestr), and at
// execution the key values and the clustering filters they restrict reads and deletes to.

// whereInfo is an analyzed WHERE clause.
type whereInfo struct {
	pk      []*colRestr // by partition key position; nil when unrestricted
	ck      []*colRestr // by clustering position
	regular []*colRestr
	token   *colRestr // token(pk...) range, with col nil
}

// where analyzes a WHERE clause on t: each relation compiled, and gathered by column.
func (c *compiler) where(t *storage.Table, rels []grammar.Relation) (*whereInfo, error) {
	w := &whereInfo{pk: make([]*colRestr, len(t.Pk)), ck: make([]*colRestr, len(t.Ck))}
	byCol := map[string]*colRestr{}
	for _, r := range rels {
		if r.Token {
			if err := c.tokenRelation(w, t, r); err != nil {
				return nil, err
			}
			continue
		}
		col, err := columnOf(t, r.Col)
		if err != nil {
			return nil, err
		}
		cr := byCol[col.Name]
		if cr == nil {
			cr = w.restriction(col)
			byCol[col.Name] = cr
		}
		if err := c.relation(cr, t, r); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// restriction adds to w the restrictions of col, in its place: by key position, or with
// the other columns.
func (w *whereInfo) restriction(col *storage.Column) *colRestr {
	cr := &colRestr{col: col}
	switch col.Kind {
	case storage.KindPartitionKey:
		w.pk[col.Pos] = cr
	case storage.KindClustering:
		w.ck[col.Pos] = cr
	default:
		w.regular = append(w.regular, cr)
	}
	return cr
}

// tokenRelation compiles a relation on token(pk…), of the partition key columns in their
// order, into w's token range.
func (c *compiler) tokenRelation(w *whereInfo, t *storage.Table, r grammar.Relation) error {
	if len(r.Cols) != len(t.Pk) {
		return invalidf("The token function arguments must be the partition key columns in order")
	}
	for i, n := range r.Cols {
		if n != t.Pk[i].Name {
			return invalidf("The token function arguments must be in the partition key order: %s", t.Pk[i].Name)
		}
	}
	if w.token == nil {
		w.token = &colRestr{}
	}
	spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: "partition key token", Type: cql.TypeInfo{ID: cql.TypeBigint}}
	x, err := c.compileTerm(r.Val, spec.Type, spec)
	if err != nil {
		return err
	}
	switch r.Op {
	case grammar.OpGt, grammar.OpGe:
		w.token.lo, w.token.loIncl = x, r.Op == grammar.OpGe
	case grammar.OpLt, grammar.OpLe:
		w.token.hi, w.token.hiIncl = x, r.Op == grammar.OpLe
	case grammar.OpEq:
		w.token.lo, w.token.hi, w.token.loIncl, w.token.hiIncl = x, x, true, true
	default:
		return invalidf("Unsupported operator %s on token()", grammar.RelOpNames[r.Op])
	}
	return nil
}

// relation compiles the relation r on the column of cr into cr: = and IN, a bound of a
// range, or an operator answered by filtering.
func (c *compiler) relation(cr *colRestr, t *storage.Table, r grammar.Relation) error {
	col := cr.col
	spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: col.Name, Type: col.Typ}
	switch r.Op {
	case grammar.OpEq:
		if cr.isEq() {
			return invalidf("%s cannot be restricted by more than one relation if it includes an Equal", col.Name)
		}
		x, err := c.compileTerm(r.Val, col.Typ, spec)
		cr.eq = x
		return err
	case grammar.OpIn:
		if cr.isEq() {
			return invalidf("%s cannot be restricted by more than one relation if it includes a IN", col.Name)
		}
		return c.inRelation(cr, r, spec)
	case grammar.OpLt, grammar.OpLe, grammar.OpGt, grammar.OpGe:
		return c.sliceRelation(cr, r, spec)
	}
	return c.filteredRelation(cr, r, spec)
}

// inRelation compiles IN (a, b…), each value of the column's type, or IN ?, a list of them.
func (c *compiler) inRelation(cr *colRestr, r grammar.Relation, spec cql.ColumnSpec) error {
	col := cr.col
	if r.Vals == nil {
		s := spec
		s.Name = "in(" + col.Name + ")"
		x, err := c.compileTerm(r.Val, cql.ListOf(col.Typ), s)
		cr.inMarker = x
		return err
	}
	cr.in = []*expr{}
	for _, v := range r.Vals {
		x, err := c.compileTerm(v, col.Typ, spec)
		if err != nil {
			return err
		}
		cr.in = append(cr.in, x)
	}
	return nil
}

// sliceRelation compiles a bound of a range (<, <=, >, >=), at most one of each end.
func (c *compiler) sliceRelation(cr *colRestr, r grammar.Relation, spec cql.ColumnSpec) error {
	col := cr.col
	if cqlvalue.ReferencesDuration(col.Typ) {
		return invalidf("Slice restrictions are not supported on duration columns")
	}
	x, err := c.compileTerm(r.Val, col.Typ, spec)
	if err != nil {
		return err
	}
	if r.Op == grammar.OpGt || r.Op == grammar.OpGe {
		if cr.lo != nil {
			return invalidf("More than one restriction was found for the start bound on %s", col.Name)
		}
		cr.lo, cr.loIncl = x, r.Op == grammar.OpGe
		return nil
	}
	if cr.hi != nil {
		return invalidf("More than one restriction was found for the end bound on %s", col.Name)
	}
	cr.hi, cr.hiIncl = x, r.Op == grammar.OpLe
	return nil
}

// filteredRelation checks a relation that only filtering answers (!=, CONTAINS, CONTAINS
// KEY, m[k] = v), compiling its terms for their markers' metadata, and keeps it in
// cr.others; addFilters compiles it again into a row filter.
func (c *compiler) filteredRelation(cr *colRestr, r grammar.Relation, spec cql.ColumnSpec) error {
	col := cr.col
	typ := col.Typ
	switch r.Op {
	case grammar.OpContains:
		if !cqlvalue.IsCollection(col.Typ) {
			return invalidf("Cannot use CONTAINS on non-collection column %s", col.Name)
		}
		typ = cqlvalue.ElemType(col.Typ)
	case grammar.OpContainsKey:
		if col.Typ.ID != cql.TypeMap {
			return invalidf("Cannot use CONTAINS KEY on non-map column %s", col.Name)
		}
		typ = cqlvalue.KeyType(col.Typ)
	case grammar.OpMapEq:
		if col.Typ.ID != cql.TypeMap || col.Frozen {
			return invalidf("Column \"%s\" cannot be used as a map", col.Name)
		}
		ks := spec
		ks.Name, ks.Type = "key("+col.Name+")", cqlvalue.KeyType(col.Typ)
		if _, err := c.compileTerm(r.Key, ks.Type, ks); err != nil {
			return err
		}
		typ = cqlvalue.ElemType(col.Typ)
		spec.Name = "value(" + col.Name + ")"
	}
	spec.Type = typ
	if _, err := c.compileTerm(r.Val, typ, spec); err != nil {
		return err
	}
	cr.others = append(cr.others, r)
	return nil
}

// values returns the sorted, deduplicated values of an = or IN restriction.
func (r *colRestr) values(x *execCtx) ([][]byte, error) {
	name := r.col.Name
	switch {
	case r.eq != nil:
		b, err := boundValue(r.eq, name, x)
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	case r.inMarker != nil:
		b, err := boundValue(r.inMarker, name, x)
		if err != nil {
			return nil, err
		}
		elems, ok := cqlvalue.DecCollection(b, 1)
		if !ok {
			return nil, invalidf("Invalid list value for IN on %s", name)
		}
		for _, e := range elems {
			if e == nil {
				return nil, invalidf("Invalid null value in condition for column %s", name)
			}
			if err := cqlvalue.Validate(r.col.Typ, e, name); err != nil {
				return nil, err
			}
		}
		return sortDedupe(r.col.Typ, elems), nil
	}
	out := make([][]byte, 0, len(r.in))
	for _, e := range r.in {
		b, err := boundValue(e, name, x)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return sortDedupe(r.col.Typ, out), nil
}

// sortDedupe sorts vals of type t and drops the repeated ones, in place.
func sortDedupe(t cql.TypeInfo, vals [][]byte) [][]byte {
	if len(vals) < 2 {
		return vals
	}
	slices.SortStableFunc(vals, func(a, b []byte) int { return cqlvalue.CompareValues(t, a, b) })
	out := vals[:1]
	for _, v := range vals[1:] {
		if cqlvalue.CompareValues(t, out[len(out)-1], v) != 0 {
			out = append(out, v)
		}
	}
	return out
}

// product returns the cartesian product of the restrictions' values.
func product(rs []*colRestr, x *execCtx) ([][][]byte, error) {
	combos := [][][]byte{{}}
	for _, r := range rs {
		vals, err := r.values(x)
		if err != nil {
			return nil, err
		}
		next := make([][][]byte, 0, len(combos)*len(vals))
		for _, c := range combos {
			for _, v := range vals {
				n := make([][]byte, len(c), len(c)+1)
				copy(n, c)
				next = append(next, append(n, v))
			}
		}
		combos = next
		if len(combos) > 10000 {
			return nil, invalidf("IN restrictions produce too many combinations (%d)", len(combos))
		}
	}
	return combos, nil
}

// setPKIndexes records the bind markers that make the partition key, when all of them are
// single markers.
func (c *compiler) setPKIndexes(t *storage.Table, pk []*colRestr) {
	idx := make([]uint16, 0, len(pk))
	for _, r := range pk {
		if r == nil || r.eq == nil || r.eq.kind != exBind {
			return
		}
		idx = append(idx, uint16(r.eq.idx))
	}
	c.pkIndexes = idx
}

// ckFilterFor builds the clustering filters of an equality prefix (one per IN combination)
// plus a range on the next column.
func ckFilterFor(t *storage.Table, w *whereInfo, eq []*colRestr, x *execCtx) (*storage.CkFilter, error) {
	fs, err := ckFilters(t, eq, rangeOf(w, len(eq)), x, false)
	if err != nil || len(fs) == 0 {
		return nil, err
	}
	return fs[0], nil
}

// rangeOf is the restriction of w on clustering column i when it is a range, else nil.
func rangeOf(w *whereInfo, i int) *colRestr {
	if i < len(w.ck) && w.ck[i].isRange() {
		return w.ck[i]
	}
	return nil
}

// ckFilters builds the clustering filters of an equality prefix eq, one per combination
// of its IN values, each bounded by the range rng on the next column, if any.
func ckFilters(t *storage.Table, eq []*colRestr, rng *colRestr, x *execCtx, reverse bool) ([]*storage.CkFilter, error) {
	var lo, hi *storage.CkBound
	if rng != nil {
		if rng.lo != nil {
			b, err := boundValue(rng.lo, rng.col.Name, x)
			if err != nil {
				return nil, err
			}
			lo = &storage.CkBound{Vals: [][]byte{b}, Inclusive: rng.loIncl}
		}
		if rng.hi != nil {
			b, err := boundValue(rng.hi, rng.col.Name, x)
			if err != nil {
				return nil, err
			}
			hi = &storage.CkBound{Vals: [][]byte{b}, Inclusive: rng.hiIncl}
		}
	}
	if len(eq) == 0 {
		if lo == nil && hi == nil {
			return nil, nil
		}
		return []*storage.CkFilter{{Lo: lo, Hi: hi, RangeCol: 0}}, nil
	}
	combos, err := product(eq, x)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(combos, func(a, b [][]byte) int { return storage.CompareCK(t, a, b) })
	if reverse {
		slices.Reverse(combos)
	}
	out := make([]*storage.CkFilter, len(combos))
	for i, c := range combos {
		out[i] = &storage.CkFilter{Eq: c, Lo: lo, Hi: hi, RangeCol: len(eq)}
	}
	return out, nil
}

// boundValue evaluates e, a value that restricts column col (of = or IN, or a bound of a
// range): it must be set, and not null.
func boundValue(e *expr, col string, x *execCtx) ([]byte, error) {
	b, unset, err := e.eval(x)
	if err != nil {
		return nil, err
	}
	if unset {
		return nil, invalidf("Invalid unset value for column %s", col)
	}
	if b == nil {
		return nil, invalidf("Invalid null value in condition for column %s", col)
	}
	return b, nil
}
