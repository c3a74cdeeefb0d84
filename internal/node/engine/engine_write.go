package engine

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// maxKeyLen is the longest partition key (or key component) Cassandra accepts.
const maxKeyLen = 65535

// keyPlan computes the partition keys (and clustering keys) that a write addresses.
type keyPlan struct {
	t  *storage.Table
	pk []*colRestr
	ck []*colRestr // only the restricted equality prefix
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

// writeKeys checks the WHERE clause of UPDATE and DELETE.
func (c writeCompiler) writeKeys(t *storage.Table, rels []grammar.Relation, allowPartialCK bool, staticOnly bool) (*keyPlan, *whereInfo, error) {
	w, err := c.where(t, rels)
	if err != nil {
		return nil, nil, err
	}
	if len(w.regular) > 0 {
		return nil, nil, invalidf("Non PRIMARY KEY columns found in where clause: %s", w.regular[0].col.Name)
	}
	if w.token != nil {
		return nil, nil, invalidf("The token function cannot be used in WHERE clauses for UPDATE and DELETE statements")
	}
	kp := &keyPlan{t: t, pk: w.pk}
	var missing []string
	for i, r := range w.pk {
		if !r.isEq() {
			if r != nil && (r.isRange() || len(r.others) > 0) {
				return nil, nil, invalidf("Invalid operator for PRIMARY KEY part %s", t.Pk[i].Name)
			}
			missing = append(missing, t.Pk[i].Name)
		}
	}
	if len(missing) > 0 {
		return nil, nil, invalidf("Some partition key parts are missing: %s", strings.Join(missing, ", "))
	}
	for i, r := range w.ck {
		if r != nil && len(r.others) > 0 {
			return nil, nil, invalidf("Invalid operator for PRIMARY KEY part %s", t.Ck[i].Name)
		}
		if r.isEq() {
			if len(kp.ck) != i {
				return nil, nil, invalidf("PRIMARY KEY column \"%s\" cannot be restricted as preceding column \"%s\" is not restricted", t.Ck[i].Name, t.Ck[i-1].Name)
			}
			kp.ck = append(kp.ck, r)
			continue
		}
		if r.isRange() && !allowPartialCK {
			return nil, nil, invalidf("Invalid operator for PRIMARY KEY part %s", t.Ck[i].Name)
		}
	}
	if !allowPartialCK && !staticOnly && len(kp.ck) < len(t.Ck) {
		var miss []string
		for _, col := range t.Ck[len(kp.ck):] {
			miss = append(miss, col.Name)
		}
		return nil, nil, invalidf("Some clustering keys are missing: %s", strings.Join(miss, ", "))
	}
	return kp, w, nil
}

// writeOp is a compiled cell operation.
type writeOp struct {
	pos   int
	kind  storage.CellOpKind
	val   *expr
	key   *expr
	neg   bool // counter decrement
	field int  // cellSetField: the field's position
}

// fieldPosition checks an operation on field f of column col, a non-frozen user type,
// and returns the field's position. op spells the operation for the error messages.
func fieldPosition(col *storage.Column, f, op string) (int, error) {
	if !cqlvalue.IsUDT(col.Typ) {
		return 0, invalidf("Invalid operation (%s) for non-UDT column %s", op, col.Name)
	}
	if col.Frozen {
		return 0, invalidf("Invalid operation (%s) for frozen UDT column %s", op, col.Name)
	}
	i := slices.IndexFunc(col.Typ.Fields, func(x cql.Field) bool { return x.Name == f })
	if i < 0 {
		return 0, invalidf("UDT column %s does not have a field named %s", col.Name, f)
	}
	return i, nil
}

// termText spells a term for an error message: a constant as written, anything else "?".
func termText(t *grammar.Term) string {
	if t != nil && t.Kind == grammar.TermConst {
		if t.Lit == grammar.LitString {
			return "'" + t.Text + "'"
		}
		return t.Text
	}
	return "?"
}

// writePlan is a compiled INSERT, UPDATE or DELETE.
type writePlan struct {
	t        *storage.Table
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

// condition is a compiled IF clause term of UPDATE or DELETE.
type condition struct {
	col  *storage.Column
	op   grammar.RelOp
	val  *expr
	vals []*expr
}

// compileConds compiles IF conditions on regular and static columns.
func (c writeCompiler) compileConds(t *storage.Table, rels []grammar.Relation) ([]condition, error) {
	var out []condition
	for _, r := range rels {
		if r.Token {
			return nil, invalidf("token() is not allowed in IF conditions")
		}
		col := t.ByName[r.Col]
		if col == nil {
			return nil, invalidf("Undefined column name %s in table %s.%s", r.Col, t.Ks, t.Name)
		}
		if col.Kind == storage.KindPartitionKey || col.Kind == storage.KindClustering {
			return nil, invalidf("PRIMARY KEY column '%s' cannot have IF conditions", col.Name)
		}
		spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: col.Name, Type: col.Typ}
		if r.Key != nil {
			return nil, invalidf("IF conditions on map elements (%s[...]) are not supported by the embedded node", col.Name)
		}
		cd := condition{col: col, op: r.Op}
		if (r.Op == grammar.OpLt || r.Op == grammar.OpLe || r.Op == grammar.OpGt || r.Op == grammar.OpGe) && cqlvalue.ReferencesDuration(col.Typ) {
			return nil, invalidf("Slice conditions ( %s ) are not supported on durations", grammar.RelOpNames[r.Op])
		}
		switch r.Op {
		case grammar.OpEq, grammar.OpNe, grammar.OpLt, grammar.OpLe, grammar.OpGt, grammar.OpGe:
			x, err := c.compileTerm(r.Val, col.Typ, spec)
			if err != nil {
				return nil, err
			}
			cd.val = x
		case grammar.OpIn:
			if r.Val != nil {
				return nil, invalidf("IN ? is not supported in IF conditions by the embedded node")
			}
			for _, v := range r.Vals {
				x, err := c.compileTerm(v, col.Typ, spec)
				if err != nil {
					return nil, err
				}
				cd.vals = append(cd.vals, x)
			}
		default:
			return nil, invalidf("Unsupported operator %s in IF condition on %s", grammar.RelOpNames[r.Op], col.Name)
		}
		out = append(out, cd)
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

func (c writeCompiler) usingTerms(t *storage.Table, ttl, ts *grammar.Term) (*expr, *expr, error) {
	var tx, sx *expr
	var err error
	if ttl != nil {
		spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: "[ttl]", Type: cql.TypeInfo{ID: cql.TypeInt}}
		if tx, err = c.compileTerm(ttl, spec.Type, spec); err != nil {
			return nil, nil, err
		}
	}
	if ts != nil {
		spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: "[timestamp]", Type: cql.TypeInfo{ID: cql.TypeBigint}}
		if sx, err = c.compileTerm(ts, spec.Type, spec); err != nil {
			return nil, nil, err
		}
	}
	return tx, sx, nil
}

func (c writeCompiler) writable(t *storage.Table) error {
	if t.View != nil {
		return invalidf("Cannot directly modify a materialized view")
	}
	if t.Virtual || c.sc.Keyspaces[t.Ks].System && t.Ks != "system_traces" {
		return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: t.Ks + " keyspace is not user-modifiable."}
	}
	c.tableNeeds(t, "MODIFY")
	return nil
}

