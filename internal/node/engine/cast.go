package engine

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// CAST(x AS type) in a selection, as Cassandra 4.1's CastFcts: a number to any other
// number (Java's narrowing and widening: low bits of integers, floats saturated into int
// and long, a decimal made from the double's Double.toString, a varint from the long) and
// to text or ascii; a timeuuid, timestamp or date to a date or timestamp as toDate and
// toTimestamp; every other native type but blob and duration to text or ascii (its CQL
// literal, as toCQLLiteral spells it); ascii to text. A cast to the value's own type is no
// cast at all: the column keeps its name. The result column is named cast(x as type).

// castStep is one cast of a selector, from the type its argument has to the one it names.
type castStep struct {
	from, to cql.TypeInfo
}

// castNumeric lists the types a number casts to (and from).
var castNumeric = map[cql.TypeID]bool{
	cql.TypeTinyint: true, cql.TypeSmallint: true, cql.TypeInt: true, cql.TypeBigint: true, cql.TypeFloat: true,
	cql.TypeDouble: true, cql.TypeDecimal: true, cql.TypeVarint: true,
}

// castable reports whether 4.1 has a cast function from a value of type from to the type
// the cast names (to, as written: varchar is a name 4.1 finds no cast function under).
func castable(from cql.TypeID, to string) bool {
	switch to {
	case "ascii", "text":
		switch from {
		case cql.TypeBlob, cql.TypeDuration, cql.TypeVarchar, cql.TypeASCII:
			return from == cql.TypeASCII && to == "text"
		}
		return simpleType(from)
	case "date":
		return from == cql.TypeTimeUUID || from == cql.TypeTimestamp
	case "timestamp":
		return from == cql.TypeTimeUUID || from == cql.TypeDate
	}
	id, ok := grammar.SimpleTypes[to]
	return ok && castNumeric[id] && (castNumeric[from] || from == cql.TypeCounter)
}

// simpleType reports whether id is a native type (not a collection, tuple, user or custom
// type).
func simpleType(id cql.TypeID) bool {
	for _, v := range grammar.SimpleTypes {
		if v == id {
			return true
		}
	}
	return false
}

// castName is the type's name in the column a cast names: 4.1 names text and varchar text.
func castName(to string) string {
	if to == "varchar" {
		return "text"
	}
	return to
}

// applyCasts computes a selector's casts of v. A null stays null; so does a value 4.1
// cannot convert (an empty one, a NaN or infinity to decimal).
func applyCasts(steps []castStep, v []byte) []byte {
	for _, s := range steps {
		if len(v) == 0 {
			return nil
		}
		v = cqlvalue.Cast(s.from, s.to, v)
	}
	return v
}
