package engine

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// User-defined functions and aggregates: their DDL, checked as Cassandra 4.1 checks it,
// their system_schema.functions and system_schema.aggregates rows, and their events. The
// node runs no Java: calling one is refused with a message that says so.

// resolveArgs resolves argument types, which may not be frozen (tuples aside).
func resolveArgs(rs storage.Resolver, refs []*grammar.TypeRef) ([]storage.Ctype, error) {
	out := make([]storage.Ctype, len(refs))
	for i, r := range refs {
		if r.Frozen && r.Name != "tuple" {
			return nil, invalidf("Argument '%s' cannot be frozen; remove frozen<> modifier from '%s'", r, r)
		}
		ct, err := rs.Resolve(r)
		if err != nil {
			return nil, err
		}
		out[i] = ct
	}
	return out, nil
}

// functionKeyspace returns the keyspace of the function or aggregate to create, once the
// session's role may create functions in it.
func (d *ddl) functionKeyspace(name grammar.TableName) (*storage.Keyspace, error) {
	k, err := d.keyspace(name.Ks, false)
	if k == nil {
		return nil, err
	}
	if err := d.require("CREATE", grammar.Resource{Kind: grammar.ResKeyspaceFunctions, Ks: k.Name}); err != nil {
		return nil, err
	}
	if err := modifiable(k, "CREATE", "<all functions in "+k.Name+">"); err != nil {
		return nil, err
	}
	return k, nil
}

func (d *ddl) createFunction(st *grammar.CreateFunctionStmt) (*cql.SchemaChange, error) {
	for i, n := range st.ArgNames {
		if slices.Index(st.ArgNames, n) != i {
			return nil, invalidf("Duplicate argument names for given function %s with argument names %s", st.Name.Name, "["+strings.Join(st.ArgNames, ", ")+"]")
		}
	}
	if st.Ret.Frozen && st.Ret.Name != "tuple" {
		return nil, invalidf("Return type '%s' cannot be frozen; remove frozen<> modifier from '%s'", st.Ret, st.Ret)
	}
	k, err := d.functionKeyspace(st.Name)
	if err != nil {
		return nil, err
	}
	rs := k.Resolver()
	args, err := resolveArgs(rs, st.ArgTypes)
	if err != nil {
		return nil, err
	}
	ret, err := rs.Resolve(st.Ret)
	if err != nil {
		return nil, err
	}
	if st.Language != "java" && st.Language != "javascript" {
		return nil, invalidf("Invalid language '%s' for function '%s.%s'", st.Language, k.Name, st.Name.Name)
	}
	f := &storage.Function{Ks: k.Name, Name: st.Name.Name, ArgNames: st.ArgNames, ArgRefs: st.ArgTypes, ArgTypes: args,
		RetRef: st.Ret, Ret: ret, CalledOnNull: st.CalledOnNull, Language: st.Language, Body: st.Body}
	change := "CREATED"
	if k.Aggregates[f.Signature()] != nil {
		return nil, invalidf("Function '%s' cannot replace an aggregate", f.Name)
	}
	if old := k.Functions[f.Signature()]; old != nil {
		if st.IfNotExists {
			return nil, nil
		}
		if !st.OrReplace {
			return nil, invalidf("Function '%s' already exists", f.Name)
		}
		if old.CalledOnNull != f.CalledOnNull {
			what := "RETURNS NULL ON NULL INPUT"
			if f.CalledOnNull {
				what = "CALLED ON NULL INPUT"
			}
			return nil, invalidf("Function '%s' must have %s directive", f.Name, what)
		}
		if old.Ret.Text != f.Ret.Text {
			return nil, invalidf("Cannot replace function '%s', the new return type %s is not compatible with the return type %s of existing function", f.Name, f.Ret.Text, old.Ret.Text)
		}
		change = "UPDATED"
	}
	d.mutable(k.Name).Functions[f.Signature()] = f
	d.created(grammar.Resource{Kind: grammar.ResFunction, Ks: k.Name, Name: f.Name, ArgText: storage.TypeTexts(args)})
	return &cql.SchemaChange{ChangeType: change, Target: cql.TargetFunction, Keyspace: k.Name, Name: f.Name, ArgTypes: storage.TypeTexts(args)}, nil
}

