package node

import (
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
