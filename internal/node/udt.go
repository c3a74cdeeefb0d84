package node

import (
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// User-defined types: CREATE, ALTER and DROP TYPE. A type's fields are resolved when it is
// created; ALTER TYPE resolves again every type and table of the keyspace that uses it.

func (d *ddl) typeKeyspace(name grammar.TableName) (*keyspace, error) {
	ksName, err := d.keyspaceName(name.Ks)
	if err != nil {
		return nil, err
	}
	k := d.sc.keyspaces[ksName]
	if k == nil {
		return nil, invalidf("Keyspace '%s' doesn't exist", ksName)
	}
	return k, nil
}

// typeName is how Cassandra names a user type in messages: ks.name.
func typeName(ks, name string) string { return cqlvalue.QuoteName(ks) + "." + cqlvalue.QuoteName(name) }

func (d *ddl) createType(st *grammar.CreateTypeStmt) (*cql.SchemaChange, error) {
	k, err := d.typeKeyspace(st.Name)
	if err != nil {
		return nil, err
	}
	if err := d.require("CREATE", grammar.Resource{Kind: grammar.ResKeyspace, Ks: k.name}); err != nil {
		return nil, err
	}
	if err := modifiable(k, "CREATE", "<all tables in "+k.name+">"); err != nil {
		return nil, err
	}
	if k.types[st.Name.Name] != nil {
		if st.IfNotExists {
			return nil, nil
		}
		return nil, invalidf("A user type with name '%s' already exists", st.Name.Name)
	}
	u := &userType{ks: k.name, name: st.Name.Name}
	for _, f := range st.Fields {
		if slices.Contains(u.fieldNames, f.Name) {
			return nil, invalidf("Duplicate field name '%s' in type '%s'", f.Name, st.Name.Name)
		}
		u.fieldNames = append(u.fieldNames, f.Name)
		u.fieldRefs = append(u.fieldRefs, f.Ref)
	}
	for _, r := range u.fieldRefs {
		if r.IsCounter() {
			return nil, invalidf("A user type cannot contain counters")
		}
	}
	for _, r := range u.fieldRefs {
		if _, native := r.NativeType(); !native && r.Args == nil && !r.Frozen {
			if _, known := k.types[r.Name]; known || r.Name == u.name {
				return nil, invalidf("A user type cannot contain non-frozen UDTs")
			}
		}
	}
	if err := u.resolve(k.resolver()); err != nil {
		return nil, err
	}
	d.mutable(k.name).types[u.name] = u
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetType, Keyspace: k.name, Name: u.name}, nil
}

// typeToChange returns the type that ALTER TYPE or DROP TYPE (verb) names, and its keyspace,
// once the user may change it. missing is the error's format (keyspace, name) when it does
// not exist, which Cassandra words differently for the two; with IF EXISTS a missing type is
// a nil type and no error.
func (d *ddl) typeToChange(name grammar.TableName, ifExists bool, verb, missing string) (*keyspace, *userType, error) {
	ksName, err := d.keyspaceName(name.Ks)
	if err != nil {
		return nil, nil, err
	}
	k := d.sc.keyspaces[ksName]
	var u *userType
	if k != nil {
		u = k.types[name.Name]
	}
	if u == nil {
		if ifExists {
			return nil, nil, nil
		}
		return nil, nil, invalidf(missing, ksName, name.Name)
	}
	if err := d.require(verb, grammar.Resource{Kind: grammar.ResKeyspace, Ks: k.name}); err != nil {
		return nil, nil, err
	}
	if err := modifiable(k, verb, "<all tables in "+k.name+">"); err != nil {
		return nil, nil, err
	}
	return k, u, nil
}

func (d *ddl) alterType(st *grammar.AlterTypeStmt) (*cql.SchemaChange, error) {
	k, u, err := d.typeToChange(st.Name, st.IfExists, "ALTER", "Type %s.%s doesn't exist")
	if u == nil {
		return nil, err
	}
	full := typeName(u.ks, u.name)
	nu := &userType{ks: u.ks, name: u.name, fieldNames: slices.Clone(u.fieldNames), fieldRefs: slices.Clone(u.fieldRefs)}
	switch st.Op {
	case grammar.AlterType:
		return nil, invalidf("Altering field types is no longer supported")
	case grammar.AlterAdd:
		if u.field(st.Add.Name) >= 0 {
			if st.IfField {
				return nil, nil
			}
			return nil, invalidf("Cannot add field %s to type %s: a field with name %s already exists", st.Add.Name, full, st.Add.Name)
		}
		if st.Add.Ref.Uses(u.name) {
			return nil, invalidf("Cannot add new field %s of type %s to user type %s as it would create a circular reference", st.Add.Name, st.Add.Ref, full)
		}
		var inKey []string
		for _, t := range sortedTables(k) {
			for _, c := range t.pk {
				if c.ref.Uses(u.name) {
					inKey = append(inKey, tableString(t))
					break
				}
			}
		}
		if len(inKey) > 0 {
			return nil, invalidf("Cannot add new field %s of type %s to user type %s as the type is being used in partition key by the following tables: %s", st.Add.Name, st.Add.Ref, full, strings.Join(inKey, ", "))
		}
		nu.fieldNames = append(nu.fieldNames, st.Add.Name)
		nu.fieldRefs = append(nu.fieldRefs, st.Add.Ref)
	case grammar.AlterRename:
		changed := false
		for _, r := range st.Renames {
			i := nu.field(r.From)
			if i < 0 {
				if st.IfField {
					continue
				}
				return nil, invalidf("Unkown field %s in user type %s", r.From, full)
			}
			nu.fieldNames[i] = r.To
			changed = true
		}
		for i, n := range nu.fieldNames {
			if slices.Index(nu.fieldNames, n) != i {
				return nil, invalidf("Duplicate field name %s in type %s", n, u.ks)
			}
		}
		if !changed {
			return nil, nil
		}
	}
	nk := d.mutable(k.name)
	nk.types[u.name] = nu
	if err := nu.resolve(nk.resolver()); err != nil {
		return nil, err
	}
	if err := d.retype(nk, u.name); err != nil {
		return nil, err
	}
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetType, Keyspace: k.name, Name: u.name}, nil
}

