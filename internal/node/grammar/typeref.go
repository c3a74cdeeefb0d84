package grammar

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// typeRef is a CQL type as a statement writes it. User-defined types are names until the
// statement runs against a schema, which resolves them (resolver.resolve).
type TypeRef struct {
	Name   string // a native type, list, set, map, tuple, or a user type's name
	Ks     string // the keyspace of a user type written ks.name
	Frozen bool   // written frozen<...>
	Args   []*TypeRef
	Custom bool // a custom type given by its class name (name is the class)
}

// String spells the type as the statement wrote it, for error messages.
func (r *TypeRef) String() string {
	var s string
	switch {
	case r.Custom:
		s = "'" + r.Name + "'"
	case r.Args != nil && (r.Name == "list" || r.Name == "set" || r.Name == "map" || r.Name == "tuple"):
		parts := make([]string, len(r.Args))
		for i, a := range r.Args {
			parts[i] = a.String()
		}
		s = r.Name + "<" + strings.Join(parts, ", ") + ">"
	default:
		s = r.Name
		if r.Ks != "" {
			s = r.Ks + "." + r.Name
		}
	}
	if r.Frozen {
		return "frozen<" + s + ">"
	}
	return s
}

// isCounter reports whether the type is counter.
func (r *TypeRef) IsCounter() bool { return r.Name == "counter" && r.Args == nil }

// nativeType returns the native type named by r, if it is one.
func (r *TypeRef) NativeType() (cql.TypeID, bool) {
	if r.Args != nil || r.Ks != "" || r.Custom {
		return 0, false
	}
	id, ok := SimpleTypes[r.Name]
	return id, ok
}

// uses reports whether the type refers, at any depth, to the user type named name.
func (r *TypeRef) Uses(name string) bool {
	if r.Args == nil && r.Name == name && !r.Custom {
		if _, native := SimpleTypes[r.Name]; !native || r.Ks != "" {
			return true
		}
	}
	for _, a := range r.Args {
		if a.Uses(name) {
			return true
		}
	}
	return false
}

var SimpleTypes = map[string]cql.TypeID{
	"ascii": cql.TypeASCII, "bigint": cql.TypeBigint, "blob": cql.TypeBlob, "boolean": cql.TypeBoolean,
	"counter": cql.TypeCounter, "date": cql.TypeDate, "decimal": cql.TypeDecimal, "double": cql.TypeDouble,
	"float": cql.TypeFloat, "inet": cql.TypeInet, "int": cql.TypeInt, "smallint": cql.TypeSmallint,
	"text": cql.TypeVarchar, "varchar": cql.TypeVarchar, "time": cql.TypeTime, "timestamp": cql.TypeTimestamp,
	"timeuuid": cql.TypeTimeUUID, "tinyint": cql.TypeTinyint, "uuid": cql.TypeUUID, "varint": cql.TypeVarint,
	"duration": cql.TypeDuration,
}
