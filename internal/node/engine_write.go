package node

import (
	"slices"
	"unsafe"

	"github.com/tracecar/tracecar/internal/cql"
)

// maxKeyLen is the longest partition key (or key component) Cassandra accepts.
const maxKeyLen = 65535

// maxTTL is Cassandra's limit, 20 years.
const maxTTL = 20 * 365 * 24 * 60 * 60

// colRestr collects the restrictions of a WHERE clause on one column.
type colRestr struct {
	col      *column
	eq       *expr
	in       []*expr
	inMarker *expr // IN ? bound to a list
	lo, hi   *expr
	loIncl   bool
	hiIncl   bool
	others   []relation // operators handled by filtering: !=, CONTAINS...
}

func (r *colRestr) isEq() bool { return r != nil && (r.eq != nil || r.in != nil || r.inMarker != nil) }

func (r *colRestr) isRange() bool { return r != nil && (r.lo != nil || r.hi != nil) }

// values returns the sorted, deduplicated values of an = or IN restriction.
func (r *colRestr) values(x *execCtx) ([][]byte, error) {
	name := r.col.name
	one := func(e *expr) ([]byte, error) {
		b, unset, err := e.eval(x)
		if err != nil {
			return nil, err
		}
		if unset {
			return nil, invalidf("Invalid unset value for column %s", name)
		}
		if b == nil {
			return nil, invalidf("Invalid null value in condition for column %s", name)
		}
		return b, nil
	}
	switch {
	case r.eq != nil:
		b, err := one(r.eq)
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	case r.inMarker != nil:
		b, err := one(r.inMarker)
		if err != nil {
			return nil, err
		}
		elems, ok := decCollection(b, 1)
		if !ok {
			return nil, invalidf("Invalid list value for IN on %s", name)
		}
		for _, e := range elems {
			if e == nil {
				return nil, invalidf("Invalid null value in condition for column %s", name)
			}
			if err := validate(r.col.typ, e, name); err != nil {
				return nil, err
			}
		}
		return sortDedupe(r.col.typ, elems), nil
	}
	out := make([][]byte, 0, len(r.in))
	for _, e := range r.in {
		b, err := one(e)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return sortDedupe(r.col.typ, out), nil
}

func sortDedupe(t cql.TypeInfo, vals [][]byte) [][]byte {
	if len(vals) < 2 {
		return vals
	}
	sortBytes(vals, func(a, b []byte) int { return compareValues(t, a, b) })
	out := vals[:1]
	for _, v := range vals[1:] {
		if compareValues(t, out[len(out)-1], v) != 0 {
			out = append(out, v)
		}
	}
	return out
}

func sortBytes(v [][]byte, cmp func(a, b []byte) int) {
	// Insertion sort: IN lists are short.
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && cmp(v[j-1], v[j]) > 0; j-- {
			v[j-1], v[j] = v[j], v[j-1]
		}
	}
}

// whereInfo is an analyzed WHERE clause.
type whereInfo struct {
	pk      []*colRestr // by partition key position; nil when unrestricted
	ck      []*colRestr // by clustering position
	regular []*colRestr
	token   *colRestr // token(pk...) range, with col nil
}

