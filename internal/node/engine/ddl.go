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

// ddlPlan executes schema statements.
type ddlPlan struct {
	st grammar.Statement
	ks string // the session keyspace at preparation
}

func (p *ddlPlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	e.ddlMu.Lock()
	sc := e.schema.Load()
	d := &ddl{e: e, sc: sc, n: sc.Clone(), x: x, ks: p.ks, cloned: map[string]*storage.Keyspace{}, stale: map[*storage.TableStore]bool{}}
	if d.ks == "" && x.s != nil {
		d.ks = x.s.Keyspace
	}
	change, err := d.apply(p.st)
	if err != nil || change == nil {
		e.ddlMu.Unlock()
		if err != nil {
			return nil, err
		}
		return cql.VoidResult{}, nil
	}
	d.relinkViews()
	d.n.Version = newSchemaVersion()
	e.refreshSystem(d.n)
	e.schema.Store(d.n)
	for _, f := range d.after {
		f()
	}
	if len(d.stale) > 0 {
		e.invalidatePrepared(d.stale)
	}
	e.ddlMu.Unlock()
	if x.tr != nil {
		x.tr.Event("Schema change: " + change.ChangeType + " " + change.Target + " " + change.Keyspace + " " + change.Name)
	}
	e.notify(*change)
	for _, ev := range d.events {
		e.notify(ev)
	}
	return cql.SchemaChangeResult{Change: *change}, nil
}

// invalidatePrepared forgets the prepared statements that use one of the tables, as
// Cassandra does when a table's columns change: their next EXECUTE gets Unprepared, and the
// driver prepares them again, learning the new result metadata.
func (e *Engine) invalidatePrepared(stores map[*storage.TableStore]bool) {
	e.prepMu.Lock()
	defer e.prepMu.Unlock()
	for id, pr := range e.prepared {
		c := pr.plan.Load()
		if c == nil {
			continue
		}
		for _, s := range c.tables {
			if stores[s] {
				delete(e.prepared, id)
				break
			}
		}
	}
}

// apply changes d.n and returns the change, or nil when nothing changed.
func (d *ddl) apply(st grammar.Statement) (*cql.SchemaChange, error) {
	switch st := st.(type) {
	case *grammar.CreateKeyspaceStmt:
		return d.createKeyspace(st)
	case *grammar.AlterKeyspaceStmt:
		return d.alterKeyspace(st)
	case *grammar.DropKeyspaceStmt:
		return d.dropKeyspace(st)
	case *grammar.CreateTableStmt:
		return d.createTable(st)
	case *grammar.AlterTableStmt:
		return d.alterTable(st)
	case *grammar.DropTableStmt:
		return d.dropTable(st)
	case *grammar.CreateTypeStmt:
		return d.createType(st)
	case *grammar.AlterTypeStmt:
		return d.alterType(st)
	case *grammar.DropTypeStmt:
		return d.dropType(st)
	case *grammar.CreateIndexStmt:
		return d.createIndex(st)
	case *grammar.DropIndexStmt:
		return d.dropIndex(st)
	case *grammar.ViewStmt:
		return d.view(st)
	case *grammar.CreateViewStmt:
		return d.createView(st)
	case *grammar.CreateFunctionStmt:
		return d.createFunction(st)
	case *grammar.CreateAggregateStmt:
		return d.createAggregate(st)
	case *grammar.DropFunctionStmt:
		return d.dropFunction(st)
	}
	return nil, invalidf("unsupported schema statement")
}

