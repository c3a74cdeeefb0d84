package engine

import (
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The compilation of INSERT, UPDATE and DELETE: the cell operations, the keys of the WHERE
// clause (or of the values inserted) and the IF conditions; write_exec.go executes them.

// writeCompiler compiles INSERT, UPDATE and DELETE statements: their cell operations, their
// keys and their conditions.
type writeCompiler struct{ *compiler }

// keyPlan computes the partition keys (and clustering keys) that a write addresses.
type keyPlan struct {
	t  *storage.Table
	pk []*colRestr
	ck []*colRestr // only the restricted equality prefix
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
// the clustering column after the equality prefix of eqCK columns, and not also restricted
// by = (which the prefix then holds: checked first, or the message would name the column
// before the first). It returns w with such a range, nil without.
func deletedRange(t *storage.Table, w *whereInfo, eqCK int) (*whereInfo, error) {
	var rng *whereInfo
	for i, r := range w.ck {
		if !r.isRange() {
			continue
		}
		if r.isEq() {
			return nil, invalidf("%s cannot be restricted by both an equality and an inequality relation", t.Ck[i].Name)
		}
		if i != eqCK {
			return nil, invalidf("PRIMARY KEY column \"%s\" cannot be restricted as preceding column \"%s\" is not restricted", t.Ck[i].Name, t.Ck[i-1].Name)
		}
		rng = w
	}
	return rng, nil
}
