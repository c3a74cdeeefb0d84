package engine

import (
	"slices"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The compilation of SELECT: its selectors, and its WHERE clause as the partitions read,
// the clustering slices and the rows filtered; select_exec.go executes it.

// srcKind says where a result column takes its value.
type srcKind uint8

const (
	srcPK srcKind = iota
	srcCK
	srcCell
	srcWritetime
	srcTTL
	srcToken
	srcFunc
	srcCount
)

// outCol is a column of the result rows: where its value comes from, and what is made of it.
type outCol struct {
	src     srcKind
	idx     int
	fn      *expr
	path    []int // field selection: the field positions, outermost first
	agg     aggKind
	argType cql.TypeInfo // the argument's type, for an aggregate or toJson
	toJSON  bool
	derived bool // a field or toJson of the column, not the column itself
	// conv is a native conversion of the column (dateOf(c), textAsBlob(c)); argType is the
	// column's type, convRet the result's.
	conv    string
	convRet cql.TypeInfo
	casts   []castStep // CAST(… AS type) of the value (of an aggregate's argument), innermost first
	post    []castStep // CAST(… AS type) of an aggregate's result
}

// rowFilter is a restriction checked against each row (ALLOW FILTERING, system tables).
type rowFilter struct {
	col  *storage.Column
	op   grammar.RelOp
	val  *expr
	key  *expr   // m[key] = val
	vals []*expr // IN list
	in   *expr   // IN ? marker
}

// selectPlan is a compiled SELECT.
type selectPlan struct {
	t         *storage.Table
	out       []outCol
	specs     []cql.ColumnSpec
	jsonSpecs []cql.ColumnSpec // SELECT JSON: the selectors, folded into one [json] column
	aggregate bool             // aggregates: one row, or one per group with GROUP BY
	distinct  bool
	grouped   bool // aggregates or GROUP BY: rows are folded into groups
	groupBy   bool
	groupCK   int // with GROUP BY, the clustering columns of the group key; -1: one group

	pk       []*colRestr // all = or IN, or nil for a scan
	token    *colRestr
	ckEq     []*colRestr
	ckRange  *colRestr
	filters  []rowFilter
	reverse  bool
	ordered  bool // ORDER BY given
	limit    *expr
	partLim  *expr
	hasCKRes bool
	// resultID is the result metadata id of specs, set by Engine.plan.
	resultID []byte
}

// selectCompiler compiles SELECT statements: their selectors, and their WHERE clauses into
// the keys read and the rows filtered.
type selectCompiler struct{ *compiler }

// selectPlan compiles a SELECT: its selectors, then its WHERE clause as the keys read and
// the rows filtered, its grouping, order and limits.
func (c selectCompiler) selectPlan(st *grammar.SelectStmt) (plan, error) {
	t, err := c.table(st.Table)
	if err != nil {
		return nil, err
	}
	c.tableNeeds(t, "SELECT")
	p := &selectPlan{t: t, distinct: st.Distinct}
	if err := c.selection(p, st); err != nil {
		return nil, err
	}
	w, err := c.where(t, st.Where)
	if err != nil {
		return nil, err
	}
	if err := groupBy(p, st, w); err != nil {
		return nil, err
	}
	if err := c.restrictions(p, st, w); err != nil {
		return nil, err
	}
	if err := orderBy(p, st); err != nil {
		return nil, err
	}
	if p.limit, err = c.limitTerm(t, st.Limit, "[limit]"); err != nil {
		return nil, err
	}
	if p.partLim, err = c.limitTerm(t, st.PartLimit, "[per_partition_limit]"); err != nil {
		return nil, err
	}
	if st.Json {
		// One text column, each row an object of the selectors.
		p.jsonSpecs = p.specs
		p.specs = []cql.ColumnSpec{p.spec("[json]", cql.TypeInfo{ID: cql.TypeVarchar})}
	}
	c.result = cql.RowsMetadata{Columns: p.specs, ColumnCount: len(p.specs)}
	return p, nil
}

// restrictions places the WHERE clause w: the partition keys read (or a token range), the
// clustering prefix and range, and the rest as row filters, which take ALLOW FILTERING
// unless an index serves them or the table is a system one.
func (c selectCompiler) restrictions(p *selectPlan, st *grammar.SelectStmt, w *whereInfo) error {
	t := p.t
	anyPK, err := c.partitionRestrictions(p, w)
	if err != nil {
		return err
	}
	filtered := c.clusteringRestrictions(p, w)
	for _, r := range w.regular {
		c.addFilters(p, r)
	}
	needFiltering := p.pk == nil && (anyPK || p.hasCKRes) || len(filtered) > 0 || len(w.regular) > 0
	// The restrictions that an index or filtering answers.
	viaIndex := slices.Clone(w.regular)
	for _, r := range append(slices.Clone(w.pk), w.ck...) {
		if r != nil && (p.pk == nil || slices.Contains(filtered, r)) {
			viaIndex = append(viaIndex, r)
		}
	}
	if indexServes(t, viaIndex) {
		needFiltering = false
	}
	system := c.sc.Keyspaces[t.Ks].System || t.Virtual
	if needFiltering && !st.AllowFiltering && !system && (p.pk == nil && (anyPK || len(w.regular) > 0 || p.hasCKRes) || len(w.regular) > 0 || len(p.filters) > 0) {
		return invalidf("Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING")
	}
	return nil
}

// partitionRestrictions reads the partition keys of w when each of its columns is restricted
// by = or IN (and nothing else); otherwise the query scans, in the token range if any, and
// filters on the partition key columns restricted. anyPK reports such a column.
func (c selectCompiler) partitionRestrictions(p *selectPlan, w *whereInfo) (anyPK bool, err error) {
	allEq := true
	for _, r := range w.pk {
		if r != nil {
			anyPK = true
		}
		if !r.isEq() || len(r.others) > 0 || r.isRange() {
			allEq = false
		}
	}
	if allEq {
		p.pk = w.pk
		c.setPKIndexes(p.t, w.pk)
		if w.token != nil {
			return anyPK, invalidf("Only EQ and IN relation are supported on the partition key (unless you use the token() function)")
		}
		return anyPK, nil
	}
	p.token = w.token
	for _, r := range w.pk {
		if r != nil {
			c.addFilters(p, r)
		}
	}
	return anyPK, nil
}

// clusteringRestrictions reads the clustering restrictions of w as an equality prefix, then
// one range; the others (after a gap, a second range, or more than = and a range on one
// column) are filtered, and returned.
func (c selectCompiler) clusteringRestrictions(p *selectPlan, w *whereInfo) (filtered []*colRestr) {
	gap := false
	for _, r := range w.ck {
		if r == nil {
			gap = true
			continue
		}
		p.hasCKRes = true
		switch {
		case gap || p.ckRange != nil || len(r.others) > 0 || (r.isEq() && r.isRange()):
			c.addFilters(p, r)
			filtered = append(filtered, r)
		case r.isEq():
			p.ckEq = append(p.ckEq, r)
		default:
			p.ckRange = r
		}
	}
	return filtered
}

// orderBy checks ORDER BY: the clustering columns in their declared order, each in its
// declared direction or each reversed, of a query that reads given partitions.
func orderBy(p *selectPlan, st *grammar.SelectStmt) error {
	if len(st.OrderBy) == 0 {
		return nil
	}
	if p.pk == nil {
		return invalidf("ORDER BY is only supported when the partition key is restricted by an EQ or an IN.")
	}
	for i, o := range st.OrderBy {
		col, err := columnOf(p.t, o.Col)
		if err != nil {
			return err
		}
		if col.Kind != storage.KindClustering {
			return invalidf("Order by is currently only supported on the clustered columns of the PRIMARY KEY, got %s", o.Col)
		}
		if col.Pos != i {
			return invalidf("Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY")
		}
		rev := o.Desc != col.Desc
		if i == 0 {
			p.reverse = rev
		} else if rev != p.reverse {
			return invalidf("Unsupported order by relation")
		}
	}
	p.ordered = true
	return nil
}

// limitTerm compiles a LIMIT or PER PARTITION LIMIT, named name for a marker; nil if absent.
func (c selectCompiler) limitTerm(t *storage.Table, term *grammar.Term, name string) (*expr, error) {
	if term == nil {
		return nil, nil
	}
	spec := cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: name, Type: cql.TypeInfo{ID: cql.TypeInt}}
	return c.compileTerm(term, spec.Type, spec)
}

