package node

import (
	"crypto/md5"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// colKind is the role of a column in its table.
type colKind uint8

const (
	kindPartitionKey colKind = iota
	kindClustering
	kindRegular
	kindStatic
)

var colKindNames = [...]string{"partition_key", "clustering", "regular", "static"}

// column is a column of a table. It is immutable once its table is published.
type column struct {
	name   string
	typ    cql.TypeInfo
	text   string // the type's spelling in system_schema.columns
	ref    *grammar.TypeRef
	frozen bool // a single cell: a native type, or a frozen collection or user type
	kind   colKind
	// pos is the position among the partition key or clustering columns; for regular and
	// static columns it is the slot of the column's cell in a row. A slot is never reused:
	// ALTER TABLE ADD takes a new one, so rows written before it are shorter (row.cell).
	pos  int
	desc bool
}

// tableStore is what the schema versions of one table share: its data, and whether it was
// dropped. ALTER TABLE publishes a new table with the same store.
type tableStore struct {
	data atomic.Pointer[tableData]
	// perNode, for system.local and the peers tables of a cluster, holds each node's own
	// rows; data holds the first node's. See table.load.
	perNode atomic.Pointer[[]*tableData]
	// dropped is set when the table leaves the schema, so compiled plans recompile.
	dropped atomic.Bool
	// casMu serializes the table's conditional writes.
	casMu sync.Mutex
	// viewMu serializes the writes to a base table of materialized views, so that each
	// reads the rows it changes as they were before it and after it (view.go).
	viewMu sync.Mutex
}

// table is a table's schema and its data. The schema fields are immutable once published;
// data is replaced whole by TRUNCATE.
type table struct {
	ks, name string
	id       [16]byte
	idGiven  bool      // CREATE TABLE ... WITH id = ...
	cols     []*column // SELECT * order: partition key, clustering, then the rest by name
	byName   map[string]*column
	pk       []*column
	ck       []*column
	cells    []*column // regular and static columns by slot (column.pos); nil for a dropped one
	static   bool      // the table has static columns
	counter  bool      // a counter table
	compact  bool
	options  map[string]grammar.OptValue
	comment  string
	virtual  bool
	ttl      int32 // default_time_to_live
	indexes  []*index
	droppedC []droppedColumn
	// view is set on a materialized view: its definition (view.go).
	view *viewDef
	// views are the materialized views of a base table, linked to this version of it; they
	// are linked again whenever the schema of the keyspace changes (ddl.relinkViews).
	views []*viewLink

	*tableStore

	// starSpecs is the result metadata of SELECT *.
	starSpecs []cql.ColumnSpec
}

// droppedColumn is a row of system_schema.dropped_columns.
type droppedColumn struct {
	name, text string
	kind       colKind
	at         int64 // microseconds
}

// keyspace is a keyspace's schema. It is immutable once published; DDL publishes a copy.
type keyspace struct {
	name          string
	replication   map[string]string
	durableWrites bool
	tables        map[string]*table
	types         map[string]*userType
	functions     map[string]*function // by signature, name(type, ...)
	aggregates    map[string]*aggregate
	system        bool // a local system keyspace: its tables refuse DDL
	virtual       bool // listed in system_virtual_schema instead of system_schema
}

// schema is one immutable version of the whole schema.
type schema struct {
	keyspaces map[string]*keyspace
	version   [16]byte // schema_version
	gen       uint64
}

func (s *schema) table(ks, name string) *table {
	k := s.keyspaces[ks]
	if k == nil {
		return nil
	}
	return k.tables[name]
}

// clone copies the keyspace map so that one keyspace can be replaced.
func (s *schema) clone() *schema {
	n := &schema{keyspaces: maps.Clone(s.keyspaces), gen: s.gen + 1}
	return n
}

func (k *keyspace) clone() *keyspace {
	n := *k
	n.tables = maps.Clone(k.tables)
	n.replication = maps.Clone(k.replication)
	n.types = maps.Clone(k.types)
	n.functions = maps.Clone(k.functions)
	n.aggregates = maps.Clone(k.aggregates)
	if n.types == nil {
		n.types = map[string]*userType{}
	}
	if n.functions == nil {
		n.functions = map[string]*function{}
	}
	if n.aggregates == nil {
		n.aggregates = map[string]*aggregate{}
	}
	return &n
}

// resolver returns the resolver of the keyspace's user types.
func (k *keyspace) resolver() resolver { return resolver{ks: k.name, types: k.types} }

// newTable builds a table from a CREATE TABLE statement, validating it as Cassandra does.
func newTable(ks string, st *grammar.CreateTableStmt, rs resolver) (*table, error) {
	t := &table{ks: ks, name: st.Table.Name, byName: map[string]*column{}, options: map[string]grammar.OptValue{},
		compact: st.Compact, tableStore: &tableStore{}}
	if len(st.Pk) == 0 {
		return nil, cqlvalue.Invalidf("No PRIMARY KEY specifed for table '%s' (exactly one required)", t.name)
	}
	defs := map[string]grammar.ColDef{}
	types := map[string]ctype{}
	for _, c := range st.Cols {
		if _, dup := defs[c.Name]; dup {
			return nil, cqlvalue.Invalidf("Duplicate column '%s' declaration for table %s.%s", c.Name, ks, t.name)
		}
		ct, err := rs.resolve(c.Ref)
		if err != nil {
			return nil, err
		}
		if err := checkNonFrozenUDT(rs, ct, ""); err != nil {
			return nil, err
		}
		defs[c.Name] = c
		types[c.Name] = ct
	}
	seen := map[string]bool{}
	keyColumn := func(n string, kind colKind, i int) (*column, error) {
		d, ok := defs[n]
		if !ok {
			return nil, cqlvalue.Invalidf("Unknown definition %s referenced in PRIMARY KEY", n)
		}
		if seen[n] {
			return nil, cqlvalue.Invalidf("Duplicate column '%s' in PRIMARY KEY", n)
		}
		seen[n] = true
		ct := types[n]
		if !ct.frozen {
			what := "collection"
			if cqlvalue.IsUDT(ct.info) {
				what = "user-defined"
			}
			return nil, cqlvalue.Invalidf("Invalid non-frozen %s type %s for PRIMARY KEY column '%s'", what, ct.text, n)
		}
		if d.Static {
			return nil, cqlvalue.Invalidf("Static column %s cannot be part of the PRIMARY KEY", n)
		}
		if ct.info.ID == cql.TypeCounter {
			return nil, cqlvalue.Invalidf("counter type is not supported for PRIMARY KEY column '%s'", n)
		}
		if cqlvalue.ReferencesDuration(ct.info) {
			return nil, cqlvalue.Invalidf("duration type is not supported for PRIMARY KEY column '%s'", n)
		}
		return &column{name: n, typ: ct.info, text: ct.text, ref: d.Ref, frozen: true, kind: kind, pos: i}, nil
	}
	for i, n := range st.Pk {
		c, err := keyColumn(n, kindPartitionKey, i)
		if err != nil {
			return nil, err
		}
		t.pk = append(t.pk, c)
	}
	for i, n := range st.Ck {
		c, err := keyColumn(n, kindClustering, i)
		if err != nil {
			return nil, err
		}
		t.ck = append(t.ck, c)
	}
	for i, o := range st.Order {
		if i >= len(t.ck) || t.ck[i].name != o.Col {
			if _, ok := defs[o.Col]; !ok || !slices.Contains(st.Ck, o.Col) {
				return nil, cqlvalue.Invalidf("Only clustering key columns can be defined in CLUSTERING ORDER directive")
			}
			return nil, cqlvalue.Invalidf("The order of columns in the CLUSTERING ORDER directive must be the one of the clustering key (%s must appear before %s)", t.ck[i].name, o.Col)
		}
		t.ck[i].desc = o.Desc
	}
	var rest []*column
	for _, c := range st.Cols {
		if seen[c.Name] {
			continue
		}
		k := kindRegular
		if c.Static {
			if len(t.ck) == 0 {
				return nil, cqlvalue.Invalidf("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
			}
			k = kindStatic
		}
		ct := types[c.Name]
		rest = append(rest, &column{name: c.Name, typ: ct.info, text: ct.text, ref: c.Ref, frozen: ct.frozen, kind: k})
	}
	counters := 0
	for _, c := range rest {
		if c.typ.ID == cql.TypeCounter {
			counters++
		}
	}
	if counters > 0 && counters < len(rest) {
		return nil, cqlvalue.Invalidf("Cannot mix counter and non counter columns in the same table")
	}
	t.counter = counters > 0
	if len(rest) > 0 && st.Compact && len(t.ck) > 0 && len(rest) > 1 {
		return nil, cqlvalue.Invalidf("COMPACT STORAGE with composite PRIMARY KEY allows no more than one column not part of the PRIMARY KEY (got: %d)", len(rest))
	}
	if err := t.setOptions(st.Options, true); err != nil {
		return nil, err
	}
	sortColumns(rest)
	for i, c := range rest {
		c.pos = i
	}
	t.cells = rest
	t.finish()
	t.data.Store(newTableData())
	return t, nil
}

// checkNonFrozenUDT refuses a non-frozen user type with a non-frozen collection field, which
// Cassandra does not support.
func checkNonFrozenUDT(rs resolver, ct ctype, col string) error {
	if !cqlvalue.IsUDT(ct.info) || ct.frozen {
		return nil
	}
	if u := rs.types[ct.info.Name]; u != nil {
		for _, f := range u.fields {
			if !f.frozen {
				if col != "" {
					return cqlvalue.Invalidf("Non-frozen UDTs with nested non-frozen collections are not supported for column %s", col)
				}
				return cqlvalue.Invalidf("Non-frozen UDTs with nested non-frozen collections are not supported")
			}
		}
	}
	return nil
}

// sortColumns orders regular and static columns as SELECT * shows them: static first,
// then by name.
func sortColumns(rest []*column) {
	sort.Slice(rest, func(i, j int) bool {
		if rest[i].kind != rest[j].kind {
			return rest[i].kind == kindStatic
		}
		return rest[i].name < rest[j].name
	})
}

// finish fills the derived fields from pk, ck and cells.
func (t *table) finish() {
	var rest []*column
	for _, c := range t.cells {
		if c != nil {
			rest = append(rest, c)
		}
	}
	sortColumns(rest)
	t.cols = make([]*column, 0, len(t.pk)+len(t.ck)+len(rest))
	t.cols = append(t.cols, t.pk...)
	t.cols = append(t.cols, t.ck...)
	t.cols = append(t.cols, rest...)
	t.byName = make(map[string]*column, len(t.cols))
	t.static = false
	for _, c := range t.cols {
		t.byName[c.name] = c
		t.static = t.static || c.kind == kindStatic
	}
	t.starSpecs = make([]cql.ColumnSpec, len(t.cols))
	for i, c := range t.cols {
		t.starSpecs[i] = cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: c.name, Type: c.typ}
	}
	if t.id == ([16]byte{}) {
		t.id = nameUUID(t.ks + "." + t.name)
	}
}

// hasStatic reports whether the table has static columns.
func (t *table) hasStatic() bool { return t.static }

// alter returns a copy of the table's schema to change and publish, sharing its store.
func (t *table) alter() *table {
	n := &table{ks: t.ks, name: t.name, id: t.id, pk: slices.Clone(t.pk), ck: slices.Clone(t.ck),
		cells: slices.Clone(t.cells), counter: t.counter, compact: t.compact, options: maps.Clone(t.options),
		comment: t.comment, virtual: t.virtual, ttl: t.ttl, indexes: slices.Clone(t.indexes),
		droppedC: slices.Clone(t.droppedC), view: t.view, tableStore: t.tableStore}
	return n
}

// nameUUID derives a stable version 3 uuid from a name.
func nameUUID(name string) [16]byte {
	u := md5.Sum([]byte(name))
	u[6] = u[6]&0x0F | 0x30
	u[8] = u[8]&0x3F | 0x80
	return u
}

// mustTable parses a CREATE TABLE statement of a built-in table. It panics on a bad
// definition, which is a programming error caught by the tests.
func mustTable(ks, cqlText string) *table {
	ps, err := grammar.Parse(cqlText)
	if err != nil {
		panic("node: bad built-in table: " + err.Error() + ": " + cqlText)
	}
	st := ps.Stmt.(*grammar.CreateTableStmt)
	t, err := newTable(ks, st, resolver{ks: ks})
	if err != nil {
		panic("node: bad built-in table: " + err.Error() + ": " + cqlText)
	}
	return t
}
