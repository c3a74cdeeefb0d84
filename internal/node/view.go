package node

import (
	"bytes"
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// Materialized views, on by default as in ScyllaDB (EngineConfig.NoMaterializedViews gives
// a stock Cassandra 4.1's refusal). A view is a table of its keyspace whose rows the node
// derives from its base table's: every write to the base (writePlan.exec) reads the rows it
// changes before and after (under the base's viewMu), and replaces the view rows they map
// to, moving a row when its view key changed. A view row copies its base row's cells with
// their timestamps and TTLs, so it expires with them; when the view key holds a regular
// column of the base, the row lives as long as that column's cell, as in Cassandra.

// viewDef is what a view table knows of its definition.
type viewDef struct {
	base       string // the base table's name, in the view's keyspace
	baseID     [16]byte
	includeAll bool     // SELECT *: columns added to the base are added to the view
	notNull    []string // WHERE ... IS NOT NULL, for system_schema.views.where_clause
}

// whereClause is the view's WHERE clause as system_schema.views shows it.
func (v *viewDef) whereClause() string {
	parts := make([]string, len(v.notNull))
	for i, c := range v.notNull {
		parts[i] = cqlvalue.QuoteName(c) + " IS NOT NULL"
	}
	return strings.Join(parts, " AND ")
}

// viewLink is a view as one version of its base table maintains it: for each of the view's
// key columns and cell slots, the base column it copies.
type viewLink struct {
	v      *table
	pk, ck []*column // base columns of the view's partition key and clustering columns
	cells  []*column // by view slot; nil for a slot of a dropped column
	// keyCol is the base's regular column in the view's key, if any: the view row lives
	// as long as its cell.
	keyCol *column
}

func viewsDisabled() error {
	return invalidf("Materialized views are disabled. Enable in cassandra.yaml to use.")
}

// createView is CREATE MATERIALIZED VIEW, checked as Cassandra 4.1's CreateViewStatement.
func (d *ddl) createView(st *grammar.CreateViewStmt) (*cql.SchemaChange, error) {
	if d.e.cfg.NoMaterializedViews {
		return nil, viewsDisabled()
	}
	ksName, err := d.keyspaceName(st.Name.Ks)
	if err != nil {
		return nil, err
	}
	if st.Base.Ks != "" && st.Base.Ks != ksName {
		return nil, invalidf("Cannot create a materialized view on a table in a different keyspace")
	}
	if err := d.require("ALTER", grammar.Resource{Kind: grammar.ResTable, Ks: ksName, Name: st.Base.Name}); err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[ksName]
	if k == nil {
		return nil, invalidf("Keyspace '%s' doesn't exist", ksName)
	}
	if err := modifiable(k, "CREATE", "<keyspace "+ksName+">"); err != nil {
		return nil, err
	}
	base := k.tables[st.Base.Name]
	if base == nil {
		return nil, invalidf("Base table '%s' doesn't exist", st.Base.Name)
	}
	if old := k.tables[st.Name.Name]; old != nil {
		if old.view == nil {
			return nil, invalidf("Cannot create materialized view '%s' - a table with the same name already exists", st.Name.Name)
		}
		if st.IfNotExists {
			return nil, nil
		}
		return nil, &cql.Error{Code: cql.ErrCodeAlreadyExists, Message: "Cannot add already existing table \"" + st.Name.Name + "\" to keyspace \"" + ksName + "\"", Keyspace: ksName, Table: st.Name.Name}
	}
	if !validName(st.Name.Name) {
		return nil, invalidf("Table name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"%s\")", st.Name.Name)
	}
	v, err := newView(base, st)
	if err != nil {
		return nil, err
	}
	d.mutable(ksName).tables[v.name] = v
	baseName, viewName := base.name, v.name
	d.after = append(d.after, func() { d.e.buildView(ksName, baseName, viewName) })
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetTable, Keyspace: ksName, Name: v.name}, nil
}