func (d *ddl) createAggregate(st *grammar.CreateAggregateStmt) (*cql.SchemaChange, error) {
	if st.StateType.Frozen && st.StateType.Name != "tuple" {
		return nil, invalidf("State type '%s' cannot be frozen; remove frozen<> modifier from '%s'", st.StateType, st.StateType)
	}
	k, err := d.functionKeyspace(st.Name)
	if err != nil {
		return nil, err
	}
	rs := k.Resolver()
	args, err := resolveArgs(rs, st.ArgTypes)
	if err != nil {
		return nil, err
	}
	stype, err := rs.Resolve(st.StateType)
	if err != nil {
		return nil, err
	}
	sfArgs := append([]storage.Ctype{stype}, args...)
	sfText := k.Name + "." + storage.Signature(st.StateFunc, sfArgs)
	sf := k.Functions[storage.Signature(st.StateFunc, sfArgs)]
	if sf == nil {
		if k.Aggregates[storage.Signature(st.StateFunc, sfArgs)] != nil {
			return nil, invalidf("State function %s isn't a scalar function", sfText)
		}
		return nil, invalidf("State function %s doesn't exist", sfText)
	}
	if sf.Ret.Text != stype.Text {
		return nil, invalidf("State function %s return type must be the same as the first argument type - check STYPE, argument and return types", sfText)
	}
	a := &storage.Aggregate{Ks: k.Name, Name: st.Name.Name, ArgRefs: st.ArgTypes, ArgTypes: args, StateFunc: st.StateFunc,
		StateType: stype, Ret: sf.Ret}
	if st.FinalFunc != "" {
		ffText := k.Name + "." + storage.Signature(st.FinalFunc, []storage.Ctype{stype})
		ff := k.Functions[storage.Signature(st.FinalFunc, []storage.Ctype{stype})]
		if ff == nil {
			return nil, invalidf("Final function %s doesn't exist", ffText)
		}
		a.FinalFunc, a.Ret = st.FinalFunc, ff.Ret
	}
	if st.InitCond != nil {
		b, err := cqlvalue.Literal(st.InitCond, stype.Info, "INITCOND")
		if err != nil {
			return nil, invalidf("Invalid value for INITCOND of type %s", stype.Text)
		}
		a.InitCond = cqlLiteral(stype.Info, b)
	}
	change := "CREATED"
	if k.Functions[a.Signature()] != nil {
		return nil, invalidf("Aggregate '%s' cannot replace a function", a.Name)
	}
	if old := k.Aggregates[a.Signature()]; old != nil {
		if st.IfNotExists {
			return nil, nil
		}
		if !st.OrReplace {
			return nil, invalidf("Aggregate '%s' already exists", a.Name)
		}
		if old.Ret.Text != a.Ret.Text {
			return nil, invalidf("Cannot replace aggregate '%s', the new return type %s isn't compatible with the return type %s of existing function", a.Name, a.Ret.Text, old.Ret.Text)
		}
		change = "UPDATED"
	}
	d.mutable(k.Name).Aggregates[a.Signature()] = a
	d.created(grammar.Resource{Kind: grammar.ResFunction, Ks: k.Name, Name: a.Name, ArgText: storage.TypeTexts(args)})
	return &cql.SchemaChange{ChangeType: change, Target: cql.TargetAggregate, Keyspace: k.Name, Name: a.Name, ArgTypes: storage.TypeTexts(args)}, nil
}

func (d *ddl) dropFunction(st *grammar.DropFunctionStmt) (*cql.SchemaChange, error) {
	k, err := d.keyspace(st.Name.Ks, st.IfExists)
	if k == nil {
		return nil, err
	}
	key, err := functionKey(k, st)
	if key == "" {
		return nil, err
	}
	var args []storage.Ctype
	if st.Aggregate {
		args = k.Aggregates[key].ArgTypes
	} else {
		args = k.Functions[key].ArgTypes
	}
	full := k.Name + "." + st.Name.Name
	fres := grammar.Resource{Kind: grammar.ResFunction, Ks: k.Name, Name: st.Name.Name, ArgText: storage.TypeTexts(args)}
	if err := d.require("DROP", fres); err != nil {
		return nil, err
	}
	if err := modifiable(k, "DROP", "<function "+full+">"); err != nil {
		return nil, err
	}
	d.dropped(fres)
	nk := d.mutable(k.Name)
	if st.Aggregate {
		a := k.Aggregates[key]
		delete(nk.Aggregates, key)
		return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetAggregate, Keyspace: k.Name, Name: a.Name, ArgTypes: storage.TypeTexts(a.ArgTypes)}, nil
	}
	if users := aggregatesUsing(k, key); len(users) > 0 {
		return nil, invalidf("Function '%s' is still referenced by aggregates %s", full, strings.Join(users, ", "))
	}
	f := k.Functions[key]
	delete(nk.Functions, key)
	return &cql.SchemaChange{ChangeType: "DROPPED", Target: cql.TargetFunction, Keyspace: k.Name, Name: f.Name, ArgTypes: storage.TypeTexts(f.ArgTypes)}, nil
}