// groupBy checks GROUP BY as Cassandra does: a prefix of the primary key in its order, where
// columns restricted by = may be left out, and never only a part of the partition key.
func groupBy(p *selectPlan, st *grammar.SelectStmt, w *whereInfo) error {
	p.groupCK = -1
	p.groupBy = len(st.GroupBy) > 0
	p.grouped = p.aggregate || p.groupBy
	if !p.groupBy {
		return nil
	}
	t := p.t
	keys := append(slices.Clone(t.Pk), t.Ck...)
	eq := func(c *storage.Column) bool {
		r := w.ck
		if c.Kind == storage.KindPartitionKey {
			r = w.pk
		}
		return r[c.Pos] != nil && r[c.Pos].eq != nil
	}
	i, prefix := 0, 0
	for _, g := range st.GroupBy {
		col, err := columnOf(t, g)
		if err != nil {
			return err
		}
		if col.Kind != storage.KindPartitionKey && col.Kind != storage.KindClustering {
			return invalidf("Group by is currently only supported on the columns of the PRIMARY KEY, got %s", g)
		}
		for {
			if i >= len(keys) {
				return invalidf("Group by currently only support groups of columns following their declared order in the PRIMARY KEY")
			}
			k := keys[i]
			i++
			if k.Kind == storage.KindClustering {
				prefix++
			}
			if k == col {
				break
			}
			if !eq(k) {
				return invalidf("Group by currently only support groups of columns following their declared order in the PRIMARY KEY")
			}
		}
	}
	if i < len(keys) && keys[i].Kind == storage.KindPartitionKey {
		return invalidf("Group by is not supported on only a part of the partition key")
	}
	p.groupCK = prefix
	return nil
}

