package node

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// Secondary indexes: CREATE and DROP INDEX, system_schema.indexes, and the queries they
// allow. The node keeps no index structure: a query an index serves is answered by
// scanning, in the order Cassandra's index gives (partition token, then clustering), and
// needs no ALLOW FILTERING by Cassandra's rule.

// index is a secondary index of a table. It is immutable once published.
type index struct {
	name string
	col  string
	kind indexKind
}

// target is the index's target as system_schema.indexes shows it: v, values(l), keys(m).
func (ix *index) target() string {
	if ix.kind == indexSimple {
		return quoteName(ix.col)
	}
	return indexKindNames[ix.kind] + "(" + quoteName(ix.col) + ")"
}

// serves reports whether an index of the table answers the relation op on col.
func (t *table) serves(col *column, op relOp) bool {
	for _, ix := range t.indexes {
		if ix.col != col.name {
			continue
		}
		switch {
		case op == opEq && (ix.kind == indexSimple || ix.kind == indexFull),
			op == opContains && ix.kind == indexValues,
			op == opContainsKey && ix.kind == indexKeys,
			op == opMapEq && ix.kind == indexEntries:
			return true
		}
	}
	return false
}

// indexServes applies Cassandra's rule (StatementRestrictions.needFiltering) to the
// restrictions that an index or filtering must answer: no filtering is needed when there
// is exactly one, and an index serves it.
func indexServes(t *table, rs []*colRestr) bool {
	n, served := 0, true
	for _, r := range rs {
		if r.eq != nil {
			n++
			served = served && t.serves(r.col, opEq)
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
			served = served && t.serves(r.col, o.op)
		}
	}
	return n == 1 && served
}

var nonWord = regexp.MustCompile(`\W`)

func (d *ddl) createIndex(st *createIndexStmt) (*cql.SchemaChange, error) {
	if st.custom {
		if c := strings.TrimPrefix(st.class, "org.apache.cassandra.index.sasi."); c == "SASIIndex" {
			return nil, invalidf("SASI indexes are disabled. Enable in cassandra.yaml to use.")
		}
		return nil, invalidf("CUSTOM indexes (%s) are not supported by the embedded node", st.class)
	}
	ksName, err := d.keyspaceName(st.table.ks)
	if err != nil {
		return nil, err
	}
	if st.ks != "" && st.table.ks != "" && st.ks != st.table.ks {
		return nil, invalidf("Keyspace name '%s' doesn't match index name '%s'", st.table.ks, st.table.name)
	}
	k := d.sc.keyspaces[ksName]
	if k == nil {
		return nil, invalidf("Keyspace '%s' doesn't exist", ksName)
	}
	t := k.tables[st.table.name]
	if t == nil {
		return nil, invalidf("Table '%s' doesn't exist", st.table.name)
	}
	if err := d.require("ALTER", resource{kind: resTable, ks: ksName, name: t.name}); err != nil {
		return nil, err
	}
	if err := modifiable(k, "ALTER", "<table "+ksName+"."+t.name+">"); err != nil {
		return nil, err
	}
	if t.view != nil {
		return nil, invalidf("Secondary indexes are not supported on materialized views")
	}
	if st.name != "" && indexNamed(k, st.name) != nil {
		if st.ifNotExists {
			return nil, nil
		}
		return nil, invalidf("Index '%s' already exists", st.name)
	}
	if t.counter {
		return nil, invalidf("Secondary indexes on counter tables aren't supported")
	}
	if st.col == "" {
		return nil, invalidf("Only CUSTOM indexes can be created without specifying a target column")
	}
	col := t.byName[st.col]
	if col == nil {
		return nil, invalidf("Column '%s' doesn't exist", st.col)
	}
	kind := st.kind
	coll := isCollection(col.typ)
	if kind == indexSimple && coll && !col.frozen {
		kind = indexValues
	}
	if referencesDuration(col.typ) {
		switch {
		case coll:
			return nil, invalidf("Secondary indexes are not supported on collections containing durations")
		case col.typ.ID == cql.TypeTuple:
			return nil, invalidf("Secondary indexes are not supported on tuples containing durations")
		case isUDT(col.typ):
			return nil, invalidf("Secondary indexes are not supported on UDTs containing durations")
		}
		return nil, invalidf("Secondary indexes are not supported on duration columns")
	}
	if col.kind == kindPartitionKey && len(t.pk) == 1 {
		return nil, invalidf("Cannot create secondary index on the only partition key column %s", col.name)
	}
	if coll && col.frozen && kind != indexFull {
		return nil, invalidf("Cannot create %s() index on frozen column %s. Frozen collections are immutable and must be fully indexed by using the 'full(%s)' modifier", indexKindNames[kind], col.name, col.name)
	}
	if !(coll && col.frozen) && kind == indexFull {
		return nil, invalidf("full() indexes can only be created on frozen collections")
	}
	if !coll && kind != indexSimple {
		return nil, invalidf("Cannot create %s() index on %s. Non-collection columns only support simple indexes", indexKindNames[kind], col.name)
	}
	if (kind == indexKeys || kind == indexEntries) && !(col.typ.ID == cql.TypeMap && !col.frozen) {
		return nil, invalidf("Cannot create index on %s of column %s with non-map type", indexKindNames[kind], col.name)
	}
	if isUDT(col.typ) && !col.frozen {
		return nil, invalidf("Cannot create index on non-frozen UDT column %s", col.name)
	}
	name := st.name
	if name == "" {
		base := nonWord.ReplaceAllString(t.name+"_"+col.name+"_idx", "")
		name = base
		for i := 1; indexNamed(k, name) != nil; i++ {
			name = base + "_" + strconv.Itoa(i)
		}
	}
	for _, ix := range t.indexes {
		if ix.col == col.name && ix.kind == kind {
			if st.ifNotExists {
				return nil, nil
			}
			return nil, invalidf("Index %s is a duplicate of existing index %s", name, ix.name)
		}
	}
	nt := t.alter()
	nt.indexes = append(nt.indexes, &index{name: name, col: col.name, kind: kind})
	nt.finish()
	d.mutable(ksName).tables[t.name] = nt
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: ksName, Name: t.name}, nil
}

// indexNamed finds an index of the keyspace by name; index names are unique per keyspace.
func indexNamed(k *keyspace, name string) *table {
	for _, t := range k.tables {
		for _, ix := range t.indexes {
			if ix.name == name {
				return t
			}
		}
	}
	return nil
}

func (d *ddl) dropIndex(st *dropIndexStmt) (*cql.SchemaChange, error) {
	ksName, err := d.keyspaceName(st.name.ks)
	if err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[ksName]
	var t *table
	if k != nil {
		t = indexNamed(k, st.name.name)
	}
	if t == nil {
		if st.ifExists {
			return nil, nil
		}
		return nil, invalidf("Index '%s.%s' doesn't exist'", ksName, st.name.name)
	}
	if err := d.require("ALTER", resource{kind: resTable, ks: ksName, name: t.name}); err != nil {
		return nil, err
	}
	if err := modifiable(k, "ALTER", "<table "+ksName+"."+t.name+">"); err != nil {
		return nil, err
	}
	nt := t.alter()
	nt.indexes = nil
	for _, ix := range t.indexes {
		if ix.name != st.name.name {
			nt.indexes = append(nt.indexes, ix)
		}
	}
	nt.finish()
	d.mutable(ksName).tables[t.name] = nt
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: ksName, Name: t.name}, nil
}