// newView checks a view's definition against its base table and builds the view's table.
func newView(base *table, st *grammar.CreateViewStmt) (*table, error) {
	name := st.Name.Name
	if base.view != nil {
		return nil, invalidf("Materialized views cannot be created against other materialized views")
	}
	if base.counter {
		return nil, invalidf("Materialized views are not supported on counter tables")
	}
	if gc, ok := base.options["gc_grace_seconds"]; ok && gc.Text == "0" {
		return nil, invalidf("Cannot create materialized view '%s' for base table '%s' with gc_grace_seconds of 0, since this value is used to TTL undelivered updates. Setting gc_grace_seconds too low might cause undelivered updates to expire before being replayed.", name, base.name)
	}
	if st.Aliased != "" {
		return nil, invalidf("Cannot use aliases when defining a materialized view (got %s)", st.Aliased)
	}
	selected := map[string]bool{}
	if st.Star {
		for _, c := range base.cols {
			selected[c.name] = true
		}
	}
	for _, n := range st.Cols {
		if base.byName[n] == nil {
			return nil, invalidf("Undefined column name %s in table %s", n, tableString(base))
		}
		selected[n] = true
	}
	for _, c := range base.cols {
		if selected[c.name] && c.kind == kindStatic {
			return nil, invalidf("Cannot include static column '%s' in materialized view '%s'", c.name, name)
		}
	}
	if err := checkViewKey(base, st, selected); err != nil {
		return nil, err
	}
	if err := checkViewWhere(base, st); err != nil {
		return nil, err
	}
	if _, ok := st.Options["default_time_to_live"]; ok {
		return nil, invalidf("Cannot set default_time_to_live for a materialized view. Data in a materialized view always expire at the same time than the corresponding data in the parent table.")
	}
	v := &table{ks: base.ks, name: name, options: map[string]grammar.OptValue{}, tableStore: &tableStore{},
		view: &viewDef{base: base.name, baseID: base.id, includeAll: st.Star, notNull: st.NotNull}}
	if err := v.setOptions(st.Options, true); err != nil {
		return nil, err
	}
	inKey := map[string]bool{}
	for i, n := range st.Pk {
		c := *base.byName[n]
		c.kind, c.pos, c.desc = kindPartitionKey, i, false
		v.pk = append(v.pk, &c)
		inKey[n] = true
	}
	for i, n := range st.Ck {
		c := *base.byName[n]
		c.kind, c.pos, c.desc = kindClustering, i, false
		if i < len(st.Order) {
			c.desc = st.Order[i].Desc
		}
		v.ck = append(v.ck, &c)
		inKey[n] = true
	}
	var rest []*column
	for _, bc := range base.cols {
		if selected[bc.name] && !inKey[bc.name] {
			c := *bc
			c.kind = kindRegular
			rest = append(rest, &c)
		}
	}
	sortColumns(rest)
	for i, c := range rest {
		c.pos = i
	}
	v.cells = rest
	if !v.idGiven {
		v.id = newSchemaVersion()
	}
	v.finish()
	v.data.Store(newTableData())
	return v, nil
}