func (d *ddl) createKeyspace(st *grammar.CreateKeyspaceStmt) (*cql.SchemaChange, error) {
	if err := d.require("CREATE", grammar.Resource{Kind: grammar.ResAllKeyspaces}); err != nil {
		return nil, err
	}
	if !validName(st.Name) {
		return nil, invalidf("Keyspace name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"%s\")", st.Name)
	}
	if d.sc.Keyspaces[st.Name] != nil {
		if st.IfNotExists {
			return nil, nil
		}
		return nil, &cql.Error{Code: cql.ErrCodeAlreadyExists, Message: "Keyspace '" + st.Name + "' already exists", Keyspace: st.Name}
	}
	repl, err := replication(st.Opts.Replication, dataCenters(d.e.nodes))
	if err != nil {
		return nil, err
	}
	durable := st.Opts.DurableWrites == nil || *st.Opts.DurableWrites
	d.created(grammar.Resource{Kind: grammar.ResKeyspace, Ks: st.Name})
	d.n.Keyspaces[st.Name] = &storage.Keyspace{Name: st.Name, Replication: repl, DurableWrites: durable, Tables: map[string]*storage.Table{},
		Types: map[string]*storage.UserType{}, Functions: map[string]*storage.Function{}, Aggregates: map[string]*storage.Aggregate{}}
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetKeyspace, Keyspace: st.Name}, nil
}

func (d *ddl) alterKeyspace(st *grammar.AlterKeyspaceStmt) (*cql.SchemaChange, error) {
	if err := d.require("ALTER", grammar.Resource{Kind: grammar.ResKeyspace, Ks: st.Name}); err != nil {
		return nil, err
	}
	k := d.sc.Keyspaces[st.Name]
	if k == nil {
		return nil, noKeyspace(st.Name, st.IfExists)
	}
	if err := modifiable(k, "ALTER", "<keyspace "+k.Name+">"); err != nil {
		return nil, err
	}
	nk := d.mutable(k.Name)
	if st.Opts.Replication != nil {
		repl, err := replication(st.Opts.Replication, dataCenters(d.e.nodes))
		if err != nil {
			return nil, err
		}
		nk.Replication = repl
	}
	if st.Opts.DurableWrites != nil {
		nk.DurableWrites = *st.Opts.DurableWrites
	}
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetKeyspace, Keyspace: k.Name}, nil
}

func (d *ddl) dropKeyspace(st *grammar.DropKeyspaceStmt) (*cql.SchemaChange, error) {
	if err := d.require("DROP", grammar.Resource{Kind: grammar.ResKeyspace, Ks: st.Name}); err != nil {
		return nil, err
	}
	k := d.sc.Keyspaces[st.Name]
	if k == nil {
		if st.IfExists {
			return nil, nil
		}
		return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Cannot drop non existing keyspace '" + st.Name + "'."}
	}
	if err := modifiable(k, "DROP", "<keyspace "+k.Name+">"); err != nil {
		return nil, err
	}
	delete(d.n.Keyspaces, st.Name)
	d.dropped(grammar.Resource{Kind: grammar.ResKeyspace, Ks: st.Name})
	d.dropped(grammar.Resource{Kind: grammar.ResKeyspaceFunctions, Ks: st.Name})
	for _, t := range k.Tables {
		d.stale[t.TableStore] = true
	}
	d.after = append(d.after, func() {
		for _, t := range k.Tables {
			t.Dropped.Store(true)
			d.e.mem.Release(t.Data.Load())
		}
	})
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetKeyspace, Keyspace: st.Name}, nil
}

func (d *ddl) createTable(st *grammar.CreateTableStmt) (*cql.SchemaChange, error) {
	ksName, err := d.keyspaceName(st.Table.Ks)
	if err != nil {
		return nil, err
	}
	k, err := d.keyspaceToCreateIn(ksName, need{Perm: "CREATE", Res: grammar.Resource{Kind: grammar.ResKeyspace, Ks: ksName}})
	if k == nil {
		return nil, err
	}
	if !validName(st.Table.Name) {
		return nil, invalidf("Table name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"%s\")", st.Table.Name)
	}
	if k.Tables[st.Table.Name] != nil {
		if st.IfNotExists {
			return nil, nil
		}
		return nil, &cql.Error{Code: cql.ErrCodeAlreadyExists, Message: "Cannot add already existing table \"" + st.Table.Name + "\" to keyspace \"" + ksName + "\"", Keyspace: ksName, Table: st.Table.Name}
	}
	t, err := storage.NewTable(ksName, st, k.Resolver())
	if err != nil {
		return nil, err
	}
	if !t.IdGiven {
		t.Id = newSchemaVersion()
	}
	t.Finish()
	t.Data.Store(d.e.mem.NewData())
	d.created(grammar.Resource{Kind: grammar.ResTable, Ks: ksName, Name: t.Name})
	d.mutable(ksName).Tables[t.Name] = t
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetTable, Keyspace: ksName, Name: t.Name}, nil
}

