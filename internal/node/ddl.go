package node

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// ddlPlan executes schema statements.
type ddlPlan struct {
	st statement
	ks string // the session keyspace at preparation
}

// ddl is one schema change in progress: the schema it starts from, the copy it changes, and
// what it must do once the copy is published.
type ddl struct {
	e      *Engine
	sc, n  *schema
	x      *execCtx
	ks     string               // the keyspace of unqualified names
	cloned map[string]*keyspace // keyspaces of n already copied
	events []cql.SchemaChange   // pushed after the change itself, for other objects it changed
	stale  map[*tableStore]bool // tables whose prepared statements must be prepared again
	after  []func()             // work on the data, once the new schema is published
}

func (p *ddlPlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	e.ddlMu.Lock()
	sc := e.schema.Load()
	d := &ddl{e: e, sc: sc, n: sc.clone(), x: x, ks: p.ks, cloned: map[string]*keyspace{}, stale: map[*tableStore]bool{}}
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
	d.n.version = newSchemaVersion()
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
func (e *Engine) invalidatePrepared(stores map[*tableStore]bool) {
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

func validName(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// keyspaceName returns the keyspace a statement names, or the default one.
func (d *ddl) keyspaceName(ks string) (string, error) { return keyspaceOf(ks, d.ks) }

// mutable returns the copy of keyspace name in the new schema, copying it the first time.
func (d *ddl) mutable(name string) *keyspace {
	if k := d.cloned[name]; k != nil {
		return k
	}
	k := d.n.keyspaces[name].clone()
	d.n.keyspaces[name] = k
	d.cloned[name] = k
	return k
}

// replicatedSystem lists the system keyspaces that are replicated: their replication can be
// altered, nothing else.
var replicatedSystem = map[string]bool{"system_auth": true, "system_traces": true, "system_distributed": true}

// modifiable refuses schema changes to system keyspaces as Cassandra's ClientState does.
// perm is CREATE, ALTER or DROP, and resource the DataResource's name, such as
// "<table ks.t>".
func modifiable(k *keyspace, perm, resource string) error {
	if !k.system {
		return nil
	}
	if replicatedSystem[k.name] {
		if perm == "ALTER" && resource == "<keyspace "+k.name+">" {
			return nil
		}
		return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: "Cannot " + perm + " " + resource}
	}
	return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: k.name + " keyspace is not user-modifiable."}
}

// apply changes d.n and returns the change, or nil when nothing changed.
func (d *ddl) apply(st statement) (*cql.SchemaChange, error) {
	switch st := st.(type) {
	case *createKeyspaceStmt:
		return d.createKeyspace(st)
	case *alterKeyspaceStmt:
		return d.alterKeyspace(st)
	case *dropKeyspaceStmt:
		return d.dropKeyspace(st)
	case *createTableStmt:
		return d.createTable(st)
	case *alterTableStmt:
		return d.alterTable(st)
	case *dropTableStmt:
		return d.dropTable(st)
	case *createTypeStmt:
		return d.createType(st)
	case *alterTypeStmt:
		return d.alterType(st)
	case *dropTypeStmt:
		return d.dropType(st)
	case *createIndexStmt:
		return d.createIndex(st)
	case *dropIndexStmt:
		return d.dropIndex(st)
	case *viewStmt:
		return d.view(st)
	case *createViewStmt:
		return d.createView(st)
	case *createFunctionStmt:
		return d.createFunction(st)
	case *createAggregateStmt:
		return d.createAggregate(st)
	case *dropFunctionStmt:
		return d.dropFunction(st)
	}
	return nil, invalidf("unsupported schema statement")
}

func (d *ddl) createKeyspace(st *createKeyspaceStmt) (*cql.SchemaChange, error) {
	if err := d.require("CREATE", resource{kind: resAllKeyspaces}); err != nil {
		return nil, err
	}
	if !validName(st.name) {
		return nil, invalidf("Keyspace name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"%s\")", st.name)
	}
	if d.sc.keyspaces[st.name] != nil {
		if st.ifNotExists {
			return nil, nil
		}
		return nil, &cql.Error{Code: cql.ErrCodeAlreadyExists, Message: "Keyspace '" + st.name + "' already exists", Keyspace: st.name}
	}
	repl, err := replication(st.opts.replication, dataCenters(d.e.nodes))
	if err != nil {
		return nil, err
	}
	durable := st.opts.durableWrites == nil || *st.opts.durableWrites
	d.created(resource{kind: resKeyspace, ks: st.name})
	d.n.keyspaces[st.name] = &keyspace{name: st.name, replication: repl, durableWrites: durable, tables: map[string]*table{},
		types: map[string]*userType{}, functions: map[string]*function{}, aggregates: map[string]*aggregate{}}
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetKeyspace, Keyspace: st.name}, nil
}