func (c selectCompiler) addFilters(p *selectPlan, r *colRestr) {
	col := r.col
	if r.eq != nil {
		p.filters = append(p.filters, rowFilter{col: col, op: grammar.OpEq, val: r.eq})
	}
	if r.in != nil || r.inMarker != nil {
		p.filters = append(p.filters, rowFilter{col: col, op: grammar.OpIn, vals: r.in, in: r.inMarker})
	}
	if r.lo != nil {
		op := grammar.OpGt
		if r.loIncl {
			op = grammar.OpGe
		}
		p.filters = append(p.filters, rowFilter{col: col, op: op, val: r.lo})
	}
	if r.hi != nil {
		op := grammar.OpLt
		if r.hiIncl {
			op = grammar.OpLe
		}
		p.filters = append(p.filters, rowFilter{col: col, op: op, val: r.hi})
	}
	for _, o := range r.others {
		typ := col.Typ
		var key *expr
		spec := cql.ColumnSpec{Keyspace: p.t.Ks, Table: p.t.Name, Name: col.Name}
		switch o.Op {
		case grammar.OpContains:
			typ = cqlvalue.ElemType(col.Typ)
		case grammar.OpContainsKey:
			typ = cqlvalue.KeyType(col.Typ)
		case grammar.OpMapEq:
			ks := spec
			ks.Name, ks.Type = "key("+col.Name+")", cqlvalue.KeyType(col.Typ)
			key, _ = c.compileTerm(o.Key, ks.Type, ks)
			typ, spec.Name = cqlvalue.ElemType(col.Typ), "value("+col.Name+")"
		}
		spec.Type = typ
		x, _ := c.compileTerm(o.Val, typ, spec)
		p.filters = append(p.filters, rowFilter{col: col, op: o.Op, val: x, key: key})
	}
}