func (c *compiler) where(t *table, rels []relation) (*whereInfo, error) {
	w := &whereInfo{pk: make([]*colRestr, len(t.pk)), ck: make([]*colRestr, len(t.ck))}
	byCol := map[string]*colRestr{}
	for _, r := range rels {
		if r.token {
			if len(r.cols) != len(t.pk) {
				return nil, invalidf("The token function arguments must be the partition key columns in order")
			}
			for i, n := range r.cols {
				if n != t.pk[i].name {
					return nil, invalidf("The token function arguments must be in the partition key order: %s", t.pk[i].name)
				}
			}
			if w.token == nil {
				w.token = &colRestr{}
			}
			spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: "partition key token", Type: cql.TypeInfo{ID: cql.TypeBigint}}
			x, err := c.compileTerm(r.val, spec.Type, spec)
			if err != nil {
				return nil, err
			}
			switch r.op {
			case opGt, opGe:
				w.token.lo, w.token.loIncl = x, r.op == opGe
			case opLt, opLe:
				w.token.hi, w.token.hiIncl = x, r.op == opLe
			case opEq:
				w.token.lo, w.token.hi, w.token.loIncl, w.token.hiIncl = x, x, true, true
			default:
				return nil, invalidf("Unsupported operator %s on token()", relOpNames[r.op])
			}
			continue
		}
		col := t.byName[r.col]
		if col == nil {
			return nil, invalidf("Undefined column name %s in table %s.%s", r.col, t.ks, t.name)
		}
		cr := byCol[col.name]
		if cr == nil {
			cr = &colRestr{col: col}
			byCol[col.name] = cr
			switch col.kind {
			case kindPartitionKey:
				w.pk[col.pos] = cr
			case kindClustering:
				w.ck[col.pos] = cr
			default:
				w.regular = append(w.regular, cr)
			}
		}
		spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: col.name, Type: col.typ}
		switch r.op {
		case opEq:
			if cr.eq != nil || cr.in != nil || cr.inMarker != nil {
				return nil, invalidf("%s cannot be restricted by more than one relation if it includes an Equal", col.name)
			}
			x, err := c.compileTerm(r.val, col.typ, spec)
			if err != nil {
				return nil, err
			}
			cr.eq = x
		case opIn:
			if cr.eq != nil || cr.in != nil || cr.inMarker != nil {
				return nil, invalidf("%s cannot be restricted by more than one relation if it includes a IN", col.name)
			}
			if r.vals != nil {
				cr.in = []*expr{}
				for _, v := range r.vals {
					x, err := c.compileTerm(v, col.typ, spec)
					if err != nil {
						return nil, err
					}
					cr.in = append(cr.in, x)
				}
			} else {
				s := spec
				s.Name = "in(" + col.name + ")"
				x, err := c.compileTerm(r.val, cql.ListOf(col.typ), s)
				if err != nil {
					return nil, err
				}
				cr.inMarker = x
			}
		case opLt, opLe, opGt, opGe:
			if referencesDuration(col.typ) {
				return nil, invalidf("Slice restrictions are not supported on duration columns")
			}
			x, err := c.compileTerm(r.val, col.typ, spec)
			if err != nil {
				return nil, err
			}
			if r.op == opGt || r.op == opGe {
				if cr.lo != nil {
					return nil, invalidf("More than one restriction was found for the start bound on %s", col.name)
				}
				cr.lo, cr.loIncl = x, r.op == opGe
			} else {
				if cr.hi != nil {
					return nil, invalidf("More than one restriction was found for the end bound on %s", col.name)
				}
				cr.hi, cr.hiIncl = x, r.op == opLe
			}
		default:
			typ := col.typ
			switch r.op {
			case opContains:
				if !isCollection(col.typ) {
					return nil, invalidf("Cannot use CONTAINS on non-collection column %s", col.name)
				}
				typ = elemType(col.typ)
			case opContainsKey:
				if col.typ.ID != cql.TypeMap {
					return nil, invalidf("Cannot use CONTAINS KEY on non-map column %s", col.name)
				}
				typ = keyType(col.typ)
			case opMapEq:
				if col.typ.ID != cql.TypeMap || col.frozen {
					return nil, invalidf("Column \"%s\" cannot be used as a map", col.name)
				}
				ks := spec
				ks.Name, ks.Type = "key("+col.name+")", keyType(col.typ)
				if _, err := c.compileTerm(r.key, ks.Type, ks); err != nil {
					return nil, err
				}
				typ = elemType(col.typ)
				spec.Name = "value(" + col.name + ")"
			}
			spec.Type = typ
			if _, err := c.compileTerm(r.val, typ, spec); err != nil {
				return nil, err
			}
			cr.others = append(cr.others, r)
		}
	}
	return w, nil
}

// keyPlan computes the partition keys (and clustering keys) that a write addresses.
type keyPlan struct {
	t  *table
	pk []*colRestr
	ck []*colRestr // only the restricted equality prefix
}