// retype resolves again, in keyspace k of the new schema, every user type and table that
// uses the user type changed, after it changed, and records their events.
func (d *ddl) retype(k *keyspace, changed string) error {
	names := []string{changed}
	for len(names) > 0 {
		n := names[0]
		names = names[1:]
		for _, u := range sortedTypes(k) {
			if u.name == n || !slices.ContainsFunc(u.fieldRefs, func(r *grammar.TypeRef) bool { return r.Uses(n) }) {
				continue
			}
			nu := &userType{ks: u.ks, name: u.name, fieldNames: u.fieldNames, fieldRefs: u.fieldRefs}
			if err := nu.resolve(k.resolver()); err != nil {
				return err
			}
			k.types[u.name] = nu
			d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetType, Keyspace: k.name, Name: u.name})
			names = append(names, u.name)
		}
	}
	rs := k.resolver()
	for _, t := range sortedTables(k) {
		nt := t.alter()
		touched := false
		retypeCols := func(cols []*column) error {
			for i, c := range cols {
				if c == nil || !c.ref.Uses(changed) && !usesAny(c.ref, k, changed) {
					continue
				}
				ct, err := rs.resolve(c.ref)
				if err != nil {
					return err
				}
				nc := *c
				nc.typ, nc.text = ct.info, ct.text
				cols[i] = &nc
				touched = true
			}
			return nil
		}
		for _, cols := range [][]*column{nt.pk, nt.ck, nt.cells} {
			if err := retypeCols(cols); err != nil {
				return err
			}
		}
		if !touched {
			continue
		}
		nt.finish()
		k.tables[t.name] = nt
		d.stale[t.tableStore] = true
		d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.name, Name: t.name})
	}
	return nil
}

// usesAny reports whether r uses, through other user types of k, the type named changed.
func usesAny(r *grammar.TypeRef, k *keyspace, changed string) bool {
	seen := map[string]bool{}
	var walk func(r *grammar.TypeRef) bool
	walk = func(r *grammar.TypeRef) bool {
		if r.Uses(changed) {
			return true
		}
		if r.Args == nil {
			if u := k.types[r.Name]; u != nil && !seen[u.name] {
				seen[u.name] = true
				for _, f := range u.fieldRefs {
					if walk(f) {
						return true
					}
				}
			}
		}
		for _, a := range r.Args {
			if walk(a) {
				return true
			}
		}
		return false
	}
	return walk(r)
}

func (d *ddl) dropType(st *grammar.DropTypeStmt) (*cql.SchemaChange, error) {
	k, u, err := d.typeToChange(st.Name, st.IfExists, "DROP", "Type '%s.%s' doesn't exist")
	if u == nil {
		return nil, err
	}
	full := u.ks + "." + u.name
	var fns []string
	for _, f := range sortedFunctions(k) {
		for _, a := range append(slices.Clone(f.argRefs), f.retRef) {
			if a != nil && usesAny(a, k, u.name) {
				fns = append(fns, f.ks+"."+f.name)
				break
			}
		}
	}
	if len(fns) > 0 {
		return nil, invalidf("Cannot drop user type '%s' as it is still used by functions %s", full, strings.Join(fns, ", "))
	}
	var types []string
	for _, o := range sortedTypes(k) {
		if o.name != u.name && slices.ContainsFunc(o.fieldRefs, func(r *grammar.TypeRef) bool { return r.Uses(u.name) }) {
			types = append(types, o.name)
		}
	}
	if len(types) > 0 {
		return nil, invalidf("Cannot drop user type '%s' as it is still used by user types %s", full, strings.Join(types, ", "))
	}
	var tables []string
	for _, t := range sortedTables(k) {
		if slices.ContainsFunc(t.cols, func(c *column) bool { return c.ref.Uses(u.name) }) {
			tables = append(tables, t.name)
		}
	}
	if len(tables) > 0 {
		return nil, invalidf("Cannot drop user type '%s' as it is still used by tables %s", full, strings.Join(tables, ", "))
	}
	delete(d.mutable(k.name).types, u.name)
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetType, Keyspace: k.name, Name: u.name}, nil
}

func sortedTables(k *keyspace) []*table {
	out := make([]*table, 0, len(k.tables))
	for _, t := range k.tables {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *table) int { return strings.Compare(a.name, b.name) })
	return out
}

func sortedTypes(k *keyspace) []*userType {
	out := make([]*userType, 0, len(k.types))
	for _, u := range k.types {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *userType) int { return strings.Compare(a.name, b.name) })
	return out
}

func sortedFunctions(k *keyspace) []*function {
	out := make([]*function, 0, len(k.functions))
	for _, f := range k.functions {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *function) int { return strings.Compare(a.signature(), b.signature()) })
	return out
}
