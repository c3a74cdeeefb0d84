package node

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
type ctype struct {
	info   cql.TypeInfo
	text   string
	frozen bool
}

// userType is a user-defined type of a keyspace. It is immutable once published; ALTER TYPE
// publishes a new one.
type userType struct {
	ks, name   string
	fieldNames []string
	fieldRefs  []*grammar.TypeRef // as declared, to resolve them again when a type they use changes
	fields     []ctype
}

// info returns the type as the protocol describes it.
func (u *userType) info() cql.TypeInfo {
	t := cql.TypeInfo{ID: cql.TypeUDT, Keyspace: u.ks, Name: u.name, Fields: make([]cql.Field, len(u.fields))}
	for i, f := range u.fields {
		t.Fields[i] = cql.Field{Name: u.fieldNames[i], Type: f.info}
	}
	return t
}

// field returns the position of the field named n, or -1.
func (u *userType) field(n string) int { return slices.Index(u.fieldNames, n) }

// resolver resolves type references in one keyspace, against its user types.
type resolver struct {
	ks    string
	types map[string]*userType
}

// resolve resolves r. Everything inside a frozen type is frozen; collections and user types
// nested in a non-frozen collection must be frozen, as in Cassandra.
func (rs resolver) resolve(r *grammar.TypeRef) (ctype, error) {
	return rs.resolveIn(r, false, 0)
}

func (rs resolver) resolveIn(r *grammar.TypeRef, frozen bool, depth int) (ctype, error) {
	if depth > grammar.MaxNesting {
		return ctype{}, cqlvalue.Invalidf("type nesting too deep")
	}
	frozen = frozen || r.Frozen
	if r.Custom {
		t := cql.TypeInfo{ID: cql.TypeCustom, Custom: r.Name}
		return ctype{info: t, text: "'" + r.Name + "'", frozen: true}, nil
	}
	if id, ok := r.NativeType(); ok {
		if r.Frozen {
			return ctype{}, cqlvalue.Invalidf("frozen<> is only allowed on collections, tuples, and user-defined types (got %s)", r.Name)
		}
		t := cql.TypeInfo{ID: id}
		return ctype{info: t, text: t.String(), frozen: true}, nil
	}
	wrap := func(s string) string {
		if frozen {
			return "frozen<" + s + ">"
		}
		return s
	}
	switch r.Name {
	case "list", "set", "map":
		if r.Args == nil {
			break
		}
		elems := make([]ctype, len(r.Args))
		for i, a := range r.Args {
			e, err := rs.resolveIn(a, frozen, depth+1)
			if err != nil {
				return ctype{}, err
			}
			if !frozen && !e.frozen {
				what := "collections"
				if e.info.ID == cql.TypeUDT {
					what = "UDTs"
				}
				return ctype{}, cqlvalue.Invalidf("Non-frozen %s are not allowed inside collections: %s", what, r)
			}
			if e.info.ID == cql.TypeCounter {
				return ctype{}, cqlvalue.Invalidf("Counters are not allowed inside collections: %s", r)
			}
			elems[i] = e
		}
		switch r.Name {
		case "list":
			return ctype{info: cql.ListOf(elems[0].info), text: wrap("list<" + elems[0].text + ">"), frozen: frozen}, nil
		case "set":
			if elems[0].info.ID == cql.TypeDuration {
				return ctype{}, cqlvalue.Invalidf("Durations are not allowed inside sets: %s", r)
			}
			return ctype{info: cql.SetOf(elems[0].info), text: wrap("set<" + elems[0].text + ">"), frozen: frozen}, nil
		}
		if elems[0].info.ID == cql.TypeDuration {
			return ctype{}, cqlvalue.Invalidf("Durations are not allowed as map keys: %s", r)
		}
		return ctype{info: cql.MapOf(elems[0].info, elems[1].info), text: wrap("map<" + elems[0].text + ", " + elems[1].text + ">"), frozen: frozen}, nil
	case "tuple":
		if r.Args == nil {
			break
		}
		t := cql.TypeInfo{ID: cql.TypeTuple}
		parts := make([]string, len(r.Args))
		for i, a := range r.Args {
			e, err := rs.resolveIn(a, true, depth+1)
			if err != nil {
				return ctype{}, err
			}
			if e.info.ID == cql.TypeCounter {
				return ctype{}, cqlvalue.Invalidf("Counters are not allowed inside tuples")
			}
			t.Elems = append(t.Elems, e.info)
			parts[i] = e.text
		}
		return ctype{info: t, text: "frozen<tuple<" + strings.Join(parts, ", ") + ">>", frozen: true}, nil
	}
	// A user-defined type.
	if r.Ks != "" && r.Ks != rs.ks {
		return ctype{}, cqlvalue.Invalidf("Statement on keyspace %s cannot refer to a user type in keyspace %s; user types can only be used in the keyspace they are defined in", rs.ks, r.Ks)
	}
	u := rs.types[r.Name]
	if u == nil {
		return ctype{}, cqlvalue.Invalidf("Unknown type %s.%s", rs.ks, r.Name)
	}
	return ctype{info: u.info(), text: wrap(cqlvalue.QuoteName(u.name)), frozen: frozen}, nil
}
