package node

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// typeRef is a CQL type as a statement writes it. User-defined types are names until the
// statement runs against a schema, which resolves them (resolver.resolve).
type typeRef struct {
	name   string // a native type, list, set, map, tuple, or a user type's name
	ks     string // the keyspace of a user type written ks.name
	frozen bool   // written frozen<...>
	args   []*typeRef
	custom bool // a custom type given by its class name (name is the class)
}

// String spells the type as the statement wrote it, for error messages.
func (r *typeRef) String() string {
	var s string
	switch {
	case r.custom:
		s = "'" + r.name + "'"
	case r.args != nil && (r.name == "list" || r.name == "set" || r.name == "map" || r.name == "tuple"):
		parts := make([]string, len(r.args))
		for i, a := range r.args {
			parts[i] = a.String()
		}
		s = r.name + "<" + strings.Join(parts, ", ") + ">"
	default:
		s = r.name
		if r.ks != "" {
			s = r.ks + "." + r.name
		}
	}
	if r.frozen {
		return "frozen<" + s + ">"
	}
	return s
}

// isCounter reports whether the type is counter.
func (r *typeRef) isCounter() bool { return r.name == "counter" && r.args == nil }

// nativeType returns the native type named by r, if it is one.
func (r *typeRef) nativeType() (cql.TypeID, bool) {
	if r.args != nil || r.ks != "" || r.custom {
		return 0, false
	}
	id, ok := simpleTypes[r.name]
	return id, ok
}

// uses reports whether the type refers, at any depth, to the user type named name.
func (r *typeRef) uses(name string) bool {
	if r.args == nil && r.name == name && !r.custom {
		if _, native := simpleTypes[r.name]; !native || r.ks != "" {
			return true
		}
	}
	for _, a := range r.args {
		if a.uses(name) {
			return true
		}
	}
	return false
}
