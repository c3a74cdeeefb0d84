package node

import (
	"crypto/md5"
	"maps"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
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
	name string
	typ  cql.TypeInfo
	text string // the type's spelling in system_schema.columns
	kind colKind
	// pos is the position among the partition key or clustering columns; for regular and
	// static columns it is the index into a row's cells.
	pos  int
	desc bool
}

// table is a table's schema and its data. The schema fields are immutable once published;
// data is replaced whole by TRUNCATE.
type table struct {
	ks, name string
	id       [16]byte
	cols     []*column // SELECT * order: partition key, clustering, then the rest by name
	byName   map[string]*column
	pk       []*column
	ck       []*column
	cells    []*column // regular and static columns, indexed by column.pos
	options  map[string]string
	comment  string
	virtual  bool
	ttl      int32 // default_time_to_live

	data atomic.Pointer[tableData]
	// perNode, for system.local and the peers tables of a cluster, holds each node's own
	// rows; data holds the first node's. See table.load.
	perNode atomic.Pointer[[]*tableData]
	// dropped is set when the table leaves the schema, so compiled plans recompile.
	dropped atomic.Bool

	// starSpecs is the result metadata of SELECT *.
	starSpecs []cql.ColumnSpec
}

// keyspace is a keyspace's schema. It is immutable once published; DDL publishes a copy.
type keyspace struct {
	name          string
	replication   map[string]string
	durableWrites bool
	tables        map[string]*table
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

// clone copies the keyspace map and the named keyspace so that one can be changed.
func (s *schema) clone() *schema {
	n := &schema{keyspaces: maps.Clone(s.keyspaces), gen: s.gen + 1}
	return n
}

func (k *keyspace) clone() *keyspace {
	n := *k
	n.tables = maps.Clone(k.tables)
	n.replication = maps.Clone(k.replication)
	return &n
}

// newTable builds a table from a CREATE TABLE statement, validating it as Cassandra does.
func newTable(ks string, st *createTableStmt) (*table, error) {
	t := &table{ks: ks, name: st.table.name, byName: map[string]*column{}, options: st.options}
	if len(st.pk) == 0 {
		return nil, invalidf("No PRIMARY KEY specifed for table '%s' (exactly one required)", t.name)
	}
	defs := map[string]colDef{}
	for _, c := range st.cols {
		if _, dup := defs[c.name]; dup {
			return nil, invalidf("Duplicate column '%s' declaration for table %s.%s", c.name, ks, t.name)
		}
		if err := checkType(c.typ, c.name); err != nil {
			return nil, err
		}
		defs[c.name] = c
	}
	seen := map[string]bool{}
	keyColumn := func(n string, kind colKind, i int) (*column, error) {
		d, ok := defs[n]
		if !ok {
			return nil, invalidf("Unknown definition %s referenced in PRIMARY KEY", n)
		}
		if seen[n] {
			return nil, invalidf("Duplicate column '%s' in PRIMARY KEY", n)
		}
		seen[n] = true
		if d.static {
			return nil, invalidf("Static column %s cannot be part of the PRIMARY KEY", n)
		}
		if kind == kindPartitionKey && d.typ.ID == cql.TypeCounter {
			return nil, invalidf("counter type is not supported for PRIMARY KEY column '%s'", n)
		}
		return &column{name: n, typ: d.typ, text: d.text, kind: kind, pos: i}, nil
	}
	for i, n := range st.pk {
		c, err := keyColumn(n, kindPartitionKey, i)
		if err != nil {
			return nil, err
		}
		t.pk = append(t.pk, c)
	}
	for i, n := range st.ck {
		c, err := keyColumn(n, kindClustering, i)
		if err != nil {
			return nil, err
		}
		t.ck = append(t.ck, c)
	}
	for i, o := range st.order {
		if i >= len(t.ck) || t.ck[i].name != o.col {
			if _, ok := defs[o.col]; !ok || !slices.Contains(st.ck, o.col) {
				return nil, invalidf("Only clustering key columns can be defined in CLUSTERING ORDER directive")
			}
			return nil, invalidf("The order of columns in the CLUSTERING ORDER directive must be the one of the clustering key (%s must appear before %s)", t.ck[i].name, o.col)
		}
		t.ck[i].desc = o.desc
	}
	var rest []*column
	for _, c := range st.cols {
		if seen[c.name] {
			continue
		}
		k := kindRegular
		if c.static {
			if len(t.ck) == 0 {
				return nil, invalidf("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
			}
			k = kindStatic
		}
		rest = append(rest, &column{name: c.name, typ: c.typ, text: c.text, kind: k})
	}
	counters := 0
	for _, c := range rest {
		if c.typ.ID == cql.TypeCounter {
			counters++
		}
	}
	if counters > 0 && counters < len(rest) {
		return nil, invalidf("Cannot mix counter and non counter columns in the same table")
	}
	if len(rest) > 0 && st.compact && len(t.ck) > 0 && len(rest) > 1 {
		return nil, invalidf("COMPACT STORAGE with composite PRIMARY KEY allows no more than one column not part of the PRIMARY KEY (got: %d)", len(rest))
	}
	if v, ok := st.options["default_time_to_live"]; ok {
		n, ok := atoiLimited(v)
		if !ok || n < 0 {
			return nil, invalidf("default_time_to_live must be greater than or equal to 0 (got %s)", v)
		}
		t.ttl = int32(n)
	}
	if v, ok := st.options["comment"]; ok {
		t.comment = v
	}
	t.finish(rest)
	return t, nil
}

// checkType rejects the types that the node does not store.
func checkType(t cql.TypeInfo, col string) error {
	switch t.ID {
	case cql.TypeUDT:
		return invalidf("Unknown type %s (user-defined types are not supported by the embedded node)", t.Name)
	case cql.TypeTuple, cql.TypeDuration:
		return invalidf("type %s of column %s is not supported by the embedded node", t.String(), col)
	case cql.TypeList, cql.TypeSet, cql.TypeMap:
		if t.Key != nil {
			if err := checkType(*t.Key, col); err != nil {
				return err
			}
		}
		if t.Elem != nil {
			if err := checkType(*t.Elem, col); err != nil {
				return err
			}
			if t.Elem.ID == cql.TypeCounter || t.Key != nil && t.Key.ID == cql.TypeCounter {
				return invalidf("Counters are not allowed inside collections: %s", t.String())
			}
		}
	}
	return nil
}

// finish orders the columns and fills the derived fields. rest holds the regular and
// static columns.
func (t *table) finish(rest []*column) {
	sort.Slice(rest, func(i, j int) bool {
		if rest[i].kind != rest[j].kind {
			return rest[i].kind == kindStatic
		}
		return rest[i].name < rest[j].name
	})
	t.cols = t.cols[:0]
	t.cols = append(t.cols, t.pk...)
	t.cols = append(t.cols, t.ck...)
	for i, c := range rest {
		c.pos = i
		t.cols = append(t.cols, c)
	}
	t.cells = rest
	for _, c := range t.cols {
		t.byName[c.name] = c
	}
	t.starSpecs = make([]cql.ColumnSpec, len(t.cols))
	for i, c := range t.cols {
		t.starSpecs[i] = cql.ColumnSpec{Keyspace: t.ks, Table: t.name, Name: c.name, Type: c.typ}
	}
	if t.id == ([16]byte{}) {
		t.id = nameUUID(t.ks + "." + t.name)
	}
	t.data.Store(newTableData())
}

// hasStatic reports whether the table has static columns.
func (t *table) hasStatic() bool {
	return len(t.cells) > 0 && t.cells[0].kind == kindStatic
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
	ps, err := parse(cqlText)
	if err != nil {
		panic("node: bad built-in table: " + err.Error() + ": " + cqlText)
	}
	st := ps.stmt.(*createTableStmt)
	t, err := newTable(ks, st)
	if err != nil {
		panic("node: bad built-in table: " + err.Error() + ": " + cqlText)
	}
	return t
}