// checkViewKey checks the view's primary key: selected columns, each once, of types a key
// may have, holding every key column of the base and at most one other.
func checkViewKey(base *table, st *grammar.CreateViewStmt, selected map[string]bool) error {
	name := st.Name.Name
	if len(st.Pk) == 0 {
		return invalidf("Must provide at least one partition key column for materialized view '%s'", name)
	}
	seen := map[string]bool{}
	for _, n := range append(slices.Clone(st.Pk), st.Ck...) {
		c := base.byName[n]
		if c == nil || !selected[n] {
			return invalidf("Unknown column '%s' referenced in PRIMARY KEY for materialized view '%s'", n, name)
		}
		if seen[n] {
			return invalidf("Duplicate column '%s' in PRIMARY KEY clause for materialized view '%s'", n, name)
		}
		seen[n] = true
		if !c.frozen {
			if cqlvalue.IsUDT(c.typ) {
				return invalidf("Invalid non-frozen user-defined type '%s' for PRIMARY KEY column '%s'", c.text, n)
			}
			return invalidf("Invalid non-frozen collection type '%s' for PRIMARY KEY column '%s'", c.text, n)
		}
		if cqlvalue.ReferencesDuration(c.typ) {
			return invalidf("duration type is not supported for PRIMARY KEY column '%s'", n)
		}
	}
	if len(st.Order) > 0 {
		same := len(st.Order) == len(st.Ck)
		for i := 0; same && i < len(st.Order); i++ {
			same = st.Order[i].Col == st.Ck[i]
		}
		if !same {
			return invalidf("Clustering key columns must exactly match columns in CLUSTERING ORDER BY directive")
		}
	}
	var missing, extra []string
	for _, c := range append(slices.Clone(base.pk), base.ck...) {
		if !seen[c.name] {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return invalidf("Cannot create materialized view '%s' without primary key columns %s from base table '%s'", name, strings.Join(missing, ", "), base.name)
	}
	for _, n := range append(slices.Clone(st.Pk), st.Ck...) {
		if k := base.byName[n].kind; k != kindPartitionKey && k != kindClustering {
			extra = append(extra, n)
		}
	}
	if len(extra) > 1 {
		return invalidf("Cannot include more than one non-primary key column in materialized view primary key (got %s)", strings.Join(extra, ", "))
	}
	return nil
}

// checkViewWhere checks the view's WHERE clause: every key column of the view restricted
// with IS NOT NULL. Other restrictions filter the view's rows in Cassandra; the node does
// not filter, and says so.
func checkViewWhere(base *table, st *grammar.CreateViewStmt) error {
	for _, n := range append(slices.Clone(st.NotNull), st.Others...) {
		if n != "" && base.byName[n] == nil {
			return invalidf("Undefined column name %s in table %s", n, tableString(base))
		}
	}
	var illegal []string
	for _, n := range st.Others {
		if n == "" {
			return invalidf("Cannot use token relation when defining a materialized view")
		}
		if k := base.byName[n].kind; k != kindPartitionKey && k != kindClustering {
			illegal = append(illegal, n)
		}
	}
	if len(illegal) > 0 {
		return invalidf("Non-primary key columns can only be restricted with 'IS NOT NULL' (got: %s restricted illegally)", strings.Join(illegal, ","))
	}
	var free []string
	for _, n := range append(slices.Clone(st.Pk), st.Ck...) {
		if !slices.Contains(st.NotNull, n) && !slices.Contains(st.Others, n) {
			free = append(free, n)
		}
	}
	if len(free) > 0 {
		return invalidf("Primary key columns %s must be restricted with 'IS NOT NULL' or otherwise", strings.Join(free, ", "))
	}
	if len(st.Others) > 0 {
		return invalidf("A materialized view WHERE clause other than IS NOT NULL (on %s) is not supported by the embedded node", strings.Join(st.Others, ", "))
	}
	return nil
}

// view is ALTER MATERIALIZED VIEW ... WITH and DROP MATERIALIZED VIEW.
func (d *ddl) view(st *grammar.ViewStmt) (*cql.SchemaChange, error) {
	ksName, err := d.keyspaceName(st.Name.Ks)
	if err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[ksName]
	var v *table
	if k != nil {
		v = k.tables[st.Name.Name]
	}
	if v == nil || v.view == nil {
		if st.IfExists {
			return nil, nil
		}
		return nil, invalidf("Materialized view '%s.%s' doesn't exist", ksName, st.Name.Name)
	}
	if err := d.require("ALTER", grammar.Resource{Kind: grammar.ResTable, Ks: ksName, Name: v.view.base}); err != nil {
		return nil, err
	}
	if st.Alter {
		if _, ok := st.Opts["default_time_to_live"]; ok {
			return nil, invalidf("Cannot set default_time_to_live on a materialized view. Data in a materialized view always expire at the same time than the corresponding data in the parent table.")
		}
		nv := v.alter()
		if err := nv.setOptions(st.Opts, false); err != nil {
			return nil, err
		}
		nv.finish()
		d.mutable(ksName).tables[v.name] = nv
		return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: ksName, Name: v.name}, nil
	}
	delete(d.mutable(ksName).tables, v.name)
	d.stale[v.tableStore] = true
	d.after = append(d.after, func() { v.dropped.Store(true) })
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetTable, Keyspace: ksName, Name: v.name}, nil
}