func (c writeCompiler) insert(st *grammar.InsertStmt) (plan, error) {
	t, err := c.table(st.Table)
	if err != nil {
		return nil, err
	}
	if err := c.writable(t); err != nil {
		return nil, err
	}
	if len(st.Cols) != len(st.Vals) {
		return nil, invalidf("Unmatched column names/values")
	}
	p := &writePlan{t: t, marker: true, keys: &keyPlan{t: t, pk: make([]*colRestr, len(t.Pk)), ck: make([]*colRestr, len(t.Ck))}, name: "INSERT"}
	if st.IfNotExists {
		p.cond = storage.CondNotExists
	}
	if st.Json != nil {
		return c.insertJSON(st, t, p)
	}
	seen := map[string]bool{}
	for i, name := range st.Cols {
		col := t.ByName[name]
		if col == nil {
			return nil, invalidf("Undefined column name %s in table %s.%s", name, t.Ks, t.Name)
		}
		if seen[name] {
			return nil, invalidf("Multiple definitions found for column %s", name)
		}
		seen[name] = true
		spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: col.Name, Type: col.Typ}
		x, err := c.compileTerm(st.Vals[i], col.Typ, spec)
		if err != nil {
			return nil, err
		}
		switch col.Kind {
		case storage.KindPartitionKey:
			p.keys.pk[col.Pos] = &colRestr{col: col, eq: x}
		case storage.KindClustering:
			p.keys.ck[col.Pos] = &colRestr{col: col, eq: x}
		default:
			if col.Typ.ID == cql.TypeCounter {
				return nil, invalidf("INSERT statements are not allowed on counter tables, use UPDATE instead")
			}
			p.ops = append(p.ops, writeOp{pos: col.Pos, kind: storage.CellSet, val: x})
		}
	}
	for i, r := range p.keys.pk {
		if r == nil {
			return nil, invalidf("Some partition key parts are missing: %s", t.Pk[i].Name)
		}
	}
	for i, r := range p.keys.ck {
		if r == nil {
			return nil, invalidf("Some clustering keys are missing: %s", t.Ck[i].Name)
		}
	}
	c.setPKIndexes(t, p.keys.pk)
	if p.ttl, p.ts, err = c.usingTerms(t, st.Ttl, st.Ts); err != nil {
		return nil, err
	}
	if p.cond != storage.CondNone {
		p.lwtSpecs = c.lwtSpecs(t)
	}
	return p, nil
}