// partitionKeys returns every partition key addressed (a cartesian product for IN). A single
// key is returned in one, the caller's, so that the common write allocates no slice for it.
func (k *keyPlan) partitionKeys(x *execCtx, one *[1][]byte) ([][]byte, error) {
	if len(k.pk) == 1 && k.pk[0].eq != nil {
		b, unset, err := k.pk[0].eq.eval(x)
		if err != nil {
			return nil, err
		}
		if unset {
			return nil, invalidf("Invalid unset value for column %s", k.pk[0].col.name)
		}
		if b == nil {
			return nil, invalidf("Invalid null value in condition for column %s", k.pk[0].col.name)
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
		out[i] = encodePK(c)
		if len(out[i]) == 0 {
			return nil, invalidf("Key may not be empty")
		}
	}
	return out, nil
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

// writeKeys checks the WHERE clause of UPDATE and DELETE.
func (c *compiler) writeKeys(t *table, rels []relation, allowPartialCK bool, staticOnly bool) (*keyPlan, *whereInfo, error) {
	w, err := c.where(t, rels)
	if err != nil {
		return nil, nil, err
	}
	if len(w.regular) > 0 {
		return nil, nil, invalidf("Non PRIMARY KEY columns found in where clause: %s", w.regular[0].col.name)
	}
	if w.token != nil {
		return nil, nil, invalidf("The token function cannot be used in WHERE clauses for UPDATE and DELETE statements")
	}
	kp := &keyPlan{t: t, pk: w.pk}
	var missing []string
	for i, r := range w.pk {
		if !r.isEq() {
			if r != nil && (r.isRange() || len(r.others) > 0) {
				return nil, nil, invalidf("Invalid operator for PRIMARY KEY part %s", t.pk[i].name)
			}
			missing = append(missing, t.pk[i].name)
		}
	}
	if len(missing) > 0 {
		return nil, nil, invalidf("Some partition key parts are missing: %s", joinNames(missing))
	}
	for i, r := range w.ck {
		if r != nil && len(r.others) > 0 {
			return nil, nil, invalidf("Invalid operator for PRIMARY KEY part %s", t.ck[i].name)
		}
		if r.isEq() {
			if len(kp.ck) != i {
				return nil, nil, invalidf("PRIMARY KEY column \"%s\" cannot be restricted as preceding column \"%s\" is not restricted", t.ck[i].name, t.ck[i-1].name)
			}
			kp.ck = append(kp.ck, r)
			continue
		}
		if r.isRange() && !allowPartialCK {
			return nil, nil, invalidf("Invalid operator for PRIMARY KEY part %s", t.ck[i].name)
		}
	}
	if !allowPartialCK && !staticOnly && len(kp.ck) < len(t.ck) {
		var miss []string
		for _, col := range t.ck[len(kp.ck):] {
			miss = append(miss, col.name)
		}
		return nil, nil, invalidf("Some clustering keys are missing: %s", joinNames(miss))
	}
	return kp, w, nil
}

func joinNames(n []string) string {
	s := ""
	for i, x := range n {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}

// writeOp is a compiled cell operation.
type writeOp struct {
	pos   int
	kind  cellOpKind
	val   *expr
	key   *expr
	neg   bool // counter decrement
	field int  // cellSetField: the field's position
}

// fieldPosition checks an operation on field f of column col, a non-frozen user type,
// and returns the field's position. op spells the operation for the error messages.
func fieldPosition(col *column, f, op string) (int, error) {
	if !isUDT(col.typ) {
		return 0, invalidf("Invalid operation (%s) for non-UDT column %s", op, col.name)
	}
	if col.frozen {
		return 0, invalidf("Invalid operation (%s) for frozen UDT column %s", op, col.name)
	}
	i := slices.IndexFunc(col.typ.Fields, func(x cql.Field) bool { return x.Name == f })
	if i < 0 {
		return 0, invalidf("UDT column %s does not have a field named %s", col.name, f)
	}
	return i, nil
}

// termText spells a term for an error message: a constant as written, anything else "?".
func termText(t *term) string {
	if t != nil && t.kind == termConst {
		if t.lit == litString {
			return "'" + t.text + "'"
		}
		return t.text
	}
	return "?"
}

// writePlan is a compiled INSERT, UPDATE or DELETE.
type writePlan struct {
	t        *table
	keys     *keyPlan
	ckRange  *whereInfo // DELETE with a clustering range, or nil
	ops      []writeOp
	ttl, ts  *expr
	marker   bool // INSERT
	del      bool // DELETE of rows or partitions (no columns)
	cond     uint8
	static   bool // touches only static columns: no clustering key needed
	name     string
	lwtSpecs []cql.ColumnSpec
	conds    []condition
}

const (
	condNone uint8 = iota
	condNotExists
	condExists
	condIf // IF col = value ...
)

// condition is a compiled IF clause term of UPDATE or DELETE.
type condition struct {
	col  *column
	op   relOp
	val  *expr
	vals []*expr
}

// compileConds compiles IF conditions on regular and static columns.
func (c *compiler) compileConds(t *table, rels []relation) ([]condition, error) {
	var out []condition
	for _, r := range rels {
		if r.token {
			return nil, invalidf("token() is not allowed in IF conditions")
		}
		col := t.byName[r.col]
		if col == nil {
			return nil, invalidf("Undefined column name %s in table %s.%s", r.col, t.ks, t.name)
		}
		if col.kind == kindPartitionKey || col.kind == kindClustering {
			return nil, invalidf("PRIMARY KEY column '%s' cannot have IF conditions", col.name)
		}
		spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: col.name, Type: col.typ}
		if r.key != nil {
			return nil, invalidf("IF conditions on map elements (%s[...]) are not supported by the embedded node", col.name)
		}
		cd := condition{col: col, op: r.op}
		if (r.op == opLt || r.op == opLe || r.op == opGt || r.op == opGe) && referencesDuration(col.typ) {
			return nil, invalidf("Slice conditions ( %s ) are not supported on durations", relOpNames[r.op])
		}
		switch r.op {
		case opEq, opNe, opLt, opLe, opGt, opGe:
			x, err := c.compileTerm(r.val, col.typ, spec)
			if err != nil {
				return nil, err
			}
			cd.val = x
		case opIn:
			if r.val != nil {
				return nil, invalidf("IN ? is not supported in IF conditions by the embedded node")
			}
			for _, v := range r.vals {
				x, err := c.compileTerm(v, col.typ, spec)
				if err != nil {
					return nil, err
				}
				cd.vals = append(cd.vals, x)
			}
		default:
			return nil, invalidf("Unsupported operator %s in IF condition on %s", relOpNames[r.op], col.name)
		}
		out = append(out, cd)
	}
	return out, nil
}

// condVal is an evaluated condition, checked under the partition lock.
type condVal struct {
	col  *column
	op   relOp
	v    []byte
	list [][]byte
}

// evalConds appends to vals the values of the conditions conds (IF col op value, or IN a
// list) for the execution x.
func evalConds(vals []condVal, conds []condition, x *execCtx) ([]condVal, error) {
	for _, cd := range conds {
		cv := condVal{col: cd.col, op: cd.op}
		if cd.val != nil {
			b, unset, err := cd.val.eval(x)
			if err != nil {
				return nil, err
			}
			if unset {
				return nil, invalidf("Invalid unset value for column %s", cd.col.name)
			}
			cv.v = b
		}
		for _, v := range cd.vals {
			b, _, err := v.eval(x)
			if err != nil {
				return nil, err
			}
			cv.list = append(cv.list, b)
		}
		vals = append(vals, cv)
	}
	return vals, nil
}

func (cv *condVal) holds(v []byte) bool {
	typ := cv.col.typ
	switch cv.op {
	case opEq:
		return v == nil && cv.v == nil || v != nil && cv.v != nil && compareValues(typ, v, cv.v) == 0
	case opNe:
		return !(v == nil && cv.v == nil || v != nil && cv.v != nil && compareValues(typ, v, cv.v) == 0)
	case opIn:
		for _, w := range cv.list {
			if v == nil && w == nil || v != nil && w != nil && compareValues(typ, v, w) == 0 {
				return true
			}
		}
		return false
	}
	if v == nil || cv.v == nil {
		return false
	}
	c := compareValues(typ, v, cv.v)
	switch cv.op {
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	}
	return c >= 0
}

func (c *compiler) usingTerms(t *table, ttl, ts *term) (*expr, *expr, error) {
	var tx, sx *expr
	var err error
	if ttl != nil {
		spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: "[ttl]", Type: cql.TypeInfo{ID: cql.TypeInt}}
		if tx, err = c.compileTerm(ttl, spec.Type, spec); err != nil {
			return nil, nil, err
		}
	}
	if ts != nil {
		spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: "[timestamp]", Type: cql.TypeInfo{ID: cql.TypeBigint}}
		if sx, err = c.compileTerm(ts, spec.Type, spec); err != nil {
			return nil, nil, err
		}
	}
	return tx, sx, nil
}

