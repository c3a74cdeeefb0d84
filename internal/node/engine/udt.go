package engine

import (
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// User-defined types: CREATE, ALTER and DROP TYPE. A type's fields are resolved when it is
// created; ALTER TYPE resolves again every type and table of the keyspace that uses it.

// typeName is how Cassandra names a user type in messages: ks.name.
func typeName(ks, name string) string { return cqlvalue.QuoteName(ks) + "." + cqlvalue.QuoteName(name) }

func (d *ddl) createType(st *grammar.CreateTypeStmt) (*cql.SchemaChange, error) {
	k, err := d.keyspace(st.Name.Ks, false)
	if k == nil {
		return nil, err
	}
	if err := d.require("CREATE", grammar.Resource{Kind: grammar.ResKeyspace, Ks: k.Name}); err != nil {
		return nil, err
	}
	if err := modifiable(k, "CREATE", "<all tables in "+k.Name+">"); err != nil {
		return nil, err
	}
	if k.Types[st.Name.Name] != nil {
		if st.IfNotExists {
			return nil, nil
		}
		return nil, invalidf("A user type with name '%s' already exists", st.Name.Name)
	}
	u := &storage.UserType{Ks: k.Name, Name: st.Name.Name}
	for _, f := range st.Fields {
		if slices.Contains(u.FieldNames, f.Name) {
			return nil, invalidf("Duplicate field name '%s' in type '%s'", f.Name, st.Name.Name)
		}
		u.FieldNames = append(u.FieldNames, f.Name)
		u.FieldRefs = append(u.FieldRefs, f.Ref)
	}
	for _, r := range u.FieldRefs {
		if r.IsCounter() {
			return nil, invalidf("A user type cannot contain counters")
		}
	}
	for _, r := range u.FieldRefs {
		if _, native := r.NativeType(); !native && r.Args == nil && !r.Frozen {
			if _, known := k.Types[r.Name]; known || r.Name == u.Name {
				return nil, invalidf("A user type cannot contain non-frozen UDTs")
			}
		}
	}
	if err := u.Resolve(k.Resolver()); err != nil {
		return nil, err
	}
	d.mutable(k.Name).Types[u.Name] = u
	return &cql.SchemaChange{ChangeType: "CREATED", Target: cql.TargetType, Keyspace: k.Name, Name: u.Name}, nil
}

// typeToChange returns the type that ALTER TYPE or DROP TYPE (verb) names, and its keyspace,
// once the user may change it. missing is the error's format (keyspace, name) when it does
// not exist, which Cassandra words differently for the two; with IF EXISTS a missing type is
// a nil type and no error.
func (d *ddl) typeToChange(name grammar.TableName, ifExists bool, verb, missing string) (*storage.Keyspace, *storage.UserType, error) {
	k, u, err := lookup(d, name, ifExists, missing, func(k *storage.Keyspace) *storage.UserType { return k.Types[name.Name] })
	if u == nil {
		return nil, nil, err
	}
	if err := d.require(verb, grammar.Resource{Kind: grammar.ResKeyspace, Ks: k.Name}); err != nil {
		return nil, nil, err
	}
	if err := modifiable(k, verb, "<all tables in "+k.Name+">"); err != nil {
		return nil, nil, err
	}
	return k, u, nil
}

func (d *ddl) alterType(st *grammar.AlterTypeStmt) (*cql.SchemaChange, error) {
	k, u, err := d.typeToChange(st.Name, st.IfExists, "ALTER", "Type %s.%s doesn't exist")
	if u == nil {
		return nil, err
	}
	full := typeName(u.Ks, u.Name)
	nu := &storage.UserType{Ks: u.Ks, Name: u.Name, FieldNames: slices.Clone(u.FieldNames), FieldRefs: slices.Clone(u.FieldRefs)}
	switch st.Op {
	case grammar.AlterType:
		return nil, invalidf("Altering field types is no longer supported")
	case grammar.AlterAdd:
		if u.Field(st.Add.Name) >= 0 {
			if st.IfField {
				return nil, nil
			}
			return nil, invalidf("Cannot add field %s to type %s: a field with name %s already exists", st.Add.Name, full, st.Add.Name)
		}
		if st.Add.Ref.Uses(u.Name) {
			return nil, invalidf("Cannot add new field %s of type %s to user type %s as it would create a circular reference", st.Add.Name, st.Add.Ref, full)
		}
		var inKey []string
		for _, t := range sortedTables(k) {
			for _, c := range t.Pk {
				if c.Ref.Uses(u.Name) {
					inKey = append(inKey, tableString(t))
					break
				}
			}
		}
		if len(inKey) > 0 {
			return nil, invalidf("Cannot add new field %s of type %s to user type %s as the type is being used in partition key by the following tables: %s", st.Add.Name, st.Add.Ref, full, strings.Join(inKey, ", "))
		}
		nu.FieldNames = append(nu.FieldNames, st.Add.Name)
		nu.FieldRefs = append(nu.FieldRefs, st.Add.Ref)
	case grammar.AlterRename:
		changed := false
		for _, r := range st.Renames {
			i := nu.Field(r.From)
			if i < 0 {
				if st.IfField {
					continue
				}
				return nil, invalidf("Unkown field %s in user type %s", r.From, full)
			}
			nu.FieldNames[i] = r.To
			changed = true
		}
		for i, n := range nu.FieldNames {
			if slices.Index(nu.FieldNames, n) != i {
				return nil, invalidf("Duplicate field name %s in type %s", n, u.Ks)
			}
		}
		if !changed {
			return nil, nil
		}
	}
	nk := d.mutable(k.Name)
	nk.Types[u.Name] = nu
	if err := nu.Resolve(nk.Resolver()); err != nil {
		return nil, err
	}
	if err := d.retype(nk, u.Name); err != nil {
		return nil, err
	}
	return &cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetType, Keyspace: k.Name, Name: u.Name}, nil
}