// lwtSpecs returns the first column of a conditional write's result. Like Cassandra, the
// prepared result metadata stays empty, since the columns depend on the outcome, so drivers
// never skip the metadata of these results.
func (c writeCompiler) lwtSpecs(t *storage.Table) []cql.ColumnSpec {
	return []cql.ColumnSpec{{Keyspace: t.Ks, Table: t.Name, Name: "[applied]", Type: cql.TypeInfo{ID: cql.TypeBoolean}}}
}

// insertJSON compiles INSERT JSON: every column takes its value from the decoded JSON
// (execCtx.json), which a constant gives once, here, and a marker on each execution.
func (c writeCompiler) insertJSON(st *grammar.InsertStmt, t *storage.Table, p *writePlan) (plan, error) {
	if t.Counter {
		return nil, invalidf("INSERT statements are not allowed on counter tables, use UPDATE instead")
	}
	spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: "[json]", Type: cql.TypeInfo{ID: cql.TypeVarchar}}
	text, err := c.compileTerm(st.Json, spec.Type, spec)
	if err != nil {
		return nil, err
	}
	jp := &jsonInsert{w: p, text: text, unsetDefault: st.JsonUnset}
	if text.kind == exConst {
		if jp.vals, jp.unset, err = jsonValues(t, string(text.b), st.JsonUnset); err != nil {
			return nil, err
		}
	}
	for i, col := range t.Cols {
		x := &expr{kind: exJSON, idx: i, typ: col.Typ, col: col.Name}
		switch col.Kind {
		case storage.KindPartitionKey:
			p.keys.pk[col.Pos] = &colRestr{col: col, eq: x}
		case storage.KindClustering:
			p.keys.ck[col.Pos] = &colRestr{col: col, eq: x}
		default:
			p.ops = append(p.ops, writeOp{pos: col.Pos, kind: storage.CellSet, val: x})
		}
	}
	if p.ttl, p.ts, err = c.usingTerms(t, st.Ttl, st.Ts); err != nil {
		return nil, err
	}
	if p.cond != storage.CondNone {
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

// writeCompiler compiles INSERT, UPDATE, DELETE and BATCH statements: their cell operations,
// their keys and their conditions.
type writeCompiler struct{ *compiler }

// conditional starts the plan of an UPDATE or DELETE (name) of the table tn: the table,
// which must be writable, and the IF clause (IF EXISTS, or conditions on columns).
func (c writeCompiler) conditional(tn grammar.TableName, name string, ifExists bool, conds []grammar.Relation) (*writePlan, error) {
	t, err := c.table(tn)
	if err != nil {
		return nil, err
	}
	if err := c.writable(t); err != nil {
		return nil, err
	}
	p := &writePlan{t: t, name: name}
	if ifExists {
		p.cond = storage.CondExists
	}
	if len(conds) > 0 {
		cs, err := c.compileConds(t, conds)
		if err != nil {
			return nil, err
		}
		p.cond, p.conds = storage.CondIf, cs
	}
	return p, nil
}

// keyed ends the plan of a write: its keys, the markers that make its partition key, and
// a conditional write's result columns.
func (c writeCompiler) keyed(p *writePlan, keys *keyPlan) {
	p.keys = keys
	c.setPKIndexes(p.t, keys.pk)
	if p.cond != storage.CondNone {
		p.lwtSpecs = c.lwtSpecs(p.t)
	}
}

// update compiles an UPDATE: its assignments, then the row (or, setting only static
// columns, the partition) of its WHERE clause.
func (c writeCompiler) update(st *grammar.UpdateStmt) (plan, error) {
	p, err := c.conditional(st.Table, "UPDATE", st.IfExists, st.Conds)
	if err != nil {
		return nil, err
	}
	t := p.t
	static := true
	for _, a := range st.Assigns {
		col, err := columnOf(t, a.Col)
		if err != nil {
			return nil, err
		}
		if col.Kind == storage.KindPartitionKey || col.Kind == storage.KindClustering {
			return nil, invalidf("PRIMARY KEY part %s found in SET part", col.Name)
		}
		if col.Kind != storage.KindStatic {
			static = false
		}
		op, err := c.assignment(t, col, a.Op, a.Field, a.Key, a.Val)
		if err != nil {
			return nil, err
		}
		p.ops = append(p.ops, op)
	}
	if p.ttl, p.ts, err = c.usingTerms(t, st.Ttl, st.Ts); err != nil {
		return nil, err
	}
	keys, _, err := c.writeKeys(t, st.Where, false, static && len(t.Ck) > 0)
	if err != nil {
		return nil, err
	}
	if static && len(t.Ck) > 0 && len(keys.ck) > 0 && len(keys.ck) < len(t.Ck) {
		return nil, invalidf("Some clustering keys are missing: %s", t.Ck[len(keys.ck)].Name)
	}
	p.static = static && len(keys.ck) == 0 && len(t.Ck) > 0
	c.keyed(p, keys)
	return p, nil
}

// assignment compiles the assignment op of col (or of its field) to val: the whole value,
// a field, an element (col[key] = val), or an addition to (or removal from) a counter or a
// collection.
func (c writeCompiler) assignment(t *storage.Table, col *storage.Column, a grammar.AssignOp, field string, key, val *grammar.Term) (writeOp, error) {
	spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: col.Name, Type: col.Typ}
	op := writeOp{pos: col.Pos}
	var err error
	if field != "" {
		if op.field, err = fieldPosition(col, field, col.Name+"."+field+" = "+termText(val)); err != nil {
			return op, err
		}
		op.kind = storage.CellSetField
		spec.Name, spec.Type = col.Name+"."+field, col.Typ.Fields[op.field].Type
		op.val, err = c.compileTerm(val, spec.Type, spec)
		return op, err
	}
	if a != grammar.AssignSet && cqlvalue.IsCollection(col.Typ) && col.Frozen {
		return op, invalidf("Invalid operation (%s = %s + ?) for frozen collection column %s", col.Name, col.Name, col.Name)
	}
	switch a {
	case grammar.AssignSet:
		if col.Typ.ID == cql.TypeCounter {
			return op, invalidf("Cannot set the value of counter column %s (counters can only be incremented/decremented, not set)", col.Name)
		}
		op.kind = storage.CellSet
		op.val, err = c.compileTerm(val, col.Typ, spec)
	case grammar.AssignAdd, grammar.AssignSub, grammar.AssignPrepend:
		if spec.Type, err = op.addition(col, a); err != nil {
			return op, err
		}
		op.val, err = c.compileTerm(val, spec.Type, spec)
	case grammar.AssignKey:
		return c.elementAssignment(op, spec, col, key, val)
	}
	return op, err
}