func (d *ddl) dropTable(st *grammar.DropTableStmt) (*cql.SchemaChange, error) {
	k, t, err := d.tableToChange(st.Table, tableLookup{perm: "DROP", ifExists: st.IfExists, keyspaceFirst: true, missing: "Table '%s.%s' doesn't exist"})
	if t == nil {
		return nil, err
	}
	ksName := k.Name
	if t.View != nil {
		return nil, invalidf("Cannot use DROP TABLE on a materialized view. Please use DROP MATERIALIZED VIEW instead.")
	}
	if len(viewsOf(k, t.Name)) > 0 {
		// 4.1 names the keyspace here, not the views (its format string's arguments).
		return nil, invalidf("Cannot drop a table when materialized views still depend on it (%s)", ksName)
	}
	delete(d.mutable(ksName).Tables, t.Name)
	d.dropped(grammar.Resource{Kind: grammar.ResTable, Ks: ksName, Name: t.Name})
	d.stale[t.TableStore] = true
	d.after = append(d.after, func() { t.Dropped.Store(true); d.e.mem.Release(t.Data.Load()) })
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetTable, Keyspace: ksName, Name: t.Name}, nil
}

func (d *ddl) alterTable(st *grammar.AlterTableStmt) (*cql.SchemaChange, error) {
	k, t, err := d.tableToChange(st.Table, tableLookup{perm: "ALTER", ifExists: st.IfExists, missing: "Table '%s.%s' doesn't exist"})
	if t == nil {
		return nil, err
	}
	if t.View != nil {
		return nil, invalidf("Cannot use ALTER TABLE on a materialized view; use ALTER MATERIALIZED VIEW instead")
	}
	a := &tableAlter{d: d, k: k, t: t, nt: t.Alter(), views: viewsOf(k, t.Name)}
	changed := false // the columns changed: prepared statements of the table are stale
	switch st.Op {
	case grammar.AlterAdd:
		changed, err = a.add(st)
	case grammar.AlterDrop:
		changed, err = a.drop(st)
	case grammar.AlterRename:
		changed, err = a.rename(st)
	case grammar.AlterOptions:
		err = a.nt.SetOptions(st.Opts, false)
	case grammar.AlterType:
		err = invalidf("Altering column types is no longer supported")
	case grammar.AlterDropCompact:
		err = invalidf("DROP COMPACT STORAGE is disabled. Enable in cassandra.yaml to use.")
	}
	if err != nil {
		return nil, err
	}
	a.nt.Finish()
	d.mutable(k.Name).Tables[t.Name] = a.nt
	if changed {
		d.stale[t.TableStore] = true
	}
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.Name, Name: t.Name}, nil
}

// tableAlter is an ALTER TABLE of table t in keyspace k: nt is the copy it changes, views
// the names of the views on t.
type tableAlter struct {
	d     *ddl
	k     *storage.Keyspace
	t, nt *storage.Table
	views []string
}

// add adds the columns of ALTER TABLE ... ADD, and their views' columns, and reports
// whether it added any (with IF NOT EXISTS, it skips those that exist).
func (a *tableAlter) add(st *grammar.AlterTableStmt) (bool, error) {
	changed := false
	rs := a.k.Resolver()
	for _, c := range st.Add {
		if a.nt.HasColumn(c.Name) {
			if st.IfColumn {
				continue
			}
			return false, invalidf("Column with name '%s' already exists", c.Name)
		}
		col, err := a.newColumn(rs, c)
		if err != nil {
			return false, err
		}
		a.nt.Cells = append(a.nt.Cells, col)
		changed = true
		if !c.Static {
			a.d.addToViews(a.k, a.views, col)
		}
	}
	return changed, nil
}

