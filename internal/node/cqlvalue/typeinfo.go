package cqlvalue

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// quoteName quotes a name the way Cassandra prints it: as is when it needs no quotes.
func QuoteName(n string) string {
	plain := n != "" && !grammar.Reserved[n]
	for i := 0; i < len(n) && plain; i++ {
		c := n[i]
		plain = c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9'
	}
	if plain {
		return n
	}
	return cql.QuoteName(n)
}

// isUDT reports whether t is a user-defined type.
func IsUDT(t cql.TypeInfo) bool { return t.ID == cql.TypeUDT }

// isTupleLike reports whether values of t are a sequence of [bytes]: tuples and user types.
func IsTupleLike(t cql.TypeInfo) bool { return t.ID == cql.TypeUDT || t.ID == cql.TypeTuple }

// componentTypes returns the types of a tuple's elements or a user type's fields.
func ComponentTypes(t cql.TypeInfo) []cql.TypeInfo {
	if t.ID == cql.TypeTuple {
		return t.Elems
	}
	out := make([]cql.TypeInfo, len(t.Fields))
	for i, f := range t.Fields {
		out[i] = f.Type
	}
	return out
}

// referencesDuration reports whether t is or contains duration.
func ReferencesDuration(t cql.TypeInfo) bool {
	if t.ID == cql.TypeDuration {
		return true
	}
	if t.Elem != nil && ReferencesDuration(*t.Elem) || t.Key != nil && ReferencesDuration(*t.Key) {
		return true
	}
	for _, c := range ComponentTypes(t) {
		if ReferencesDuration(c) {
			return true
		}
	}
	return false
}