func (d *ddl) alterKeyspace(st *alterKeyspaceStmt) (*cql.SchemaChange, error) {
	if err := d.require("ALTER", resource{kind: resKeyspace, ks: st.name}); err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[st.name]
	if k == nil {
		if st.ifExists {
			return nil, nil
		}
		return nil, invalidf("Keyspace '%s' doesn't exist", st.name)
	}
	if err := modifiable(k, "ALTER", "<keyspace "+k.name+">"); err != nil {
		return nil, err
	}
	nk := d.mutable(k.name)
	if st.opts.replication != nil {
		repl, err := replication(st.opts.replication, dataCenters(d.e.nodes))
		if err != nil {
			return nil, err
		}
		nk.replication = repl
	}
	if st.opts.durableWrites != nil {
		nk.durableWrites = *st.opts.durableWrites
	}
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetKeyspace, Keyspace: k.name}, nil
}

func (d *ddl) dropKeyspace(st *dropKeyspaceStmt) (*cql.SchemaChange, error) {
	if err := d.require("DROP", resource{kind: resKeyspace, ks: st.name}); err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[st.name]
	if k == nil {
		if st.ifExists {
			return nil, nil
		}
		return nil, &cql.Error{Code: cql.ErrCodeConfig, Message: "Cannot drop non existing keyspace '" + st.name + "'."}
	}
	if err := modifiable(k, "DROP", "<keyspace "+k.name+">"); err != nil {
		return nil, err
	}
	delete(d.n.keyspaces, st.name)
	d.dropped(resource{kind: resKeyspace, ks: st.name})
	d.dropped(resource{kind: resKeyspaceFunctions, ks: st.name})
	for _, t := range k.tables {
		d.stale[t.tableStore] = true
	}
	d.after = append(d.after, func() {
		for _, t := range k.tables {
			t.dropped.Store(true)
			d.e.mem.release(t.data.Load())
		}
	})
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetKeyspace, Keyspace: st.name}, nil
}

func (d *ddl) createTable(st *createTableStmt) (*cql.SchemaChange, error) {
	ksName, err := d.keyspaceName(st.table.ks)
	if err != nil {
		return nil, err
	}
	if err := d.require("CREATE", resource{kind: resKeyspace, ks: ksName}); err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[ksName]
	if k == nil {
		return nil, invalidf("Keyspace '%s' doesn't exist", ksName)
	}
	if err := modifiable(k, "CREATE", "<keyspace "+ksName+">"); err != nil {
		return nil, err
	}
	if !validName(st.table.name) {
		return nil, invalidf("Table name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"%s\")", st.table.name)
	}
	if k.tables[st.table.name] != nil {
		if st.ifNotExists {
			return nil, nil
		}
		return nil, &cql.Error{Code: cql.ErrCodeAlreadyExists, Message: "Cannot add already existing table \"" + st.table.name + "\" to keyspace \"" + ksName + "\"", Keyspace: ksName, Table: st.table.name}
	}
	t, err := newTable(ksName, st, k.resolver())
	if err != nil {
		return nil, err
	}
	if !t.idGiven {
		t.id = newSchemaVersion()
	}
	t.finish()
	t.data.Store(d.e.mem.newData())
	d.created(resource{kind: resTable, ks: ksName, name: t.name})
	d.mutable(ksName).tables[t.name] = t
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetTable, Keyspace: ksName, Name: t.name}, nil
}