// newColumn is the column that ADD defines, once the table may take it.
func (a *tableAlter) newColumn(rs storage.Resolver, c grammar.ColDef) (*storage.Column, error) {
	t := a.t
	if t.Compact {
		return nil, invalidf("Cannot add new column to a COMPACT STORAGE table")
	}
	if c.Static && len(t.Ck) == 0 {
		return nil, invalidf("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
	}
	ct, err := rs.Resolve(c.Ref)
	if err != nil {
		return nil, err
	}
	if err := storage.CheckNonFrozenUDT(rs, ct, c.Name); err != nil {
		return nil, err
	}
	kind := storage.KindRegular
	if c.Static {
		kind = storage.KindStatic
	}
	col := &storage.Column{Name: c.Name, Typ: ct.Info, Text: ct.Text, Ref: c.Ref, Frozen: ct.Frozen, Kind: kind, Pos: len(a.nt.Cells)}
	if err := a.readdable(col); err != nil {
		return nil, err
	}
	if isCounter := ct.Info.ID == cql.TypeCounter; isCounter != t.Counter {
		// TableMetadata.validate's ConfigurationException, prefixed by the table.
		if t.Counter {
			return nil, storage.Configf("%s.%s: Cannot have a non counter column (\"%s\") in a counter table", t.Ks, t.Name, c.Name)
		}
		return nil, storage.Configf("%s.%s: Cannot have a counter column (\"%s\") in a non counter table", t.Ks, t.Name, c.Name)
	}
	return col, nil
}

// readdable checks that column c, if one of its name was dropped before, comes back as it
// was: of its type, of its kind, and not in a counter table.
func (a *tableAlter) readdable(c *storage.Column) error {
	i := slices.IndexFunc(a.nt.DroppedC, func(dc storage.DroppedColumn) bool { return dc.Name == c.Name })
	if i < 0 {
		return nil
	}
	dc := a.nt.DroppedC[i]
	if dc.Text != c.Text {
		return invalidf("Cannot re-add previously dropped column '%s' of type %s, incompatible with previous type %s", c.Name, c.Text, dc.Text)
	}
	if dc.Kind != c.Kind {
		return invalidf("Cannot re-add previously dropped column '%s' of kind %s, incompatible with previous kind %s", c.Name, strings.ToUpper(storage.ColKindNames[c.Kind]), strings.ToUpper(storage.ColKindNames[dc.Kind]))
	}
	if a.t.Counter {
		return invalidf("Cannot re-add previously dropped counter column %s", c.Name)
	}
	return nil
}

// drop drops the columns of ALTER TABLE ... DROP, recording them as dropped now, and
// reports whether it dropped any (with IF EXISTS, it skips those that do not exist); their
// cells are cleared once the change is published.
func (a *tableAlter) drop(st *grammar.AlterTableStmt) (bool, error) {
	if st.Ts != nil {
		// Cassandra keeps a dropped column's cells newer than the timestamp, to show
		// them again if the column comes back; the node drops a column's data whole.
		return false, invalidf("ALTER TABLE DROP ... USING TIMESTAMP is not supported by the embedded node")
	}
	t, nt := a.t, a.nt
	var cleared []int
	for _, n := range st.Drop {
		col := nt.Column(n)
		if col == nil {
			if st.IfColumn {
				continue
			}
			return false, invalidf("Column %s was not found in table '%s'", n, tableString(t))
		}
		if err := a.droppable(col); err != nil {
			return false, err
		}
		at := a.d.x.now.UnixMicro()
		nt.DroppedC = slices.DeleteFunc(nt.DroppedC, func(dc storage.DroppedColumn) bool { return dc.Name == n })
		nt.DroppedC = append(nt.DroppedC, storage.DroppedColumn{Name: n, Text: col.Text, Kind: col.Kind, At: at})
		nt.Cells[col.Pos] = nil
		cleared = append(cleared, col.Pos)
	}
	if len(cleared) > 0 {
		store := t.TableStore
		a.d.after = append(a.d.after, func() { store.ClearSlots(cleared) })
	}
	return len(cleared) > 0, nil
}

// droppable checks that column col may be dropped: no key, non-frozen UDT, indexed column,
// nor a column of a table with views.
func (a *tableAlter) droppable(col *storage.Column) error {
	n := col.Name
	if col.Kind == storage.KindPartitionKey || col.Kind == storage.KindClustering {
		return invalidf("Cannot drop PRIMARY KEY column %s", n)
	}
	if cqlvalue.IsUDT(col.Typ) && !col.Frozen {
		return invalidf("Cannot drop non-frozen column %s of user type %s", n, col.Text)
	}
	if names := a.t.IndexesOn(n); len(names) > 0 {
		return invalidf("Cannot drop column %s because it has dependent secondary indexes (%s)", n, strings.Join(names, ", "))
	}
	if len(a.views) > 0 {
		return invalidf("Cannot drop column %s on base table %s with materialized views", n, a.t.Name)
	}
	return nil
}

// rename renames the primary key columns of ALTER TABLE ... RENAME, and in the views, and
// reports whether it renamed any (with IF EXISTS, it skips those that do not exist).
func (a *tableAlter) rename(st *grammar.AlterTableStmt) (bool, error) {
	t, nt := a.t, a.nt
	changed := false
	for _, r := range st.Renames {
		col := t.ByName[r.From]
		if col == nil {
			if st.IfColumn {
				continue
			}
			return false, invalidf("Column %s was not found in table %s", r.From, tableString(t))
		}
		if col.Kind != storage.KindPartitionKey && col.Kind != storage.KindClustering {
			return false, invalidf("Cannot rename non PRIMARY KEY column %s", r.From)
		}
		if t.ByName[r.To] != nil {
			return false, invalidf("Cannot rename column %s to %s in table '%s'; another column with that name already exists", r.From, r.To, tableString(t))
		}
		if names := t.IndexesOn(r.From); len(names) > 0 {
			return false, invalidf("Cannot rename column %s because it has dependent secondary indexes (%s)", r.From, strings.Join(names, ", "))
		}
		renamed := *col
		renamed.Name = r.To
		keys := nt.Pk
		if col.Kind == storage.KindClustering {
			keys = nt.Ck
		}
		for i, c := range keys {
			if c.Name == r.From {
				keys[i] = &renamed
			}
		}
		a.d.renameInViews(a.k, a.views, r.From, r.To)
		changed = true
	}
	return changed, nil
}

// replication validates and normalizes a keyspace's replication map as Cassandra stores it.
// NetworkTopologyStrategy's replication_factor expands to every data center in dcs.
func replication(m map[string]string, dcs []string) (map[string]string, error) {
	class, ok := m["class"]
	if !ok {
		return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Missing replication strategy class"}
	}
	out := map[string]string{}
	switch class {
	case "SimpleStrategy", simpleStrategy:
		out["class"] = simpleStrategy
		rf, ok := m["replication_factor"]
		if !ok {
			return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "SimpleStrategy requires a replication_factor strategy option."}
		}
		if n, err := strconv.Atoi(rf); err != nil || n < 0 {
			return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Replication factor must be non-negative; found " + rf}
		}
		out["replication_factor"] = rf
		for k := range m {
			if k != "class" && k != "replication_factor" {
				return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Unrecognized strategy option {" + k + "} passed to SimpleStrategy for keyspace"}
			}
		}
	case "NetworkTopologyStrategy", ntsStrategy:
		out["class"] = ntsStrategy
		for k, v := range m {
			if k == "class" {
				continue
			}
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Replication factor must be non-negative; found " + v}
			}
			if k == "replication_factor" {
				// Cassandra expands it to every known data center, and an explicit
				// data center wins over it.
				for _, dc := range dcs {
					if _, ok := m[dc]; !ok {
						out[dc] = v
					}
				}
				continue
			}
			out[k] = v
		}
	case "LocalStrategy", localStrategy:
		return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Unable to use given strategy class: LocalStrategy is reserved for internal use."}
	default:
		return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Unable to find replication strategy class '" + class + "'"}
	}
	return out, nil
}
