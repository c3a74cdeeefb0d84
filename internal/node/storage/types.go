package storage

import (
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// ctype is a resolved type: what the protocol sends, how system_schema spells it, and
// whether it is frozen (a single cell). Native types are frozen; collections and user types
// are not unless declared so or nested in something frozen.
type Ctype struct {
	Info   cql.TypeInfo
	Text   string
	Frozen bool
}

// userType is a user-defined type of a keyspace. It is immutable once published; ALTER TYPE
// publishes a new one.
type UserType struct {
	Ks, Name   string
	FieldNames []string
	FieldRefs  []*grammar.TypeRef // as declared, to resolve them again when a type they use changes
	Fields     []Ctype
}

// info returns the type as the protocol describes it.
func (u *UserType) info() cql.TypeInfo {
	t := cql.TypeInfo{ID: cql.TypeUDT, Keyspace: u.Ks, Name: u.Name, Fields: make([]cql.Field, len(u.Fields))}
	for i, f := range u.Fields {
		t.Fields[i] = cql.Field{Name: u.FieldNames[i], Type: f.Info}
	}
	return t
}

// field returns the position of the field named n, or -1.
func (u *UserType) Field(n string) int { return slices.Index(u.FieldNames, n) }

// resolver resolves type references in one keyspace, against its user types.
type Resolver struct {
	Ks    string
	types map[string]*UserType
}

// resolve resolves r. Everything inside a frozen type is frozen; collections and user types
// nested in a non-frozen collection must be frozen, as in Cassandra.
func (rs Resolver) Resolve(r *grammar.TypeRef) (Ctype, error) {
	return rs.resolveIn(r, false, 0)
}

// resolveIn resolves r at nesting depth, frozen when inside a frozen type.
func (rs Resolver) resolveIn(r *grammar.TypeRef, frozen bool, depth int) (Ctype, error) {
	if depth > grammar.MaxNesting {
		return Ctype{}, cqlvalue.Invalidf("type nesting too deep")
	}
	frozen = frozen || r.Frozen
	if r.Custom {
		t := cql.TypeInfo{ID: cql.TypeCustom, Custom: r.Name}
		return Ctype{Info: t, Text: "'" + r.Name + "'", Frozen: true}, nil
	}
	if id, ok := r.NativeType(); ok {
		if r.Frozen {
			return Ctype{}, cqlvalue.Invalidf("frozen<> is only allowed on collections, tuples, and user-defined types (got %s)", r.Name)
		}
		t := cql.TypeInfo{ID: id}
		return Ctype{Info: t, Text: t.String(), Frozen: true}, nil
	}
	switch r.Name {
	case "list", "set", "map":
		if r.Args != nil {
			return rs.resolveCollection(r, frozen, depth)
		}
	case "tuple":
		if r.Args != nil {
			return rs.resolveTuple(r, depth)
		}
	}
	return rs.resolveUDT(r, frozen)
}

// frozenText spells type s as system_schema does: frozen<s> when frozen.
func frozenText(s string, frozen bool) string {
	if frozen {
		return "frozen<" + s + ">"
	}
	return s
}

// resolveCollection resolves a list, set or map: elements of a non-frozen collection must
// be frozen, counters are refused, and durations as set elements or map keys.
func (rs Resolver) resolveCollection(r *grammar.TypeRef, frozen bool, depth int) (Ctype, error) {
	elems := make([]Ctype, len(r.Args))
	for i, a := range r.Args {
		e, err := rs.resolveIn(a, frozen, depth+1)
		if err != nil {
			return Ctype{}, err
		}
		if !frozen && !e.Frozen {
			what := "collections"
			if e.Info.ID == cql.TypeUDT {
				what = "UDTs"
			}
			return Ctype{}, cqlvalue.Invalidf("Non-frozen %s are not allowed inside collections: %s", what, r)
		}
		if e.Info.ID == cql.TypeCounter {
			return Ctype{}, cqlvalue.Invalidf("Counters are not allowed inside collections: %s", r)
		}
		elems[i] = e
	}
	switch r.Name {
	case "list":
		return Ctype{Info: cql.ListOf(elems[0].Info), Text: frozenText("list<"+elems[0].Text+">", frozen), Frozen: frozen}, nil
	case "set":
		if elems[0].Info.ID == cql.TypeDuration {
			return Ctype{}, cqlvalue.Invalidf("Durations are not allowed inside sets: %s", r)
		}
		return Ctype{Info: cql.SetOf(elems[0].Info), Text: frozenText("set<"+elems[0].Text+">", frozen), Frozen: frozen}, nil
	}
	if elems[0].Info.ID == cql.TypeDuration {
		return Ctype{}, cqlvalue.Invalidf("Durations are not allowed as map keys: %s", r)
	}
	return Ctype{Info: cql.MapOf(elems[0].Info, elems[1].Info), Text: frozenText("map<"+elems[0].Text+", "+elems[1].Text+">", frozen), Frozen: frozen}, nil
}

// resolveTuple resolves a tuple, always frozen; counters are refused inside it.
func (rs Resolver) resolveTuple(r *grammar.TypeRef, depth int) (Ctype, error) {
	t := cql.TypeInfo{ID: cql.TypeTuple}
	parts := make([]string, len(r.Args))
	for i, a := range r.Args {
		e, err := rs.resolveIn(a, true, depth+1)
		if err != nil {
			return Ctype{}, err
		}
		if e.Info.ID == cql.TypeCounter {
			return Ctype{}, cqlvalue.Invalidf("Counters are not allowed inside tuples")
		}
		t.Elems = append(t.Elems, e.Info)
		parts[i] = e.Text
	}
	return Ctype{Info: t, Text: "frozen<tuple<" + strings.Join(parts, ", ") + ">>", Frozen: true}, nil
}

// resolveUDT resolves a user-defined type of the resolver's keyspace.
func (rs Resolver) resolveUDT(r *grammar.TypeRef, frozen bool) (Ctype, error) {
	if r.Ks != "" && r.Ks != rs.Ks {
		return Ctype{}, cqlvalue.Invalidf("Statement on keyspace %s cannot refer to a user type in keyspace %s; user types can only be used in the keyspace they are defined in", rs.Ks, r.Ks)
	}
	u := rs.types[r.Name]
	if u == nil {
		return Ctype{}, cqlvalue.Invalidf("Unknown type %s.%s", rs.Ks, r.Name)
	}
	return Ctype{Info: u.info(), Text: frozenText(cqlvalue.QuoteName(u.Name), frozen), Frozen: frozen}, nil
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