func (d *ddl) dropTable(st *dropTableStmt) (*cql.SchemaChange, error) {
	ksName, err := d.keyspaceName(st.table.ks)
	if err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[ksName]
	if k == nil {
		if st.ifExists {
			return nil, nil
		}
		return nil, invalidf("Keyspace '%s' doesn't exist", ksName)
	}
	t := k.tables[st.table.name]
	if t == nil {
		if st.ifExists {
			return nil, nil
		}
		return nil, invalidf("Table '%s.%s' doesn't exist", ksName, st.table.name)
	}
	if err := d.require("DROP", resource{kind: resTable, ks: ksName, name: t.name}); err != nil {
		return nil, err
	}
	if err := modifiable(k, "DROP", "<table "+ksName+"."+t.name+">"); err != nil {
		return nil, err
	}
	if t.view != nil {
		return nil, invalidf("Cannot use DROP TABLE on a materialized view. Please use DROP MATERIALIZED VIEW instead.")
	}
	if len(viewsOf(k, t.name)) > 0 {
		// 4.1 names the keyspace here, not the views (its format string's arguments).
		return nil, invalidf("Cannot drop a table when materialized views still depend on it (%s)", ksName)
	}
	delete(d.mutable(ksName).tables, t.name)
	d.dropped(resource{kind: resTable, ks: ksName, name: t.name})
	d.stale[t.tableStore] = true
	d.after = append(d.after, func() { t.dropped.Store(true); d.e.mem.release(t.data.Load()) })
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetTable, Keyspace: ksName, Name: t.name}, nil
}

// tableString names a table as Cassandra's TableMetadata.toString does.
func tableString(t *table) string { return quoteName(t.ks) + "." + quoteName(t.name) }

func (d *ddl) alterTable(st *alterTableStmt) (*cql.SchemaChange, error) {
	ksName, err := d.keyspaceName(st.table.ks)
	if err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[ksName]
	var t *table
	if k != nil {
		t = k.tables[st.table.name]
	}
	if t == nil {
		if st.ifExists {
			return nil, nil
		}
		return nil, invalidf("Table '%s.%s' doesn't exist", ksName, st.table.name)
	}
	if err := d.require("ALTER", resource{kind: resTable, ks: ksName, name: t.name}); err != nil {
		return nil, err
	}
	if err := modifiable(k, "ALTER", "<table "+ksName+"."+t.name+">"); err != nil {
		return nil, err
	}
	if t.view != nil {
		return nil, invalidf("Cannot use ALTER TABLE on a materialized view; use ALTER MATERIALIZED VIEW instead")
	}
	views := viewsOf(k, t.name)
	nt := t.alter()
	changed := false // the columns changed: prepared statements of the table are stale
	switch st.op {
	case alterAdd:
		rs := k.resolver()
		for _, c := range st.add {
			if nt.hasColumn(c.name) {
				if st.ifColumn {
					continue
				}
				return nil, invalidf("Column with name '%s' already exists", c.name)
			}
			if t.compact {
				return nil, invalidf("Cannot add new column to a COMPACT STORAGE table")
			}
			if c.static && len(t.ck) == 0 {
				return nil, invalidf("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
			}
			ct, err := rs.resolve(c.ref)
			if err != nil {
				return nil, err
			}
			if err := checkNonFrozenUDT(rs, ct, c.name); err != nil {
				return nil, err
			}
			kind := kindRegular
			if c.static {
				kind = kindStatic
			}
			if i := slices.IndexFunc(nt.droppedC, func(dc droppedColumn) bool { return dc.name == c.name }); i >= 0 {
				dc := nt.droppedC[i]
				if dc.text != ct.text {
					return nil, invalidf("Cannot re-add previously dropped column '%s' of type %s, incompatible with previous type %s", c.name, ct.text, dc.text)
				}
				if dc.kind != kind {
					return nil, invalidf("Cannot re-add previously dropped column '%s' of kind %s, incompatible with previous kind %s", c.name, strings.ToUpper(colKindNames[kind]), strings.ToUpper(colKindNames[dc.kind]))
				}
				if t.counter {
					return nil, invalidf("Cannot re-add previously dropped counter column %s", c.name)
				}
			}
			if isCounter := ct.info.ID == cql.TypeCounter; isCounter != t.counter {
				// TableMetadata.validate's ConfigurationException, prefixed by the table.
				if t.counter {
					return nil, configf("%s.%s: Cannot have a non counter column (\"%s\") in a counter table", t.ks, t.name, c.name)
				}
				return nil, configf("%s.%s: Cannot have a counter column (\"%s\") in a non counter table", t.ks, t.name, c.name)
			}
			nt.cells = append(nt.cells, &column{name: c.name, typ: ct.info, text: ct.text, ref: c.ref, frozen: ct.frozen, kind: kind, pos: len(nt.cells)})
			changed = true
			if !c.static {
				d.addToViews(k, views, nt.cells[len(nt.cells)-1])
			}
		}
	case alterDrop:
		if st.ts != nil {
			// Cassandra keeps a dropped column's cells newer than the timestamp, to show
			// them again if the column comes back; the node drops a column's data whole.
			return nil, invalidf("ALTER TABLE DROP ... USING TIMESTAMP is not supported by the embedded node")
		}
		var cleared []int
		for _, n := range st.drop {
			col := nt.column(n)
			if col == nil {
				if st.ifColumn {
					continue
				}
				return nil, invalidf("Column %s was not found in table '%s'", n, tableString(t))
			}
			if col.kind == kindPartitionKey || col.kind == kindClustering {
				return nil, invalidf("Cannot drop PRIMARY KEY column %s", n)
			}
			if isUDT(col.typ) && !col.frozen {
				return nil, invalidf("Cannot drop non-frozen column %s of user type %s", n, col.text)
			}
			if names := t.indexesOn(n); len(names) > 0 {
				return nil, invalidf("Cannot drop column %s because it has dependent secondary indexes (%s)", n, strings.Join(names, ", "))
			}
			if len(views) > 0 {
				return nil, invalidf("Cannot drop column %s on base table %s with materialized views", n, t.name)
			}
			at := d.x.now.UnixMicro()
			nt.droppedC = slices.DeleteFunc(nt.droppedC, func(dc droppedColumn) bool { return dc.name == n })
			nt.droppedC = append(nt.droppedC, droppedColumn{name: n, text: col.text, kind: col.kind, at: at})
			nt.cells[col.pos] = nil
			cleared = append(cleared, col.pos)
			changed = true
		}
		if len(cleared) > 0 {
			store := t.tableStore
			d.after = append(d.after, func() { store.clearSlots(cleared) })
		}
	case alterRename:
		for _, r := range st.renames {
			col := t.byName[r.from]
			if col == nil {
				if st.ifColumn {
					continue
				}
				return nil, invalidf("Column %s was not found in table %s", r.from, tableString(t))
			}
			if col.kind != kindPartitionKey && col.kind != kindClustering {
				return nil, invalidf("Cannot rename non PRIMARY KEY column %s", r.from)
			}
			if t.byName[r.to] != nil {
				return nil, invalidf("Cannot rename column %s to %s in table '%s'; another column with that name already exists", r.from, r.to, tableString(t))
			}
			if names := t.indexesOn(r.from); len(names) > 0 {
				return nil, invalidf("Cannot rename column %s because it has dependent secondary indexes (%s)", r.from, strings.Join(names, ", "))
			}
			renamed := *col
			renamed.name = r.to
			keys := nt.pk
			if col.kind == kindClustering {
				keys = nt.ck
			}
			for i, c := range keys {
				if c.name == r.from {
					keys[i] = &renamed
				}
			}
			d.renameInViews(k, views, r.from, r.to)
			changed = true
		}
	case alterOptions:
		if err := nt.setOptions(st.opts, false); err != nil {
			return nil, err
		}
	case alterType:
		return nil, invalidf("Altering column types is no longer supported")
	case alterDropCompact:
		return nil, invalidf("DROP COMPACT STORAGE is disabled. Enable in cassandra.yaml to use.")
	}
	nt.finish()
	d.mutable(ksName).tables[t.name] = nt
	if changed {
		d.stale[t.tableStore] = true
	}
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: ksName, Name: t.name}, nil
}

