package storage

import (
	"crypto/md5"
	"maps"
	"slices"
	"sort"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// The schema: keyspaces and their versions, and the tables CREATE TABLE builds.

// keyspace is a keyspace's schema. It is immutable once published; DDL publishes a copy.
type Keyspace struct {
	Name          string
	Replication   map[string]string
	DurableWrites bool
	Tables        map[string]*Table
	Types         map[string]*UserType
	Functions     map[string]*Function // by signature, name(type, ...)
	Aggregates    map[string]*Aggregate
	System        bool // a local system keyspace: its tables refuse DDL
	Virtual       bool // listed in system_virtual_schema instead of system_schema
}

// schema is one immutable version of the whole schema.
type Schema struct {
	Keyspaces map[string]*Keyspace
	Version   [16]byte // schema_version
	Gen       uint64
}

func (s *Schema) Table(ks, name string) *Table {
	k := s.Keyspaces[ks]
	if k == nil {
		return nil
	}
	return k.Tables[name]
}

// clone copies the keyspace map so that one keyspace can be replaced.
func (s *Schema) Clone() *Schema {
	n := &Schema{Keyspaces: maps.Clone(s.Keyspaces), Gen: s.Gen + 1}
	return n
}

func (k *Keyspace) Clone() *Keyspace {
	n := *k
	n.Tables = maps.Clone(k.Tables)
	n.Replication = maps.Clone(k.Replication)
	n.Types = maps.Clone(k.Types)
	n.Functions = maps.Clone(k.Functions)
	n.Aggregates = maps.Clone(k.Aggregates)
	if n.Types == nil {
		n.Types = map[string]*UserType{}
	}
	if n.Functions == nil {
		n.Functions = map[string]*Function{}
	}
	if n.Aggregates == nil {
		n.Aggregates = map[string]*Aggregate{}
	}
	return &n
}

// resolver returns the resolver of the keyspace's user types.
func (k *Keyspace) Resolver() Resolver { return Resolver{Ks: k.Name, types: k.Types} }

// newTable builds a table from a CREATE TABLE statement, validating it as Cassandra does.
func NewTable(ks string, st *grammar.CreateTableStmt, rs Resolver) (*Table, error) {
	t := &Table{Ks: ks, Name: st.Table.Name, ByName: map[string]*Column{}, Options: map[string]grammar.OptValue{},
		Compact: st.Compact, TableStore: &TableStore{}}
	if len(st.Pk) == 0 {
		return nil, cqlvalue.Invalidf("No PRIMARY KEY specifed for table '%s' (exactly one required)", t.Name)
	}
	cols, err := resolveColumns(ks, t.Name, st.Cols, rs)
	if err != nil {
		return nil, err
	}
	if err := cols.keyColumns(t, st); err != nil {
		return nil, err
	}
	rest, err := cols.cellColumns(t, st)
	if err != nil {
		return nil, err
	}
	if err := t.SetOptions(st.Options, true); err != nil {
		return nil, err
	}
	SortColumns(rest)
	for i, c := range rest {
		c.Pos = i
	}
	t.Cells = rest
	t.Finish()
	t.Data.Store(NewTableData())
	return t, nil
}

// columnDefs are the columns of a CREATE TABLE with their resolved types, and those taken
// by the primary key so far.
type columnDefs struct {
	defs  map[string]grammar.ColDef
	types map[string]Ctype
	inKey map[string]bool
}

// resolveColumns resolves the types of the columns of a CREATE TABLE of table ks.name,
// refusing a column declared twice.
func resolveColumns(ks, name string, cols []grammar.ColDef, rs Resolver) (*columnDefs, error) {
	cd := &columnDefs{defs: map[string]grammar.ColDef{}, types: map[string]Ctype{}, inKey: map[string]bool{}}
	for _, c := range cols {
		if _, dup := cd.defs[c.Name]; dup {
			return nil, cqlvalue.Invalidf("Duplicate column '%s' declaration for table %s.%s", c.Name, ks, name)
		}
		ct, err := rs.Resolve(c.Ref)
		if err != nil {
			return nil, err
		}
		if err := CheckNonFrozenUDT(rs, ct, ""); err != nil {
			return nil, err
		}
		cd.defs[c.Name] = c
		cd.types[c.Name] = ct
	}
	return cd, nil
}

// keyColumns sets t's partition key and clustering columns, with the CLUSTERING ORDER.
func (cd *columnDefs) keyColumns(t *Table, st *grammar.CreateTableStmt) error {
	for i, n := range st.Pk {
		c, err := cd.keyColumn(n, KindPartitionKey, i)
		if err != nil {
			return err
		}
		t.Pk = append(t.Pk, c)
	}
	for i, n := range st.Ck {
		c, err := cd.keyColumn(n, KindClustering, i)
		if err != nil {
			return err
		}
		t.Ck = append(t.Ck, c)
	}
	for i, o := range st.Order {
		if i >= len(t.Ck) || t.Ck[i].Name != o.Col {
			if _, ok := cd.defs[o.Col]; !ok || !slices.Contains(st.Ck, o.Col) {
				return cqlvalue.Invalidf("Only clustering key columns can be defined in CLUSTERING ORDER directive")
			}
			return cqlvalue.Invalidf("The order of columns in the CLUSTERING ORDER directive must be the one of the clustering key (%s must appear before %s)", t.Ck[i].Name, o.Col)
		}
		t.Ck[i].Desc = o.Desc
	}
	return nil
}

// keyColumn returns column n as the i-th column of the partition key or clustering (kind),
// refusing what a primary key may not hold.
func (cd *columnDefs) keyColumn(n string, kind colKind, i int) (*Column, error) {
	d, ok := cd.defs[n]
	if !ok {
		return nil, cqlvalue.Invalidf("Unknown definition %s referenced in PRIMARY KEY", n)
	}
	if cd.inKey[n] {
		return nil, cqlvalue.Invalidf("Duplicate column '%s' in PRIMARY KEY", n)
	}
	cd.inKey[n] = true
	ct := cd.types[n]
	if !ct.Frozen {
		what := "collection"
		if cqlvalue.IsUDT(ct.Info) {
			what = "user-defined"
		}
		return nil, cqlvalue.Invalidf("Invalid non-frozen %s type %s for PRIMARY KEY column '%s'", what, ct.Text, n)
	}
	if d.Static {
		return nil, cqlvalue.Invalidf("Static column %s cannot be part of the PRIMARY KEY", n)
	}
	if ct.Info.ID == cql.TypeCounter {
		return nil, cqlvalue.Invalidf("counter type is not supported for PRIMARY KEY column '%s'", n)
	}
	if cqlvalue.ReferencesDuration(ct.Info) {
		return nil, cqlvalue.Invalidf("duration type is not supported for PRIMARY KEY column '%s'", n)
	}
	return &Column{Name: n, Typ: ct.Info, Text: ct.Text, Ref: d.Ref, Frozen: true, Kind: kind, Pos: i}, nil
}

// cellColumns returns the regular and static columns, the ones outside t's primary key,
// in the order of the statement, and sets whether t is a counter table: its cells must be
// all counters or none, and COMPACT STORAGE with clustering columns allows one.
func (cd *columnDefs) cellColumns(t *Table, st *grammar.CreateTableStmt) ([]*Column, error) {
	var rest []*Column
	counters := 0
	for _, c := range st.Cols {
		if cd.inKey[c.Name] {
			continue
		}
		k := KindRegular
		if c.Static {
			if len(t.Ck) == 0 {
				return nil, cqlvalue.Invalidf("Static columns are only useful (and thus allowed) if the table has at least one clustering column")
			}
			k = KindStatic
		}
		ct := cd.types[c.Name]
		rest = append(rest, &Column{Name: c.Name, Typ: ct.Info, Text: ct.Text, Ref: c.Ref, Frozen: ct.Frozen, Kind: k})
		if ct.Info.ID == cql.TypeCounter {
			counters++
		}
	}
	if counters > 0 && counters < len(rest) {
		return nil, cqlvalue.Invalidf("Cannot mix counter and non counter columns in the same table")
	}
	t.Counter = counters > 0
	if len(rest) > 0 && st.Compact && len(t.Ck) > 0 && len(rest) > 1 {
		return nil, cqlvalue.Invalidf("COMPACT STORAGE with composite PRIMARY KEY allows no more than one column not part of the PRIMARY KEY (got: %d)", len(rest))
	}
	return rest, nil
}

// checkNonFrozenUDT refuses a non-frozen user type with a non-frozen collection field, which
// Cassandra does not support.
func CheckNonFrozenUDT(rs Resolver, ct Ctype, col string) error {
	if !cqlvalue.IsUDT(ct.Info) || ct.Frozen {
		return nil
	}
	if u := rs.types[ct.Info.Name]; u != nil {
		for _, f := range u.Fields {
			if !f.Frozen {
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
func SortColumns(rest []*Column) {
	sort.Slice(rest, func(i, j int) bool {
		if rest[i].Kind != rest[j].Kind {
			return rest[i].Kind == KindStatic
		}
		return rest[i].Name < rest[j].Name
	})
}

// finish fills the derived fields from pk, ck and cells.
func (t *Table) Finish() {
	var rest []*Column
	for _, c := range t.Cells {
		if c != nil {
			rest = append(rest, c)
		}
	}
	SortColumns(rest)
	t.Cols = make([]*Column, 0, len(t.Pk)+len(t.Ck)+len(rest))
	t.Cols = append(t.Cols, t.Pk...)
	t.Cols = append(t.Cols, t.Ck...)
	t.Cols = append(t.Cols, rest...)
	t.ByName = make(map[string]*Column, len(t.Cols))
	t.static = false
	for _, c := range t.Cols {
		t.ByName[c.Name] = c
		t.static = t.static || c.Kind == KindStatic
	}
	t.StarSpecs = make([]cql.ColumnSpec, len(t.Cols))
	for i, c := range t.Cols {
		t.StarSpecs[i] = cql.ColumnSpec{Keyspace: t.Ks, Table: t.Name, Name: c.Name, Type: c.Typ}
	}
	if t.Id == ([16]byte{}) {
		t.Id = NameUUID(t.Ks + "." + t.Name)
	}
}

// alter returns a copy of the table's schema to change and publish, sharing its store.
func (t *Table) Alter() *Table {
	n := &Table{Ks: t.Ks, Name: t.Name, Id: t.Id, Pk: slices.Clone(t.Pk), Ck: slices.Clone(t.Ck),
		Cells: slices.Clone(t.Cells), Counter: t.Counter, Compact: t.Compact, Options: maps.Clone(t.Options),
		Comment: t.Comment, Virtual: t.Virtual, Ttl: t.Ttl, Indexes: slices.Clone(t.Indexes),
		DroppedC: slices.Clone(t.DroppedC), View: t.View, TableStore: t.TableStore}
	return n
}

// nameUUID derives a stable version 3 uuid from a name.
func NameUUID(name string) [16]byte {
	u := md5.Sum([]byte(name))
	u[6] = u[6]&0x0F | 0x30
	u[8] = u[8]&0x3F | 0x80
	return u
}

// mustTable parses a CREATE TABLE statement of a built-in table. It panics on a bad
// definition, which is a programming error caught by the tests.
func MustTable(ks, cqlText string) *Table {
	ps, err := grammar.Parse(cqlText)
	if err != nil {
		panic("node: bad built-in table: " + err.Error() + ": " + cqlText)
	}
	st := ps.Stmt.(*grammar.CreateTableStmt)
	t, err := NewTable(ks, st, Resolver{Ks: ks})
	if err != nil {
		panic("node: bad built-in table: " + err.Error() + ": " + cqlText)
	}
	return t
}
