package storage

import (
	"strings"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// hasColumn reports whether the table being altered has a column of that name.
func (t *Table) HasColumn(n string) bool { return t.Column(n) != nil }

// column finds a column by name among the key columns and the live cells.
func (t *Table) Column(n string) *Column {
	for _, c := range t.Pk {
		if c.Name == n {
			return c
		}
	}
	for _, c := range t.Ck {
		if c.Name == n {
			return c
		}
	}
	for _, c := range t.Cells {
		if c != nil && c.Name == n {
			return c
		}
	}
	return nil
}

// indexesOn returns the names of the table's indexes on column n.
func (t *Table) IndexesOn(n string) []string {
	var out []string
	for _, ix := range t.Indexes {
		if ix.Col == n {
			out = append(out, ix.Name)
		}
	}
	return out
}

// clearSlots deletes the cells of dropped columns from every row, so that they neither
// keep a row alive nor come back if a column of that name is added again.
func (s *TableStore) ClearSlots(slots []int) {
	d := s.Data.Load()
	for i := range d.shards {
		sh := &d.shards[i]
		sh.Mu.Lock()
		for _, p := range sh.parts {
			if p.Static != nil {
				p.Static.clear(slots)
			}
			for _, r := range p.Rows {
				r.clear(slots)
			}
		}
		sh.Mu.Unlock()
	}
}

func (r *Row) clear(slots []int) {
	for _, s := range slots {
		if s < len(r.cells) {
			r.cells[s] = Cell{Ts: noTS}
		}
	}
}

// function is a user-defined function. It is immutable once published.
type Function struct {
	Ks, Name     string
	ArgNames     []string
	ArgRefs      []*grammar.TypeRef
	ArgTypes     []Ctype
	RetRef       *grammar.TypeRef
	Ret          Ctype
	CalledOnNull bool
	Language     string
	Body         string
}

// aggregate is a user-defined aggregate. It is immutable once published.
type Aggregate struct {
	Ks, Name  string
	ArgRefs   []*grammar.TypeRef
	ArgTypes  []Ctype
	StateFunc string
	StateType Ctype
	FinalFunc string
	Ret       Ctype
	InitCond  string // the CQL literal; "" for none
}

// index is a secondary index of a table. It is immutable once published.
type Index struct {
	Name string
	Col  string
	Kind grammar.IndexKind
}

// serves reports whether an index of the table answers the relation op on col.
func (t *Table) Serves(col *Column, op grammar.RelOp) bool {
	for _, ix := range t.Indexes {
		if ix.Col != col.Name {
			continue
		}
		switch {
		case op == grammar.OpEq && (ix.Kind == grammar.IndexSimple || ix.Kind == grammar.IndexFull),
			op == grammar.OpContains && ix.Kind == grammar.IndexValues,
			op == grammar.OpContainsKey && ix.Kind == grammar.IndexKeys,
			op == grammar.OpMapEq && ix.Kind == grammar.IndexEntries:
			return true
		}
	}
	return false
}

// load returns the table's data as the node numbered node sees it: system.local and the
// peers tables differ from node to node, every other table is shared.
func (t *Table) Load(node int) *TableData {
	if pn := t.PerNode.Load(); pn != nil && node > 0 && node < len(*pn) {
		return (*pn)[node]
	}
	return t.Data.Load()
}

// resolve resolves the type's fields against rs.
func (u *UserType) Resolve(rs Resolver) error {
	u.Fields = make([]Ctype, len(u.FieldRefs))
	for i, r := range u.FieldRefs {
		ct, err := rs.Resolve(r)
		if err != nil {
			return err
		}
		u.Fields[i] = ct
	}
	return nil
}

// viewDef is what a view table knows of its definition.
type ViewDef struct {
	Base       string // the base table's name, in the view's keyspace
	BaseID     [16]byte
	IncludeAll bool     // SELECT *: columns added to the base are added to the view
	NotNull    []string // WHERE ... IS NOT NULL, for system_schema.views.where_clause
}

// whereClause is the view's WHERE clause as system_schema.views shows it.
func (v *ViewDef) WhereClause() string {
	parts := make([]string, len(v.NotNull))
	for i, c := range v.NotNull {
		parts[i] = cqlvalue.QuoteName(c) + " IS NOT NULL"
	}
	return strings.Join(parts, " AND ")
}

// viewLink is a view as one version of its base table maintains it: for each of the view's
// key columns and cell slots, the base column it copies.
type ViewLink struct {
	V      *Table
	Pk, Ck []*Column // base columns of the view's partition key and clustering columns
	Cells  []*Column // by view slot; nil for a slot of a dropped column
	// keyCol is the base's regular column in the view's key, if any: the view row lives
	// as long as its cell.
	KeyCol *Column
}

func (f *Function) Signature() string { return Signature(f.Name, f.ArgTypes) }

func (a *Aggregate) Signature() string { return Signature(a.Name, a.ArgTypes) }

// target is the index's target as system_schema.indexes shows it: v, values(l), keys(m).
func (ix *Index) Target() string {
	if ix.Kind == grammar.IndexSimple {
		return cqlvalue.QuoteName(ix.Col)
	}
	return grammar.IndexKindNames[ix.Kind] + "(" + cqlvalue.QuoteName(ix.Col) + ")"
}

// signature is a function's key among its overloads: name(type, ...).
func Signature(name string, args []Ctype) string {
	return name + "(" + strings.Join(TypeTexts(args), ", ") + ")"
}

func TypeTexts(ts []Ctype) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Text
	}
	return out
}
