package storage

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// A table's schema as its data sees it: its columns, indexes and views, and the store of
// its data (data.go), shared by its schema versions. schema.go builds tables; the write
// path (storage.go) and the views (viewdata.go) read them.

// colKind is the role of a column in its table.
type colKind uint8

const (
	KindPartitionKey colKind = iota
	KindClustering
	KindRegular
	KindStatic
)

var ColKindNames = [...]string{"partition_key", "clustering", "regular", "static"}

// column is a column of a table. It is immutable once its table is published.
type Column struct {
	Name   string
	Typ    cql.TypeInfo
	Text   string // the type's spelling in system_schema.columns
	Ref    *grammar.TypeRef
	Frozen bool // a single cell: a native type, or a frozen collection or user type
	Kind   colKind
	// pos is the position among the partition key or clustering columns; for regular and
	// static columns it is the slot of the column's cell in a row. A slot is never reused:
	// ALTER TABLE ADD takes a new one, so rows written before it are shorter (row.cell).
	Pos  int
	Desc bool
}

// tableStore is what the schema versions of one table share: its data, and whether it was
// dropped. ALTER TABLE publishes a new table with the same store.
type TableStore struct {
	Data atomic.Pointer[TableData]
	// perNode, for system.local and the peers tables of a cluster, holds each node's own
	// rows; data holds the first node's. See table.load.
	PerNode atomic.Pointer[[]*TableData]
	// dropped is set when the table leaves the schema, so compiled plans recompile.
	Dropped atomic.Bool
	// casMu serializes the table's conditional writes.
	CasMu sync.Mutex
	// viewMu serializes the writes to a base table of materialized views, so that each
	// reads the rows it changes as they were before it and after it (view.go).
	ViewMu sync.Mutex
}

// table is a table's schema and its data. The schema fields are immutable once published;
// data is replaced whole by TRUNCATE.
type Table struct {
	Ks, Name string
	Id       [16]byte
	IdGiven  bool      // CREATE TABLE ... WITH id = ...
	Cols     []*Column // SELECT * order: partition key, clustering, then the rest by name
	ByName   map[string]*Column
	Pk       []*Column
	Ck       []*Column
	Cells    []*Column // regular and static columns by slot (column.pos); nil for a dropped one
	static   bool      // the table has static columns
	Counter  bool      // a counter table
	Compact  bool
	Options  map[string]grammar.OptValue
	Comment  string
	Virtual  bool
	Ttl      int32 // default_time_to_live
	Indexes  []*Index
	DroppedC []DroppedColumn
	// view is set on a materialized view: its definition (view.go).
	View *ViewDef
	// views are the materialized views of a base table, linked to this version of it; they
	// are linked again whenever the schema of the keyspace changes (ddl.relinkViews).
	Views []*ViewLink

	*TableStore

	// starSpecs is the result metadata of SELECT *.
	StarSpecs []cql.ColumnSpec
}

// droppedColumn is a row of system_schema.dropped_columns.
type DroppedColumn struct {
	Name, Text string
	Kind       colKind
	At         int64 // microseconds
}

// hasStatic reports whether the table has static columns.
func (t *Table) HasStatic() bool { return t.static }

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

// target is the index's target as system_schema.indexes shows it: v, values(l), keys(m).
func (ix *Index) Target() string {
	if ix.Kind == grammar.IndexSimple {
		return cqlvalue.QuoteName(ix.Col)
	}
	return grammar.IndexKindNames[ix.Kind] + "(" + cqlvalue.QuoteName(ix.Col) + ")"
}
