package node

import (
	"strings"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

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

// function is a user-defined function. It is immutable once published.
type function struct {
	ks, name     string
	argNames     []string
	argRefs      []*grammar.TypeRef
	argTypes     []ctype
	retRef       *grammar.TypeRef
	ret          ctype
	calledOnNull bool
	language     string
	body         string
}

// aggregate is a user-defined aggregate. It is immutable once published.
type aggregate struct {
	ks, name  string
	argRefs   []*grammar.TypeRef
	argTypes  []ctype
	stateFunc string
	stateType ctype
	finalFunc string
	ret       ctype
	initCond  string // the CQL literal; "" for none
}

// index is a secondary index of a table. It is immutable once published.
type index struct {
	name string
	col  string
	kind grammar.IndexKind
}

// serves reports whether an index of the table answers the relation op on col.
func (t *table) serves(col *column, op grammar.RelOp) bool {
	for _, ix := range t.indexes {
		if ix.col != col.name {
			continue
		}
		switch {
		case op == grammar.OpEq && (ix.kind == grammar.IndexSimple || ix.kind == grammar.IndexFull),
			op == grammar.OpContains && ix.kind == grammar.IndexValues,
			op == grammar.OpContainsKey && ix.kind == grammar.IndexKeys,
			op == grammar.OpMapEq && ix.kind == grammar.IndexEntries:
			return true
		}
	}
	return false
}

// load returns the table's data as the node numbered node sees it: system.local and the
// peers tables differ from node to node, every other table is shared.
func (t *table) load(node int) *tableData {
	if pn := t.perNode.Load(); pn != nil && node > 0 && node < len(*pn) {
		return (*pn)[node]
	}
	return t.data.Load()
}

// resolve resolves the type's fields against rs.
func (u *userType) resolve(rs resolver) error {
	u.fields = make([]ctype, len(u.fieldRefs))
	for i, r := range u.fieldRefs {
		ct, err := rs.resolve(r)
		if err != nil {
			return err
		}
		u.fields[i] = ct
	}
	return nil
}

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

func (f *function) signature() string { return signature(f.name, f.argTypes) }

func (a *aggregate) signature() string { return signature(a.name, a.argTypes) }

// target is the index's target as system_schema.indexes shows it: v, values(l), keys(m).
func (ix *index) target() string {
	if ix.kind == grammar.IndexSimple {
		return cqlvalue.QuoteName(ix.col)
	}
	return grammar.IndexKindNames[ix.kind] + "(" + cqlvalue.QuoteName(ix.col) + ")"
}

// signature is a function's key among its overloads: name(type, ...).
func signature(name string, args []ctype) string {
	return name + "(" + strings.Join(typeTexts(args), ", ") + ")"
}