// selection compiles the selectors: what each column of a result row holds, and its
// metadata, named by the selector's text, its alias, or, for conversions and aggregates,
// system.fn(column) as Cassandra names them.
func (c selectCompiler) selection(p *selectPlan, st *grammar.SelectStmt) error {
	t := p.t
	if st.Star {
		for _, col := range t.Cols {
			p.out = append(p.out, colSource(col))
		}
		p.specs = t.StarSpecs
		return nil
	}
	for _, s := range st.Sels {
		if err := c.selector(p, s); err != nil {
			return err
		}
		if len(s.Casts) > 0 {
			if err := castResult(p, s); err != nil {
				return err
			}
		}
		if s.Alias != "" {
			p.specs[len(p.specs)-1].Name = s.Alias
		}
	}
	if p.distinct {
		for _, o := range p.out {
			if o.src != srcPK && !(o.src == srcCell && t.Cells[o.idx].Kind == storage.KindStatic) {
				return invalidf("SELECT DISTINCT queries must only request partition key columns and/or static columns (not clustering or regular columns)")
			}
		}
	}
	return nil
}

// selector compiles the selector s into a column of p's result rows.
func (c selectCompiler) selector(p *selectPlan, s grammar.Selector) error {
	switch s.Kind {
	case grammar.SelColumn:
		return p.selectColumn(s)
	case grammar.SelCount:
		p.aggregate = true
		p.add(outCol{src: srcCount, agg: aggCountRows}, s.Text, cql.TypeInfo{ID: cql.TypeBigint})
	case grammar.SelUDF:
		return c.selectUDF(p, s)
	case grammar.SelToJSON:
		col, err := columnOf(p.t, s.Col)
		if err != nil {
			return err
		}
		o := colSource(col)
		o.toJSON, o.argType, o.derived = true, col.Typ, true
		p.add(o, s.Text, cql.TypeInfo{ID: cql.TypeVarchar})
	case grammar.SelAgg:
		return p.selectAgg(s)
	case grammar.SelWritetime, grammar.SelTTL:
		return p.selectCellMeta(s)
	case grammar.SelToken:
		return p.selectToken(s)
	case grammar.SelFunc:
		return c.selectFunc(p, s)
	}
	return nil
}

// colSource is where a result column holding col takes its value.
func colSource(col *storage.Column) outCol {
	switch col.Kind {
	case storage.KindPartitionKey:
		return outCol{src: srcPK, idx: col.Pos}
	case storage.KindClustering:
		return outCol{src: srcCK, idx: col.Pos}
	}
	return outCol{src: srcCell, idx: col.Pos}
}

// spec is the metadata of a result column of p's table.
func (p *selectPlan) spec(name string, typ cql.TypeInfo) cql.ColumnSpec {
	return cql.ColumnSpec{Keyspace: p.t.Ks, Table: p.t.Name, Name: name, Type: typ}
}

// add appends a result column: where its value comes from, its name and type.
func (p *selectPlan) add(o outCol, name string, typ cql.TypeInfo) {
	p.out = append(p.out, o)
	p.specs = append(p.specs, p.spec(name, typ))
}