func (c *compiler) writable(t *table) error {
	if t.view != nil {
		return invalidf("Cannot directly modify a materialized view")
	}
	if t.virtual || c.sc.keyspaces[t.ks].system && t.ks != "system_traces" {
		return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: t.ks + " keyspace is not user-modifiable."}
	}
	c.tableNeeds(t, "MODIFY")
	return nil
}

func (c *compiler) insert(st *insertStmt) (plan, error) {
	t, err := c.table(st.table)
	if err != nil {
		return nil, err
	}
	if err := c.writable(t); err != nil {
		return nil, err
	}
	if len(st.cols) != len(st.vals) {
		return nil, invalidf("Unmatched column names/values")
	}
	p := &writePlan{t: t, marker: true, keys: &keyPlan{t: t, pk: make([]*colRestr, len(t.pk)), ck: make([]*colRestr, len(t.ck))}, name: "INSERT"}
	if st.ifNotExists {
		p.cond = condNotExists
	}
	if st.json != nil {
		return c.insertJSON(st, t, p)
	}
	seen := map[string]bool{}
	for i, name := range st.cols {
		col := t.byName[name]
		if col == nil {
			return nil, invalidf("Undefined column name %s in table %s.%s", name, t.ks, t.name)
		}
		if seen[name] {
			return nil, invalidf("Multiple definitions found for column %s", name)
		}
		seen[name] = true
		spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: col.name, Type: col.typ}
		x, err := c.compileTerm(st.vals[i], col.typ, spec)
		if err != nil {
			return nil, err
		}
		switch col.kind {
		case kindPartitionKey:
			p.keys.pk[col.pos] = &colRestr{col: col, eq: x}
		case kindClustering:
			p.keys.ck[col.pos] = &colRestr{col: col, eq: x}
		default:
			if col.typ.ID == cql.TypeCounter {
				return nil, invalidf("INSERT statements are not allowed on counter tables, use UPDATE instead")
			}
			p.ops = append(p.ops, writeOp{pos: col.pos, kind: cellSet, val: x})
		}
	}
	for i, r := range p.keys.pk {
		if r == nil {
			return nil, invalidf("Some partition key parts are missing: %s", t.pk[i].name)
		}
	}
	for i, r := range p.keys.ck {
		if r == nil {
			return nil, invalidf("Some clustering keys are missing: %s", t.ck[i].name)
		}
	}
	c.setPKIndexes(t, p.keys.pk)
	if p.ttl, p.ts, err = c.usingTerms(t, st.ttl, st.ts); err != nil {
		return nil, err
	}
	if p.cond != condNone {
		p.lwtSpecs = c.lwtSpecs(t)
	}
	return p, nil
}

