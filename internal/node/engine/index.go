package engine

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// Secondary indexes: CREATE and DROP INDEX, system_schema.indexes, and the queries they
// allow. The node keeps no index structure: a query an index serves is answered by
// scanning, in the order Cassandra's index gives (partition token, then clustering), and
// needs no ALLOW FILTERING by Cassandra's rule.

// indexServes applies Cassandra's rule (StatementRestrictions.needFiltering) to the
// restrictions that an index or filtering must answer: no filtering is needed when there
// is exactly one, and an index serves it.
func indexServes(t *storage.Table, rs []*colRestr) bool {
	n, served := 0, true
	for _, r := range rs {
		if r.eq != nil {
			n++
			served = served && t.Serves(r.col, grammar.OpEq)
		}
		if r.in != nil || r.inMarker != nil {
			n++
			served = false
		}
		if r.lo != nil {
			n++
			served = false
		}
		if r.hi != nil {
			n++
			served = false
		}
		for _, o := range r.others {
			n++
			served = served && t.Serves(r.col, o.Op)
		}
	}
	return n == 1 && served
}

var nonWord = regexp.MustCompile(`\W`)

func (d *ddl) createIndex(st *grammar.CreateIndexStmt) (*cql.SchemaChange, error) {
	if st.Custom {
		if c := strings.TrimPrefix(st.Class, "org.apache.cassandra.index.sasi."); c == "SASIIndex" {
			return nil, invalidf("SASI indexes are disabled. Enable in cassandra.yaml to use.")
		}
		return nil, invalidf("CUSTOM indexes (%s) are not supported by the embedded node", st.Class)
	}
	if st.Ks != "" && st.Table.Ks != "" && st.Ks != st.Table.Ks {
		return nil, invalidf("Keyspace name '%s' doesn't match index name '%s'", st.Table.Ks, st.Table.Name)
	}
	// "%[2]s": CREATE INDEX names the table alone.
	k, t, err := d.tableToChange(st.Table, tableLookup{perm: "ALTER", keyspaceFirst: true, missing: "Table '%[2]s' doesn't exist"})
	if t == nil {
		return nil, err
	}
	if t.View != nil {
		return nil, invalidf("Secondary indexes are not supported on materialized views")
	}
	if st.Name != "" && indexNamed(k, st.Name) != nil {
		if st.IfNotExists {
			return nil, nil
		}
		return nil, invalidf("Index '%s' already exists", st.Name)
	}
	if t.Counter {
		return nil, invalidf("Secondary indexes on counter tables aren't supported")
	}
	if st.Col == "" {
		return nil, invalidf("Only CUSTOM indexes can be created without specifying a target column")
	}
	col := t.ByName[st.Col]
	if col == nil {
		return nil, invalidf("Column '%s' doesn't exist", st.Col)
	}
	kind, err := indexKind(t, col, st.Kind)
	if err != nil {
		return nil, err
	}
	name := st.Name
	if name == "" {
		name = indexName(k, t, col)
	}
	for _, ix := range t.Indexes {
		if ix.Col == col.Name && ix.Kind == kind {
			if st.IfNotExists {
				return nil, nil
			}
			return nil, invalidf("Index %s is a duplicate of existing index %s", name, ix.Name)
		}
	}
	nt := t.Alter()
	nt.Indexes = append(nt.Indexes, &storage.Index{Name: name, Col: col.Name, Kind: kind})
	nt.Finish()
	d.mutable(k.Name).Tables[t.Name] = nt
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.Name, Name: t.Name}, nil
}

// indexKind returns the kind of index that CREATE INDEX asks for (kind) on column col of
// table t, once col may take it: a simple index on a non-frozen collection indexes its
// values.
func indexKind(t *storage.Table, col *storage.Column, kind grammar.IndexKind) (grammar.IndexKind, error) {
	coll := cqlvalue.IsCollection(col.Typ)
	if kind == grammar.IndexSimple && coll && !col.Frozen {
		kind = grammar.IndexValues
	}
	if cqlvalue.ReferencesDuration(col.Typ) {
		switch {
		case coll:
			return kind, invalidf("Secondary indexes are not supported on collections containing durations")
		case col.Typ.ID == cql.TypeTuple:
			return kind, invalidf("Secondary indexes are not supported on tuples containing durations")
		case cqlvalue.IsUDT(col.Typ):
			return kind, invalidf("Secondary indexes are not supported on UDTs containing durations")
		}
		return kind, invalidf("Secondary indexes are not supported on duration columns")
	}
	if col.Kind == storage.KindPartitionKey && len(t.Pk) == 1 {
		return kind, invalidf("Cannot create secondary index on the only partition key column %s", col.Name)
	}
	if coll && col.Frozen && kind != grammar.IndexFull {
		return kind, invalidf("Cannot create %s() index on frozen column %s. Frozen collections are immutable and must be fully indexed by using the 'full(%s)' modifier", grammar.IndexKindNames[kind], col.Name, col.Name)
	}
	if !(coll && col.Frozen) && kind == grammar.IndexFull {
		return kind, invalidf("full() indexes can only be created on frozen collections")
	}
	if !coll && kind != grammar.IndexSimple {
		return kind, invalidf("Cannot create %s() index on %s. Non-collection columns only support simple indexes", grammar.IndexKindNames[kind], col.Name)
	}
	if (kind == grammar.IndexKeys || kind == grammar.IndexEntries) && !(col.Typ.ID == cql.TypeMap && !col.Frozen) {
		return kind, invalidf("Cannot create index on %s of column %s with non-map type", grammar.IndexKindNames[kind], col.Name)
	}
	if cqlvalue.IsUDT(col.Typ) && !col.Frozen {
		return kind, invalidf("Cannot create index on non-frozen UDT column %s", col.Name)
	}
	return kind, nil
}

// indexName names an index that CREATE INDEX leaves unnamed, as Cassandra does:
// table_column_idx, with a number after it when the keyspace has an index of that name.
func indexName(k *storage.Keyspace, t *storage.Table, col *storage.Column) string {
	base := nonWord.ReplaceAllString(t.Name+"_"+col.Name+"_idx", "")
	name := base
	for i := 1; indexNamed(k, name) != nil; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	return name
}

// indexNamed finds an index of the keyspace by name; index names are unique per keyspace.
func indexNamed(k *storage.Keyspace, name string) *storage.Table {
	for _, t := range k.Tables {
		for _, ix := range t.Indexes {
			if ix.Name == name {
				return t
			}
		}
	}
	return nil
}

func (d *ddl) dropIndex(st *grammar.DropIndexStmt) (*cql.SchemaChange, error) {
	k, t, err := lookup(d, st.Name, st.IfExists, "Index '%s.%s' doesn't exist'", func(k *storage.Keyspace) *storage.Table { return indexNamed(k, st.Name.Name) })
	if t == nil {
		return nil, err
	}
	if err := d.mayChangeTable("ALTER", k, t); err != nil {
		return nil, err
	}
	nt := t.Alter()
	nt.Indexes = nil
	for _, ix := range t.Indexes {
		if ix.Name != st.Name.Name {
			nt.Indexes = append(nt.Indexes, ix)
		}
	}
	nt.Finish()
	d.mutable(k.Name).Tables[t.Name] = nt
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.Name, Name: t.Name}, nil
}