// selectColumn compiles a column, or a field of it (c.f.g), which must be of a user type.
func (p *selectPlan) selectColumn(s grammar.Selector) error {
	col, err := columnOf(p.t, s.Col)
	if err != nil {
		return err
	}
	o := colSource(col)
	typ := col.Typ
	sel, text := col.Name, col.Text
	for _, f := range s.Fields {
		if !cqlvalue.IsUDT(typ) {
			return invalidf("Invalid field selection: %s of type %s is not a user type", sel, text)
		}
		i := slices.IndexFunc(typ.Fields, func(x cql.Field) bool { return x.Name == f })
		if i < 0 {
			return invalidf("%s of type %s has no field %s", sel, text, f)
		}
		o.path, o.derived = append(o.path, i), true
		typ = typ.Fields[i].Type
		sel += "." + f
		text = cqlvalue.CqlTypeText(typ)
	}
	p.add(o, s.Text, typ)
	return nil
}

// selectUDF compiles a function of a column: a native conversion (dateOf(c),
// textAsBlob(c)); a user-defined function, which the node does not run, is refused.
func (c selectCompiler) selectUDF(p *selectPlan, s grammar.Selector) error {
	o, typ, ok, err := c.convSelector(p.t, s)
	if err != nil {
		return err
	}
	if ok {
		p.add(o, "system."+s.Fn.Name+"("+s.Cols[0]+")", typ)
		return nil
	}
	ks := s.FnKs
	if ks == "" {
		ks = p.t.Ks
	}
	return udfCall(c.sc.Keyspaces[ks], ks, s.Fn.Name)
}

// selectAgg compiles an aggregate of a column (count, min, max, sum, avg), its argument
// cast first if asked.
func (p *selectPlan) selectAgg(s grammar.Selector) error {
	col, err := columnOf(p.t, s.Col)
	if err != nil {
		return err
	}
	kind := aggKinds[s.Agg]
	o, typ, text, err := castSelector(colSource(col), col, s.ArgCasts)
	if err != nil {
		return err
	}
	rt, err := aggResultType(s.Agg, kind, typ)
	if err != nil {
		return err
	}
	o.agg, o.argType = kind, typ
	p.aggregate = true
	p.add(o, "system."+s.Agg+"("+text+")", rt)
	return nil
}

// selectCellMeta compiles writetime(c) or ttl(c), of a column that is neither in the
// primary key nor a non-frozen collection.
func (p *selectPlan) selectCellMeta(s grammar.Selector) error {
	col, err := columnOf(p.t, s.Col)
	if err != nil {
		return err
	}
	fn, o, typ := "writeTime", outCol{src: srcWritetime, idx: col.Pos}, cql.TypeInfo{ID: cql.TypeBigint}
	if s.Kind == grammar.SelTTL {
		fn, o, typ = "ttl", outCol{src: srcTTL, idx: col.Pos}, cql.TypeInfo{ID: cql.TypeInt}
	}
	if col.Kind == storage.KindPartitionKey || col.Kind == storage.KindClustering {
		return invalidf("Cannot use selection function %s on PRIMARY KEY part %s", fn, col.Name)
	}
	if cqlvalue.IsCollection(col.Typ) {
		return invalidf("Cannot use selection function %s on non-frozen collection %s", fn, col.Name)
	}
	p.add(o, s.Text, typ)
	return nil
}

// selectToken compiles token(pk…), of the partition key columns in their order.
func (p *selectPlan) selectToken(s grammar.Selector) error {
	t := p.t
	if len(s.Cols) != len(t.Pk) {
		return invalidf("Invalid number of arguments in call to function system.token: %d required but %d provided", len(t.Pk), len(s.Cols))
	}
	for i, n := range s.Cols {
		if n != t.Pk[i].Name {
			return invalidf("Type error: %s cannot be passed as argument %d of function system.token", n, i)
		}
	}
	p.add(outCol{src: srcToken}, s.Text, cql.TypeInfo{ID: cql.TypeBigint})
	return nil
}