// lwtSpecs returns the first column of a conditional write's result. Like Cassandra, the
// prepared result metadata stays empty, since the columns depend on the outcome, so drivers
// never skip the metadata of these results.
func (c *compiler) lwtSpecs(t *table) []cql.ColumnSpec {
	return []cql.ColumnSpec{{Keyspace: t.ks, Table: t.name, Name: "[applied]", Type: cql.TypeInfo{ID: cql.TypeBoolean}}}
}

// setPKIndexes records the bind markers that make the partition key, when all of them are
// single markers.
func (c *compiler) setPKIndexes(t *table, pk []*colRestr) {
	idx := make([]uint16, 0, len(pk))
	for _, r := range pk {
		if r == nil || r.eq == nil || r.eq.kind != exBind {
			return
		}
		idx = append(idx, uint16(r.eq.idx))
	}
	c.pkIndexes = idx
}

// insertJSON compiles INSERT JSON: every column takes its value from the decoded JSON
// (execCtx.json), which a constant gives once, here, and a marker on each execution.
func (c *compiler) insertJSON(st *insertStmt, t *table, p *writePlan) (plan, error) {
	if t.counter {
		return nil, invalidf("INSERT statements are not allowed on counter tables, use UPDATE instead")
	}
	spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: "[json]", Type: cql.TypeInfo{ID: cql.TypeVarchar}}
	text, err := c.compileTerm(st.json, spec.Type, spec)
	if err != nil {
		return nil, err
	}
	jp := &jsonInsert{w: p, text: text, unsetDefault: st.jsonUnset}
	if text.kind == exConst {
		if jp.vals, jp.unset, err = jsonValues(t, string(text.b), st.jsonUnset); err != nil {
			return nil, err
		}
	}
	for i, col := range t.cols {
		x := &expr{kind: exJSON, idx: i, typ: col.typ, col: col.name}
		switch col.kind {
		case kindPartitionKey:
			p.keys.pk[col.pos] = &colRestr{col: col, eq: x}
		case kindClustering:
			p.keys.ck[col.pos] = &colRestr{col: col, eq: x}
		default:
			p.ops = append(p.ops, writeOp{pos: col.pos, kind: cellSet, val: x})
		}
	}
	if p.ttl, p.ts, err = c.usingTerms(t, st.ttl, st.ts); err != nil {
		return nil, err
	}
	if p.cond != condNone {
		p.lwtSpecs = c.lwtSpecs(t)
	}
	return jp, nil
}