// addition sets op to c = c + v, c = c - v or c = v + c on col: a counter's increment, a
// list's append, removal or prepend, a set's or a map's union or removal (of a map's
// keys); it returns the type of v.
func (op *writeOp) addition(col *storage.Column, a grammar.AssignOp) (cql.TypeInfo, error) {
	switch col.Typ.ID {
	case cql.TypeCounter:
		if a == grammar.AssignPrepend {
			return col.Typ, invalidf("Invalid operation (%s = ? + %s) for counter column %s", col.Name, col.Name, col.Name)
		}
		op.kind, op.neg = storage.CellCounterAdd, a == grammar.AssignSub
		return cql.TypeInfo{ID: cql.TypeBigint}, nil
	case cql.TypeList:
		op.kind = map[grammar.AssignOp]storage.CellOpKind{grammar.AssignAdd: storage.CellAppend, grammar.AssignSub: storage.CellRemove, grammar.AssignPrepend: storage.CellPrepend}[a]
		return col.Typ, nil
	case cql.TypeSet, cql.TypeMap:
		if a == grammar.AssignPrepend {
			return col.Typ, invalidf("Invalid operation (%s = ? + %s) for non list column %s", col.Name, col.Name, col.Name)
		}
		op.kind = storage.CellAppend
		if a != grammar.AssignSub {
			return col.Typ, nil
		}
		op.kind = storage.CellRemove
		if col.Typ.ID == cql.TypeMap {
			return cql.SetOf(cqlvalue.KeyType(col.Typ)), nil
		}
		return col.Typ, nil
	}
	return col.Typ, invalidf("Invalid operation (%s = %s + ?) for non counter column %s", col.Name, col.Name, col.Name)
}