// hasColumn reports whether the table being altered has a column of that name.
func (t *table) hasColumn(n string) bool { return t.column(n) != nil }

// column finds a column by name among the key columns and the live cells.
func (t *table) column(n string) *column {
	for _, c := range t.pk {
		if c.name == n {
			return c
		}
	}
	for _, c := range t.ck {
		if c.name == n {
			return c
		}
	}
	for _, c := range t.cells {
		if c != nil && c.name == n {
			return c
		}
	}
	return nil
}

// indexesOn returns the names of the table's indexes on column n.
func (t *table) indexesOn(n string) []string {
	var out []string
	for _, ix := range t.indexes {
		if ix.col == n {
			out = append(out, ix.name)
		}
	}
	return out
}

// clearSlots deletes the cells of dropped columns from every row, so that they neither
// keep a row alive nor come back if a column of that name is added again.
func (s *tableStore) clearSlots(slots []int) {
	d := s.data.Load()
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.Lock()
		for _, p := range sh.parts {
			if p.static != nil {
				p.static.clear(slots)
			}
			for _, r := range p.rows {
				r.clear(slots)
			}
		}
		sh.mu.Unlock()
	}
}

func (r *row) clear(slots []int) {
	for _, s := range slots {
		if s < len(r.cells) {
			r.cells[s] = cell{ts: noTS}
		}
	}
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