// selectFunc compiles a native function of no column: a generator such as now(), or a
// conversion of a constant.
func (c selectCompiler) selectFunc(p *selectPlan, s grammar.Selector) error {
	rt, err := c.funcResult(p.t.Ks, s.Fn.Name)
	if err != nil {
		return err
	}
	typ := cql.TypeInfo{ID: rt}
	x, err := c.compileFunc(s.Fn, typ, p.spec(s.Text, typ), 0)
	if err != nil {
		return err
	}
	p.add(outCol{src: srcFunc, fn: x}, s.Text, typ)
	return nil
}

// convSelector compiles f(col), where f is a native conversion (dateOf, toTimestamp,
// blobAsText, ...), into a selector of the column; ok is false for another function.
func (c selectCompiler) convSelector(t *storage.Table, s grammar.Selector) (outCol, cql.TypeInfo, bool, error) {
	if s.FnKs != "" && s.FnKs != "system" || len(s.Cols) != 1 {
		return outCol{}, cql.TypeInfo{}, false, nil
	}
	if _, ok := cqlvalue.ConvArgType(s.Fn.Name); !ok {
		return outCol{}, cql.TypeInfo{}, false, nil
	}
	col := t.ByName[s.Cols[0]]
	if col == nil {
		return outCol{}, cql.TypeInfo{}, true, invalidf("Undefined column name %s in table %s.%s", s.Cols[0], t.Ks, t.Name)
	}
	ret, _, err := cqlvalue.ConvResult(s.Fn.Name, col.Typ, col.Name)
	if err != nil {
		return outCol{}, cql.TypeInfo{}, true, err
	}
	o := outCol{src: srcCell, idx: col.Pos, derived: true, conv: s.Fn.Name, argType: col.Typ, convRet: ret}
	switch col.Kind {
	case storage.KindPartitionKey:
		o.src = srcPK
	case storage.KindClustering:
		o.src = srcCK
	}
	return o, ret, true, nil
}

// castSelector compiles the casts of a column, innermost first, and returns the selector,
// its type and the name Cassandra gives its column.
func castSelector(o outCol, col *storage.Column, casts []string) (outCol, cql.TypeInfo, string, error) {
	typ, text := col.Typ, col.Name
	for _, to := range casts {
		id := grammar.SimpleTypes[to]
		if id == typ.ID {
			continue // a cast to its own type is ignored, as 4.1 does
		}
		if !castable(typ.ID, to) {
			return o, typ, text, invalidf("%s cannot be cast to %s", col.Name, to)
		}
		next := cql.TypeInfo{ID: id}
		o.casts = append(o.casts, castStep{from: typ, to: next})
		o.derived = true
		typ, text = next, "cast("+text+" as "+castName(to)+")"
	}
	return o, typ, text, nil
}

// castResult applies the casts of selector s to the result of the selector just compiled,
// the last of p's: its value (an aggregate's once aggregated), type and column name.
func castResult(p *selectPlan, s grammar.Selector) error {
	o, sp := &p.out[len(p.out)-1], &p.specs[len(p.specs)-1]
	typ, text := sp.Type, sp.Name
	var steps []castStep
	for _, to := range s.Casts {
		id := grammar.SimpleTypes[to]
		if id == typ.ID {
			continue // a cast to its own type is ignored, as 4.1 does
		}
		if !castable(typ.ID, to) {
			return invalidf("%s cannot be cast to %s", selectorColumn(s), to)
		}
		next := cql.TypeInfo{ID: id}
		steps = append(steps, castStep{from: typ, to: next})
		typ, text = next, "cast("+text+" as "+castName(to)+")"
	}
	if o.agg != aggNone {
		o.post = append(o.post, steps...)
	} else if len(steps) > 0 {
		o.casts = append(o.casts, steps...)
		o.derived = true
	}
	sp.Type, sp.Name = typ, text
	return nil
}

// selectorColumn is the column 4.1 names in the error of a cast it has no function for:
// the first the selector reads.
func selectorColumn(s grammar.Selector) string {
	switch {
	case s.Col != "":
		return s.Col
	case len(s.Cols) > 0:
		return s.Cols[0]
	}
	return s.Text
}