// elementKey returns the type of an element's key in col: a map's key, a list's index; ok
// is false for a column of another type.
func elementKey(col *storage.Column) (typ cql.TypeInfo, ok bool) {
	switch col.Typ.ID {
	case cql.TypeMap:
		return cqlvalue.KeyType(col.Typ), true
	case cql.TypeList:
		return cql.TypeInfo{ID: cql.TypeInt}, true
	}
	return cql.TypeInfo{}, false
}

// elementAssignment compiles m[key] = val or l[key] = val into op.
func (c writeCompiler) elementAssignment(op writeOp, spec cql.ColumnSpec, col *storage.Column, key, val *grammar.Term) (writeOp, error) {
	kt, ok := elementKey(col)
	if !ok {
		return op, invalidf("Invalid operation (%s[?] = ?) for non list/map column %s", col.Name, col.Name)
	}
	op.kind = storage.CellSetKey
	ks := spec
	ks.Name = "key(" + col.Name + ")"
	if col.Typ.ID == cql.TypeList {
		ks.Name = "idx(" + col.Name + ")"
	}
	var err error
	if op.key, err = c.compileTerm(key, kt, ks); err != nil {
		return op, err
	}
	vs := spec
	vs.Name = "value(" + col.Name + ")"
	op.val, err = c.compileTerm(val, cqlvalue.ElemType(col.Typ), vs)
	return op, err
}

// delete compiles a DELETE: of columns (or their fields and elements) of a row, or of rows,
// a range of rows or a partition.
func (c writeCompiler) delete(st *grammar.DeleteStmt) (plan, error) {
	p, err := c.conditional(st.Table, "DELETE", st.IfExists, st.Conds)
	if err != nil {
		return nil, err
	}
	t := p.t
	p.del = len(st.Cols) == 0
	static := len(st.Cols) > 0
	for _, d := range st.Cols {
		col, err := columnOf(t, d.Col)
		if err != nil {
			return nil, err
		}
		if col.Kind == storage.KindPartitionKey || col.Kind == storage.KindClustering {
			return nil, invalidf("Invalid identifier %s for deletion (should not be a PRIMARY KEY part)", col.Name)
		}
		if col.Kind != storage.KindStatic {
			static = false
		}
		op, err := c.deletion(t, col, d.Field, d.Key)
		if err != nil {
			return nil, err
		}
		p.ops = append(p.ops, op)
	}
	if _, p.ts, err = c.usingTerms(t, nil, st.Ts); err != nil {
		return nil, err
	}
	keys, w, err := c.writeKeys(t, st.Where, p.del, static)
	if err != nil {
		return nil, err
	}
	p.static = static && len(keys.ck) == 0 && len(t.Ck) > 0
	if !p.del && !p.static && len(keys.ck) < len(t.Ck) {
		return nil, invalidf("Some clustering keys are missing: %s", t.Ck[len(keys.ck)].Name)
	}
	if p.del {
		if p.ckRange, err = deletedRange(t, w, len(keys.ck)); err != nil {
			return nil, err
		}
	}
	c.keyed(p, keys)
	return p, nil
}

// deletion compiles the deletion of col, of its field, or of its element key (m[k], l[i]).
func (c writeCompiler) deletion(t *storage.Table, col *storage.Column, field string, key *grammar.Term) (writeOp, error) {
	op := writeOp{pos: col.Pos, kind: storage.CellSet}
	var err error
	if field != "" {
		op.kind = storage.CellSetField
		op.field, err = fieldPosition(col, field, "DELETE "+col.Name+"."+field)
		return op, err
	}
	if key == nil {
		return op, nil
	}
	kt, ok := elementKey(col)
	if !ok {
		return op, invalidf("Invalid element access syntax for non-collection column %s", col.Name)
	}
	spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: "key(" + col.Name + ")", Type: kt}
	op.kind = storage.CellDelKey
	op.key, err = c.compileTerm(key, kt, spec)
	return op, err
}

// deletedRange checks the range of rows that a DELETE of rows restricts w to, if any: on
// the clustering column after the equality prefix of eqCK columns. It returns w with such
// a range, nil without.
func deletedRange(t *storage.Table, w *whereInfo, eqCK int) (*whereInfo, error) {
	var rng *whereInfo
	for i, r := range w.ck {
		if !r.isRange() {
			continue
		}
		if i != eqCK {
			return nil, invalidf("PRIMARY KEY column \"%s\" cannot be restricted as preceding column \"%s\" is not restricted", t.Ck[i].Name, t.Ck[i-1].Name)
		}
		if r.isEq() {
			return nil, invalidf("%s cannot be restricted by both an equality and an inequality relation", t.Ck[i].Name)
		}
		rng = w
	}
	return rng, nil
}

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