// jsonInsert is a compiled INSERT JSON: the JSON's values, then the write.
type jsonInsert struct {
	w            *writePlan
	text         *expr
	unsetDefault bool
	vals         [][]byte // a constant JSON's values
	unset        []bool
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

func (c *compiler) update(st *updateStmt) (plan, error) {
	t, err := c.table(st.table)
	if err != nil {
		return nil, err
	}
	if err := c.writable(t); err != nil {
		return nil, err
	}
	p := &writePlan{t: t, name: "UPDATE"}
	if st.ifExists {
		p.cond = condExists
	}
	if len(st.conds) > 0 {
		conds, err := c.compileConds(t, st.conds)
		if err != nil {
			return nil, err
		}
		p.cond, p.conds = condIf, conds
	}
	static := true
	for _, a := range st.assigns {
		col := t.byName[a.col]
		if col == nil {
			return nil, invalidf("Undefined column name %s in table %s.%s", a.col, t.ks, t.name)
		}
		if col.kind == kindPartitionKey || col.kind == kindClustering {
			return nil, invalidf("PRIMARY KEY part %s found in SET part", col.name)
		}
		if col.kind != kindStatic {
			static = false
		}
		spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: col.name, Type: col.typ}
		op := writeOp{pos: col.pos}
		isCounter := col.typ.ID == cql.TypeCounter
		if a.field != "" {
			f, err := fieldPosition(col, a.field, col.name+"."+a.field+" = "+termText(a.val))
			if err != nil {
				return nil, err
			}
			op.kind, op.field = cellSetField, f
			spec.Name, spec.Type = col.name+"."+a.field, col.typ.Fields[f].Type
			if op.val, err = c.compileTerm(a.val, spec.Type, spec); err != nil {
				return nil, err
			}
			p.ops = append(p.ops, op)
			continue
		}
		if a.op != assignSet && isCollection(col.typ) && col.frozen {
			return nil, invalidf("Invalid operation (%s = %s + ?) for frozen collection column %s", col.name, col.name, col.name)
		}
		switch a.op {
		case assignSet:
			if isCounter {
				return nil, invalidf("Cannot set the value of counter column %s (counters can only be incremented/decremented, not set)", col.name)
			}
			op.kind = cellSet
			op.val, err = c.compileTerm(a.val, col.typ, spec)
		case assignAdd, assignSub, assignPrepend:
			typ := col.typ
			switch {
			case isCounter:
				if a.op == assignPrepend {
					return nil, invalidf("Invalid operation (%s = ? + %s) for counter column %s", col.name, col.name, col.name)
				}
				op.kind, op.neg = cellCounterAdd, a.op == assignSub
				typ = cql.TypeInfo{ID: cql.TypeBigint}
			case col.typ.ID == cql.TypeList:
				op.kind = map[assignOp]cellOpKind{assignAdd: cellAppend, assignSub: cellRemove, assignPrepend: cellPrepend}[a.op]
			case col.typ.ID == cql.TypeSet || col.typ.ID == cql.TypeMap:
				if a.op == assignPrepend {
					return nil, invalidf("Invalid operation (%s = ? + %s) for non list column %s", col.name, col.name, col.name)
				}
				op.kind = cellAppend
				if a.op == assignSub {
					op.kind = cellRemove
					if col.typ.ID == cql.TypeMap {
						typ = cql.SetOf(keyType(col.typ))
					}
				}
			default:
				return nil, invalidf("Invalid operation (%s = %s + ?) for non counter column %s", col.name, col.name, col.name)
			}
			spec.Type = typ
			op.val, err = c.compileTerm(a.val, typ, spec)
		case assignKey:
			var kt cql.TypeInfo
			switch col.typ.ID {
			case cql.TypeMap:
				kt = keyType(col.typ)
			case cql.TypeList:
				kt = cql.TypeInfo{ID: cql.TypeInt}
			default:
				return nil, invalidf("Invalid operation (%s[?] = ?) for non list/map column %s", col.name, col.name)
			}
			op.kind = cellSetKey
			ks := spec
			ks.Name = "key(" + col.name + ")"
			if col.typ.ID == cql.TypeList {
				ks.Name = "idx(" + col.name + ")"
			}
			if op.key, err = c.compileTerm(a.key, kt, ks); err != nil {
				return nil, err
			}
			vs := spec
			vs.Name = "value(" + col.name + ")"
			op.val, err = c.compileTerm(a.val, elemType(col.typ), vs)
		}
		if err != nil {
			return nil, err
		}
		p.ops = append(p.ops, op)
	}
	if p.ttl, p.ts, err = c.usingTerms(t, st.ttl, st.ts); err != nil {
		return nil, err
	}
	keys, _, err := c.writeKeys(t, st.where, false, static && len(t.ck) > 0)
	if err != nil {
		return nil, err
	}
	if static && len(t.ck) > 0 && len(keys.ck) > 0 && len(keys.ck) < len(t.ck) {
		return nil, invalidf("Some clustering keys are missing: %s", t.ck[len(keys.ck)].name)
	}
	p.keys = keys
	p.static = static && len(keys.ck) == 0 && len(t.ck) > 0
	c.setPKIndexes(t, keys.pk)
	if p.cond != condNone {
		p.lwtSpecs = c.lwtSpecs(t)
	}
	return p, nil
}