// functionKey returns the signature of the function or aggregate of keyspace k that DROP
// FUNCTION or DROP AGGREGATE names: by its argument types when the statement gives them,
// else by its name alone, which must then have one overload. None is "" with an error, or
// with none under IF EXISTS.
func functionKey(k *storage.Keyspace, st *grammar.DropFunctionStmt) (string, error) {
	what, verb := "Function", "FUNCTION"
	var keys []string
	if st.Aggregate {
		what, verb = "Aggregate", "AGGREGATE"
		for key, a := range k.Aggregates {
			if a.Name == st.Name.Name {
				keys = append(keys, key)
			}
		}
	} else {
		for key, f := range k.Functions {
			if f.Name == st.Name.Name {
				keys = append(keys, key)
			}
		}
	}
	full := k.Name + "." + st.Name.Name
	if st.HasArgs {
		args, err := resolveArgs(k.Resolver(), st.Args)
		if err != nil {
			return "", err
		}
		if key := storage.Signature(st.Name.Name, args); slices.Contains(keys, key) {
			return key, nil
		}
		if st.IfExists {
			return "", nil
		}
		return "", invalidf("%s '%s(%s)' doesn't exist", what, full, strings.Join(storage.TypeTexts(args), ", "))
	}
	switch len(keys) {
	case 0:
		if st.IfExists {
			return "", nil
		}
		return "", invalidf("%s '%s' doesn't exist", what, full)
	case 1:
		return keys[0], nil
	}
	return "", invalidf("'DROP %s %s' matches multiple function definitions; specify the argument types by issuing a statement like 'DROP %s %s (type, type, ...)'. You can use cqlsh 'DESCRIBE %s %s' command to find all overloads", verb, st.Name.Name, verb, st.Name.Name, verb, st.Name.Name)
}

// aggregatesUsing names, as ks.name, the aggregates of keyspace k whose state or final
// function is the function of signature key.
func aggregatesUsing(k *storage.Keyspace, key string) []string {
	var users []string
	for _, a := range sortedAggregates(k) {
		sfKey := storage.Signature(a.StateFunc, append([]storage.Ctype{a.StateType}, a.ArgTypes...))
		if sfKey == key || a.FinalFunc != "" && storage.Signature(a.FinalFunc, []storage.Ctype{a.StateType}) == key {
			users = append(users, a.Ks+"."+a.Name)
		}
	}
	return users
}

func sortedAggregates(k *storage.Keyspace) []*storage.Aggregate {
	out := make([]*storage.Aggregate, 0, len(k.Aggregates))
	for _, a := range k.Aggregates {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *storage.Aggregate) int { return strings.Compare(a.Signature(), b.Signature()) })
	return out
}

// udfCall refuses a call of a user-defined function or aggregate, which the node cannot
// run; a name that is neither is an unknown function.
func udfCall(k *storage.Keyspace, ks, name string) error {
	if k != nil {
		for _, f := range k.Functions {
			if f.Name == name {
				return invalidf("Executing the user-defined function %s.%s is not supported by the embedded node: it does not run %s function bodies", ks, name, f.Language)
			}
		}
		for _, a := range k.Aggregates {
			if a.Name == name {
				return invalidf("Executing the user-defined aggregate %s.%s is not supported by the embedded node: it does not run the Java of its functions", ks, name)
			}
		}
	}
	return invalidf("Unknown function %s.%s", ks, name)
}

// cqlLiteral spells a serialized value as a CQL literal, as Cassandra stores an INITCOND.
func cqlLiteral(t cql.TypeInfo, b []byte) string {
	if b == nil {
		return "null"
	}
	switch t.ID {
	case cql.TypeASCII, cql.TypeVarchar, cql.TypeInet, cql.TypeTimestamp, cql.TypeDate, cql.TypeTime, cql.TypeDuration:
		if t.ID != cql.TypeASCII && t.ID != cql.TypeVarchar {
			s := cqlvalue.ToJSON(t, b)
			return "'" + strings.Trim(s, `"`) + "'"
		}
		return "'" + strings.ReplaceAll(string(b), "'", "''") + "'"
	case cql.TypeBoolean:
		return strconv.FormatBool(len(b) > 0 && b[0] != 0)
	case cql.TypeBlob:
		return strings.Trim(cqlvalue.ToJSON(t, b), `"`)
	case cql.TypeUUID, cql.TypeTimeUUID:
		return strings.Trim(cqlvalue.ToJSON(t, b), `"`)
	case cql.TypeList, cql.TypeSet, cql.TypeMap:
		per := cqlvalue.ElemsPerEntry(t)
		elems, _ := cqlvalue.DecCollection(b, per)
		var parts []string
		for i := 0; i < len(elems); i += per {
			if per == 2 {
				parts = append(parts, cqlLiteral(cqlvalue.KeyType(t), elems[i])+": "+cqlLiteral(cqlvalue.ElemType(t), elems[i+1]))
			} else {
				parts = append(parts, cqlLiteral(cqlvalue.ElemType(t), elems[i]))
			}
		}
		if t.ID == cql.TypeList {
			return "[" + strings.Join(parts, ", ") + "]"
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case cql.TypeTuple, cql.TypeUDT:
		elems, _ := cqlvalue.DecTuple(b)
		types := cqlvalue.ComponentTypes(t)
		var parts []string
		for i, ct := range types {
			var v []byte
			if i < len(elems) {
				v = elems[i]
			}
			if t.ID == cql.TypeUDT {
				parts = append(parts, cqlvalue.QuoteName(t.Fields[i].Name)+": "+cqlLiteral(ct, v))
			} else {
				parts = append(parts, cqlLiteral(ct, v))
			}
		}
		if t.ID == cql.TypeUDT {
			return "{" + strings.Join(parts, ", ") + "}"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	case cql.TypeFloat, cql.TypeDouble:
		return cqlvalue.ToJSON(t, b)
	}
	return cqlvalue.ToJSON(t, b)
}