// retype resolves again, in keyspace k of the new schema, every user type and table that
// uses the user type changed, after it changed, and records their events.
func (d *ddl) retype(k *storage.Keyspace, changed string) error {
	names := []string{changed}
	for len(names) > 0 {
		n := names[0]
		names = names[1:]
		for _, u := range sortedTypes(k) {
			if u.Name == n || !slices.ContainsFunc(u.FieldRefs, func(r *grammar.TypeRef) bool { return r.Uses(n) }) {
				continue
			}
			nu := &storage.UserType{Ks: u.Ks, Name: u.Name, FieldNames: u.FieldNames, FieldRefs: u.FieldRefs}
			if err := nu.Resolve(k.Resolver()); err != nil {
				return err
			}
			k.Types[u.Name] = nu
			d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetType, Keyspace: k.Name, Name: u.Name})
			names = append(names, u.Name)
		}
	}
	rs := k.Resolver()
	for _, t := range sortedTables(k) {
		nt := t.Alter()
		touched := false
		retypeCols := func(cols []*storage.Column) error {
			for i, c := range cols {
				if c == nil || !c.Ref.Uses(changed) && !usesAny(c.Ref, k, changed) {
					continue
				}
				ct, err := rs.Resolve(c.Ref)
				if err != nil {
					return err
				}
				nc := *c
				nc.Typ, nc.Text = ct.Info, ct.Text
				cols[i] = &nc
				touched = true
			}
			return nil
		}
		for _, cols := range [][]*storage.Column{nt.Pk, nt.Ck, nt.Cells} {
			if err := retypeCols(cols); err != nil {
				return err
			}
		}
		if !touched {
			continue
		}
		nt.Finish()
		k.Tables[t.Name] = nt
		d.stale[t.TableStore] = true
		d.events = append(d.events, cql.SchemaChange{ChangeType: "UPDATED", Target: cql.TargetTable, Keyspace: k.Name, Name: t.Name})
	}
	return nil
}

// usesAny reports whether r uses, through other user types of k, the type named changed.
func usesAny(r *grammar.TypeRef, k *storage.Keyspace, changed string) bool {
	seen := map[string]bool{}
	var walk func(r *grammar.TypeRef) bool
	walk = func(r *grammar.TypeRef) bool {
		if r.Uses(changed) {
			return true
		}
		if r.Args == nil {
			if u := k.Types[r.Name]; u != nil && !seen[u.Name] {
				seen[u.Name] = true
				for _, f := range u.FieldRefs {
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
	full := u.Ks + "." + u.Name
	var fns []string
	for _, f := range sortedFunctions(k) {
		for _, a := range append(slices.Clone(f.ArgRefs), f.RetRef) {
			if a != nil && usesAny(a, k, u.Name) {
				fns = append(fns, f.Ks+"."+f.Name)
				break
			}
		}
	}
	if len(fns) > 0 {
		return nil, invalidf("Cannot drop user type '%s' as it is still used by functions %s", full, strings.Join(fns, ", "))
	}
	var types []string
	for _, o := range sortedTypes(k) {
		if o.Name != u.Name && slices.ContainsFunc(o.FieldRefs, func(r *grammar.TypeRef) bool { return r.Uses(u.Name) }) {
			types = append(types, o.Name)
		}
	}
	if len(types) > 0 {
		return nil, invalidf("Cannot drop user type '%s' as it is still used by user types %s", full, strings.Join(types, ", "))
	}
	var tables []string
	for _, t := range sortedTables(k) {
		if slices.ContainsFunc(t.Cols, func(c *storage.Column) bool { return c.Ref.Uses(u.Name) }) {
			tables = append(tables, t.Name)
		}
	}
	if len(tables) > 0 {
		return nil, invalidf("Cannot drop user type '%s' as it is still used by tables %s", full, strings.Join(tables, ", "))
	}
	delete(d.mutable(k.Name).Types, u.Name)
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetType, Keyspace: k.Name, Name: u.Name}, nil
}

func sortedTables(k *storage.Keyspace) []*storage.Table {
	out := make([]*storage.Table, 0, len(k.Tables))
	for _, t := range k.Tables {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *storage.Table) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sortedTypes(k *storage.Keyspace) []*storage.UserType {
	out := make([]*storage.UserType, 0, len(k.Types))
	for _, u := range k.Types {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *storage.UserType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sortedFunctions(k *storage.Keyspace) []*storage.Function {
	out := make([]*storage.Function, 0, len(k.Functions))
	for _, f := range k.Functions {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *storage.Function) int { return strings.Compare(a.Signature(), b.Signature()) })
	return out
}
