package engine

import (
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
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
	k, err := d.keyspaceToCreateIn(ksName, need{Perm: "ALTER", Res: grammar.Resource{Kind: grammar.ResTable, Ks: ksName, Name: st.Base.Name}})
	if k == nil {
		return nil, err
	}
	base := k.Tables[st.Base.Name]
	if base == nil {
		return nil, invalidf("Base table '%s' doesn't exist", st.Base.Name)
	}
	if old := k.Tables[st.Name.Name]; old != nil {
		if old.View == nil {
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
	d.mutable(ksName).Tables[v.Name] = v
	baseName, viewName := base.Name, v.Name
	d.after = append(d.after, func() { d.e.buildView(ksName, baseName, viewName) })
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetTable, Keyspace: ksName, Name: v.Name}, nil
}

// newView checks a view's definition against its base table and builds the view's table.
func newView(base *storage.Table, st *grammar.CreateViewStmt) (*storage.Table, error) {
	name := st.Name.Name
	if err := viewableBase(base, name); err != nil {
		return nil, err
	}
	if st.Aliased != "" {
		return nil, invalidf("Cannot use aliases when defining a materialized view (got %s)", st.Aliased)
	}
	selected, err := viewSelection(base, st)
	if err != nil {
		return nil, err
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
	v := &storage.Table{Ks: base.Ks, Name: name, Options: map[string]grammar.OptValue{}, TableStore: &storage.TableStore{},
		View: &storage.ViewDef{Base: base.Name, BaseID: base.Id, IncludeAll: st.Star, NotNull: st.NotNull}}
	if err := v.SetOptions(st.Options, true); err != nil {
		return nil, err
	}
	viewColumns(v, base, st, selected)
	if !v.IdGiven {
		v.Id = newSchemaVersion()
	}
	v.Finish()
	v.Data.Store(storage.NewTableData())
	return v, nil
}

// viewableBase checks that a view, name, may be made of base: neither a view nor a counter
// table, and with tombstones kept long enough for the view's updates.
func viewableBase(base *storage.Table, name string) error {
	if base.View != nil {
		return invalidf("Materialized views cannot be created against other materialized views")
	}
	if base.Counter {
		return invalidf("Materialized views are not supported on counter tables")
	}
	if gc, ok := base.Options["gc_grace_seconds"]; ok && gc.Text == "0" {
		return invalidf("Cannot create materialized view '%s' for base table '%s' with gc_grace_seconds of 0, since this value is used to TTL undelivered updates. Setting gc_grace_seconds too low might cause undelivered updates to expire before being replayed.", name, base.Name)
	}
	return nil
}

// viewSelection returns the base's columns that the view selects (all of them with *), each
// of which must exist and not be static.
func viewSelection(base *storage.Table, st *grammar.CreateViewStmt) (map[string]bool, error) {
	selected := map[string]bool{}
	if st.Star {
		for _, c := range base.Cols {
			selected[c.Name] = true
		}
	}
	for _, n := range st.Cols {
		if base.ByName[n] == nil {
			return nil, invalidf("Undefined column name %s in table %s", n, tableString(base))
		}
		selected[n] = true
	}
	for _, c := range base.Cols {
		if selected[c.Name] && c.Kind == storage.KindStatic {
			return nil, invalidf("Cannot include static column '%s' in materialized view '%s'", c.Name, st.Name.Name)
		}
	}
	return selected, nil
}

// viewColumns gives the view v its columns, copies of the base's: its primary key as
// declared, then the other selected columns, regular, in the order of their names.
func viewColumns(v, base *storage.Table, st *grammar.CreateViewStmt, selected map[string]bool) {
	inKey := map[string]bool{}
	for i, n := range st.Pk {
		c := *base.ByName[n]
		c.Kind, c.Pos, c.Desc = storage.KindPartitionKey, i, false
		v.Pk = append(v.Pk, &c)
		inKey[n] = true
	}
	for i, n := range st.Ck {
		c := *base.ByName[n]
		c.Kind, c.Pos, c.Desc = storage.KindClustering, i, false
		if i < len(st.Order) {
			c.Desc = st.Order[i].Desc
		}
		v.Ck = append(v.Ck, &c)
		inKey[n] = true
	}
	var rest []*storage.Column
	for _, bc := range base.Cols {
		if selected[bc.Name] && !inKey[bc.Name] {
			c := *bc
			c.Kind = storage.KindRegular
			rest = append(rest, &c)
		}
	}
	storage.SortColumns(rest)
	for i, c := range rest {
		c.Pos = i
	}
	v.Cells = rest
}

// checkViewKey checks the view's primary key: selected columns, each once, of types a key
// may have, holding every key column of the base and at most one other.
func checkViewKey(base *storage.Table, st *grammar.CreateViewStmt, selected map[string]bool) error {
	name := st.Name.Name
	if len(st.Pk) == 0 {
		return invalidf("Must provide at least one partition key column for materialized view '%s'", name)
	}
	seen := map[string]bool{}
	for _, n := range append(slices.Clone(st.Pk), st.Ck...) {
		c := base.ByName[n]
		if c == nil || !selected[n] {
			return invalidf("Unknown column '%s' referenced in PRIMARY KEY for materialized view '%s'", n, name)
		}
		if seen[n] {
			return invalidf("Duplicate column '%s' in PRIMARY KEY clause for materialized view '%s'", n, name)
		}
		seen[n] = true
		if !c.Frozen {
			if cqlvalue.IsUDT(c.Typ) {
				return invalidf("Invalid non-frozen user-defined type '%s' for PRIMARY KEY column '%s'", c.Text, n)
			}
			return invalidf("Invalid non-frozen collection type '%s' for PRIMARY KEY column '%s'", c.Text, n)
		}
		if cqlvalue.ReferencesDuration(c.Typ) {
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
	for _, c := range append(slices.Clone(base.Pk), base.Ck...) {
		if !seen[c.Name] {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) > 0 {
		return invalidf("Cannot create materialized view '%s' without primary key columns %s from base table '%s'", name, strings.Join(missing, ", "), base.Name)
	}
	for _, n := range append(slices.Clone(st.Pk), st.Ck...) {
		if k := base.ByName[n].Kind; k != storage.KindPartitionKey && k != storage.KindClustering {
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
func checkViewWhere(base *storage.Table, st *grammar.CreateViewStmt) error {
	for _, n := range append(slices.Clone(st.NotNull), st.Others...) {
		if n != "" && base.ByName[n] == nil {
			return invalidf("Undefined column name %s in table %s", n, tableString(base))
		}
	}
	var illegal []string
	for _, n := range st.Others {
		if n == "" {
			return invalidf("Cannot use token relation when defining a materialized view")
		}
		if k := base.ByName[n].Kind; k != storage.KindPartitionKey && k != storage.KindClustering {
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
	k, v, err := lookup(d, st.Name, st.IfExists, "Materialized view '%s.%s' doesn't exist", func(k *storage.Keyspace) *storage.Table {
		if t := k.Tables[st.Name.Name]; t != nil && t.View != nil {
			return t
		}
		return nil
	})
	if v == nil {
		return nil, err
	}
	ksName := k.Name
	if err := d.require("ALTER", grammar.Resource{Kind: grammar.ResTable, Ks: ksName, Name: v.View.Base}); err != nil {
		return nil, err
	}
	if st.Alter {
		if _, ok := st.Opts["default_time_to_live"]; ok {
			return nil, invalidf("Cannot set default_time_to_live on a materialized view. Data in a materialized view always expire at the same time than the corresponding data in the parent table.")
		}
		nv := v.Alter()
		if err := nv.SetOptions(st.Opts, false); err != nil {
			return nil, err
		}
		nv.Finish()
		d.mutable(ksName).Tables[v.Name] = nv
		return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: ksName, Name: v.Name}, nil
	}
	delete(d.mutable(ksName).Tables, v.Name)
	d.stale[v.TableStore] = true
	d.after = append(d.after, func() { v.Dropped.Store(true) })
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetTable, Keyspace: ksName, Name: v.Name}, nil
}

// viewsOf returns the names of the views of table name in k, sorted.
func viewsOf(k *storage.Keyspace, name string) []string {
	var out []string
	for _, t := range k.Tables {
		if t.View != nil && t.View.Base == name {
			out = append(out, t.Name)
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
		for name, t := range k.Tables {
			if t.View != nil {
				continue
			}
			names := viewsOf(k, name)
			if len(names) == 0 && len(t.Views) == 0 {
				continue
			}
			nt := t.Alter()
			nt.Finish()
			for _, vn := range names {
				nt.Views = append(nt.Views, linkView(nt, k.Tables[vn]))
			}
			k.Tables[name] = nt
		}
	}
}

// linkView maps the view's columns to the base's.
func linkView(base, v *storage.Table) *storage.ViewLink {
	l := &storage.ViewLink{V: v, Cells: make([]*storage.Column, len(v.Cells))}
	for _, c := range v.Pk {
		l.Pk = append(l.Pk, base.ByName[c.Name])
	}
	for _, c := range v.Ck {
		l.Ck = append(l.Ck, base.ByName[c.Name])
	}
	for i, c := range v.Cells {
		if c != nil {
			l.Cells[i] = base.ByName[c.Name]
		}
	}
	for _, c := range append(slices.Clone(l.Pk), l.Ck...) {
		if c != nil && c.Kind != storage.KindPartitionKey && c.Kind != storage.KindClustering {
			l.KeyCol = c
		}
	}
	return l
}

// buildView fills a new view from its base table's rows, as Cassandra's view builder does.
func (e *Engine) buildView(ks, baseName, viewName string) {
	base := e.schema.Load().Table(ks, baseName)
	if base == nil {
		return
	}
	var l *storage.ViewLink
	for _, vl := range base.Views {
		if vl.V.Name == viewName {
			l = vl
		}
	}
	if l == nil {
		return
	}
	base.ViewMu.Lock()
	defer base.ViewMu.Unlock()
	now := e.cfg.Now().Unix()
	d := base.Data.Load()
	for _, p := range d.Scan() {
		var pkBuf [4][]byte
		pkVals, ok := storage.DecodePKInto(pkBuf[:0], p.Key, len(base.Pk))
		if !ok {
			continue
		}
		sh := d.Shard(p.Token)
		sh.Mu.RLock()
		for _, r := range p.Rows {
			if r.Live(now) {
				if k := l.Key(pkVals, r, true, now); k.Ok {
					l.V.Data.Load().PutRow(l, &k, r, now)
				}
			}
		}
		sh.Mu.RUnlock()
	}
}

// addToViews adds a regular column just added to a base table to those of its views that
// select every column (SELECT *), as Cassandra does.
func (d *ddl) addToViews(k *storage.Keyspace, views []string, bc *storage.Column) {
	for _, vn := range views {
		v := d.mutable(k.Name).Tables[vn]
		if !v.View.IncludeAll {
			continue
		}
		nv := v.Alter()
		c := *bc
		c.Pos = len(nv.Cells)
		nv.Cells = append(nv.Cells, &c)
		nv.Finish()
		d.mutable(k.Name).Tables[vn] = nv
		d.stale[v.TableStore] = true
		d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.Name, Name: vn})
	}
}

// renameInViews renames a key column of a base table in its views too, as Cassandra does:
// in their keys and their WHERE clauses.
func (d *ddl) renameInViews(k *storage.Keyspace, views []string, from, to string) {
	for _, vn := range views {
		v := d.mutable(k.Name).Tables[vn]
		nv := v.Alter()
		for _, keys := range [][]*storage.Column{nv.Pk, nv.Ck} {
			for i, c := range keys {
				if c.Name == from {
					renamed := *c
					renamed.Name = to
					keys[i] = &renamed
				}
			}
		}
		def := *v.View
		def.NotNull = slices.Clone(def.NotNull)
		for i, n := range def.NotNull {
			if n == from {
				def.NotNull[i] = to
			}
		}
		nv.View = &def
		nv.Finish()
		d.mutable(k.Name).Tables[vn] = nv
		d.stale[v.TableStore] = true
		d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.Name, Name: vn})
	}
}