func (c *compiler) delete(st *deleteStmt) (plan, error) {
	t, err := c.table(st.table)
	if err != nil {
		return nil, err
	}
	if err := c.writable(t); err != nil {
		return nil, err
	}
	p := &writePlan{t: t, name: "DELETE", del: len(st.cols) == 0}
	if st.ifExists {
		p.cond = condExists
	}
	if len(st.conds) > 0 {
		conds, err := c.compileConds(t, st.conds)
		if err != nil {
			return nil, err
		}
		p.cond, p.conds = condIf, conds
	}
	static := len(st.cols) > 0
	for _, d := range st.cols {
		col := t.byName[d.col]
		if col == nil {
			return nil, invalidf("Undefined column name %s in table %s.%s", d.col, t.ks, t.name)
		}
		if col.kind == kindPartitionKey || col.kind == kindClustering {
			return nil, invalidf("Invalid identifier %s for deletion (should not be a PRIMARY KEY part)", col.name)
		}
		if col.kind != kindStatic {
			static = false
		}
		op := writeOp{pos: col.pos, kind: cellSet}
		if d.field != "" {
			f, err := fieldPosition(col, d.field, "DELETE "+col.name+"."+d.field)
			if err != nil {
				return nil, err
			}
			op.kind, op.field = cellSetField, f
			p.ops = append(p.ops, op)
			continue
		}
		if d.key != nil {
			var kt cql.TypeInfo
			switch col.typ.ID {
			case cql.TypeMap:
				kt = keyType(col.typ)
			case cql.TypeList:
				kt = cql.TypeInfo{ID: cql.TypeInt}
			default:
				return nil, invalidf("Invalid element access syntax for non-collection column %s", col.name)
			}
			spec := cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: "key(" + col.name + ")", Type: kt}
			if op.key, err = c.compileTerm(d.key, kt, spec); err != nil {
				return nil, err
			}
			op.kind = cellDelKey
		}
		p.ops = append(p.ops, op)
	}
	if _, p.ts, err = c.usingTerms(t, nil, st.ts); err != nil {
		return nil, err
	}
	keys, w, err := c.writeKeys(t, st.where, p.del, static)
	if err != nil {
		return nil, err
	}
	p.keys = keys
	p.static = static && len(keys.ck) == 0 && len(t.ck) > 0
	if !p.del && !p.static && len(keys.ck) < len(t.ck) {
		return nil, invalidf("Some clustering keys are missing: %s", t.ck[len(keys.ck)].name)
	}
	if p.del {
		for i, r := range w.ck {
			if r.isRange() {
				if i != len(keys.ck) {
					return nil, invalidf("PRIMARY KEY column \"%s\" cannot be restricted as preceding column \"%s\" is not restricted", t.ck[i].name, t.ck[i-1].name)
				}
				if r.isEq() {
					return nil, invalidf("%s cannot be restricted by both an equality and an inequality relation", t.ck[i].name)
				}
				p.ckRange = w
			}
		}
	}
	c.setPKIndexes(t, keys.pk)
	if p.cond != condNone {
		p.lwtSpecs = c.lwtSpecs(t)
	}
	return p, nil
}

func (p *writePlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	t := p.t
	if t.dropped.Load() {
		return nil, invalidf("unconfigured table %s", t.name)
	}
	if err := e.mem.admitWrite(p, x.batch); err != nil {
		return nil, err
	}
	cond := p.cond
	if x.noCond {
		cond = condNone // a conditional batch checked the conditions already
	}
	if cond != condNone {
		// Conditional writes of a table, batches of them included, are serialized, as
		// Paxos orders the LWTs of a partition.
		t.casMu.Lock()
		defer t.casMu.Unlock()
	}
	now := x.seconds()
	m := mutation{marker: p.marker}
	ts, ok, err := evalTimestamp(p.ts, x)
	if err != nil {
		return nil, err
	}
	if !ok {
		ts = e.timestamp(x)
	}
	m.ts = ts
	ttl := t.ttl
	if p.ttl != nil {
		b, unset, err := p.ttl.eval(x)
		if err != nil {
			return nil, err
		}
		if !unset && b != nil {
			v, ok := int32Value(b)
			if !ok {
				return nil, invalidf("Invalid TTL value")
			}
			if v < 0 {
				return nil, invalidf("A TTL must be greater or equal to 0, but was %d", v)
			}
			if v > maxTTL {
				return nil, invalidf("ttl is too large. requested (%d) maximum (%d)", v, maxTTL)
			}
			ttl = v
		}
	}
	if ttl > 0 {
		m.ttl, m.exp = ttl, now+int64(ttl)
	}
	var onePK [1][]byte
	pks, err := p.keys.partitionKeys(x, &onePK)
	if err != nil {
		return nil, err
	}
	var cks [][][]byte
	if len(p.keys.ck) > 0 {
		if cks, err = product(p.keys.ck, x); err != nil {
			return nil, err
		}
	} else {
		cks = [][][]byte{nil}
	}
	// Evaluate the cell operations once, into an owned buffer with the keys.
	var opsBuf [8]cellOp
	ops := opsBuf[:0]
	size := 0
	for _, pk := range pks {
		size += len(pk)
	}
	for _, ck := range cks {
		for _, v := range ck {
			size += len(v)
		}
	}
	for i := range p.ops {
		o := &p.ops[i]
		op := cellOp{pos: o.pos, kind: o.kind, field: uint16(o.field)}
		if o.val != nil {
			b, unset, err := o.val.eval(x)
			if err != nil {
				return nil, err
			}
			if unset {
				continue
			}
			if o.kind != cellSet && o.kind != cellSetKey && o.kind != cellSetField && b == nil {
				return nil, invalidf("Invalid null value for %s operation on %s", p.name, t.cells[o.pos].name)
			}
			if o.neg {
				v, ok := int64Value(b)
				if !ok {
					return nil, invalidf("Invalid counter increment")
				}
				b = encBigint(-v)
			}
			op.v = b
		}
		if o.key != nil {
			b, unset, err := o.key.eval(x)
			if err != nil {
				return nil, err
			}
			if unset || b == nil {
				return nil, invalidf("Invalid null value for %s key", t.cells[o.pos].name)
			}
			op.key = b
		}
		size += len(op.v) + len(op.key)
		ops = append(ops, op)
	}
	buf := make([]byte, 0, size)
	own := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		s := len(buf)
		buf = append(buf, b...)
		return buf[s:len(buf):len(buf)]
	}
	for i := range ops {
		ops[i].v = own(ops[i].v)
		ops[i].key = own(ops[i].key)
	}
	if p.del && p.ckRange != nil {
		f, err := ckFilterFor(t, p.ckRange, p.keys.ck, x)
		if err != nil {
			return nil, err
		}
		m.delRange = f
	}
	condVals, err := evalConds(nil, p.conds, x)
	if err != nil {
		return nil, err
	}
	m.conds = condVals
	applied := true
	var existing [][]byte
	mutations := 0 // rows, ranges or partitions written to the in-memory store
	d := t.data.Load()
	for _, pk := range pks {
		m.pk = own(pk)
		m.token = murmur3Token(m.pk)
		for _, ck := range cks {
			if ck != nil && !p.static {
				owned := make([][]byte, len(ck))
				for i, v := range ck {
					owned[i] = own(v)
				}
				m.ck = owned
			} else {
				m.ck = nil
			}
			switch {
			case p.del && m.delRange == nil && (ck == nil || len(ck) < len(t.ck)):
				if ck == nil || len(ck) == 0 {
					m.delPartition = true
				} else {
					m.delRange = &ckFilter{eq: m.ck}
					m.ck = nil
				}
			case p.del && m.delRange == nil:
				m.delRow = true
			}
			m.cond = cond
			var err error
			if len(t.views) == 0 {
				err = d.apply(t, &m, ops, now)
			} else {
				err = t.applyWithViews(d, &m, ops, now)
			}
			if err != nil {
				return nil, err
			}
			if !m.applied {
				applied = false
				existing = m.existing
			} else {
				mutations++
			}
			if p.del && m.delRange != nil && p.ckRange == nil {
				m.delRange = nil
			}
		}
	}
	if x.tr != nil {
		if applied {
			x.tr.Event("Applied " + itoa(mutations) + " mutations to " + t.name)
		} else {
			x.tr.Event("Condition not met on " + t.name + ": " + itoa(mutations) + " mutations applied")
		}
	}
	if cond != condNone {
		row := [][]byte{encBool(applied)}
		specs := p.lwtSpecs
		if !applied && existing != nil {
			row = append(row, existing...)
			specs = append([]cql.ColumnSpec{}, specs...)
			if p.cond == condIf {
				for _, col := range condColumns(condVals) {
					specs = append(specs, cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: col.name, Type: col.typ})
				}
			} else {
				specs = append(specs, t.starSpecs...)
			}
		}
		return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: [][][]byte{row}}, nil
	}
	return cql.VoidResult{}, nil
}