// viewsOf returns the names of the views of table name in k, sorted.
func viewsOf(k *keyspace, name string) []string {
	var out []string
	for _, t := range k.tables {
		if t.view != nil && t.view.base == name {
			out = append(out, t.name)
		}
	}
	slices.Sort(out)
	return out
}

// relinkViews gives every base table of the keyspaces this change touched a new version
// linked to its views as they now are, so that the plans compiled against the new schema
// maintain them.
func (d *ddl) relinkViews() {
	for _, k := range d.cloned {
		for name, t := range k.tables {
			if t.view != nil {
				continue
			}
			names := viewsOf(k, name)
			if len(names) == 0 && len(t.views) == 0 {
				continue
			}
			nt := t.alter()
			nt.finish()
			for _, vn := range names {
				nt.views = append(nt.views, linkView(nt, k.tables[vn]))
			}
			k.tables[name] = nt
		}
	}
}

// linkView maps the view's columns to the base's.
func linkView(base, v *table) *viewLink {
	l := &viewLink{v: v, cells: make([]*column, len(v.cells))}
	for _, c := range v.pk {
		l.pk = append(l.pk, base.byName[c.name])
	}
	for _, c := range v.ck {
		l.ck = append(l.ck, base.byName[c.name])
	}
	for i, c := range v.cells {
		if c != nil {
			l.cells[i] = base.byName[c.name]
		}
	}
	for _, c := range append(slices.Clone(l.pk), l.ck...) {
		if c != nil && c.kind != kindPartitionKey && c.kind != kindClustering {
			l.keyCol = c
		}
	}
	return l
}

// buildView fills a new view from its base table's rows, as Cassandra's view builder does.
func (e *Engine) buildView(ks, baseName, viewName string) {
	base := e.schema.Load().table(ks, baseName)
	if base == nil {
		return
	}
	var l *viewLink
	for _, vl := range base.views {
		if vl.v.name == viewName {
			l = vl
		}
	}
	if l == nil {
		return
	}
	base.viewMu.Lock()
	defer base.viewMu.Unlock()
	now := e.cfg.Now().Unix()
	d := base.data.Load()
	for _, p := range d.scan() {
		var pkBuf [4][]byte
		pkVals, ok := decodePKInto(pkBuf[:0], p.key, len(base.pk))
		if !ok {
			continue
		}
		sh := d.shard(p.token)
		sh.mu.RLock()
		for _, r := range p.rows {
			if r.live(now) {
				if k := l.key(pkVals, r, true, now); k.ok {
					l.v.data.Load().putRow(l, &k, r, now)
				}
			}
		}
		sh.mu.RUnlock()
	}
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

// addToViews adds a regular column just added to a base table to those of its views that
// select every column (SELECT *), as Cassandra does.
func (d *ddl) addToViews(k *keyspace, views []string, bc *column) {
	for _, vn := range views {
		v := d.mutable(k.name).tables[vn]
		if !v.view.includeAll {
			continue
		}
		nv := v.alter()
		c := *bc
		c.pos = len(nv.cells)
		nv.cells = append(nv.cells, &c)
		nv.finish()
		d.mutable(k.name).tables[vn] = nv
		d.stale[v.tableStore] = true
		d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.name, Name: vn})
	}
}

// renameInViews renames a key column of a base table in its views too, as Cassandra does:
// in their keys and their WHERE clauses.
func (d *ddl) renameInViews(k *keyspace, views []string, from, to string) {
	for _, vn := range views {
		v := d.mutable(k.name).tables[vn]
		nv := v.alter()
		for _, keys := range [][]*column{nv.pk, nv.ck} {
			for i, c := range keys {
				if c.name == from {
					renamed := *c
					renamed.name = to
					keys[i] = &renamed
				}
			}
		}
		def := *v.view
		def.notNull = slices.Clone(def.notNull)
		for i, n := range def.notNull {
			if n == from {
				def.notNull[i] = to
			}
		}
		nv.view = &def
		nv.finish()
		d.mutable(k.name).tables[vn] = nv
		d.stale[v.tableStore] = true
		d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.name, Name: vn})
	}
}