// unsafeString views b as a string; b must never change afterwards.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// batchPlan is a BEGIN BATCH ... APPLY BATCH query string.
type batchPlan struct {
	plans []plan
	ts    *expr
}

func (c *compiler) batch(st *batchStmt) (plan, error) {
	p := &batchPlan{}
	for _, s := range st.stmts {
		switch s := s.(type) {
		case *insertStmt:
			if st.ts != nil && s.ts != nil {
				return nil, invalidf("Timestamp must be set either on BATCH or individual statements")
			}
		case *updateStmt:
			if st.ts != nil && s.ts != nil {
				return nil, invalidf("Timestamp must be set either on BATCH or individual statements")
			}
		case *deleteStmt:
			if st.ts != nil && s.ts != nil {
				return nil, invalidf("Timestamp must be set either on BATCH or individual statements")
			}
		}
		pk := c.pkIndexes
		sp, err := c.compile(s)
		if err != nil {
			return nil, err
		}
		c.pkIndexes = pk
		p.plans = append(p.plans, sp)
	}
	c.result = cql.RowsMetadata{}
	if st.ts != nil {
		spec := cql.ColumnSpec{Name: "[timestamp]", Type: cql.TypeInfo{ID: cql.TypeBigint}}
		x, err := c.compileTerm(st.ts, spec.Type, spec)
		if err != nil {
			return nil, err
		}
		p.ts = x
	}
	return p, nil
}

func (p *batchPlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	bx := *x
	ts, ok, err := evalTimestamp(p.ts, x)
	if err != nil {
		return nil, err
	}
	if ok {
		bx.ts = ts
	}
	if bx.ts == 0 {
		bx.ts = e.timestamp(x)
	}
	bx.batch = true
	steps := make([]batchStep, len(p.plans))
	for i, sp := range p.plans {
		steps[i] = batchStep{pl: sp, vals: x.vals}
	}
	return e.runBatch(&bx, steps, p.ts != nil)
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
	v, ok := int64Value(b)
	if !ok {
		return 0, false, invalidf("Invalid timestamp value")
	}
	return v, true, nil
}
