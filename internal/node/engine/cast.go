package engine

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
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

// castSelector compiles the casts of a column, innermost first, and returns the selector,
// its type and the name Cassandra gives its column.
func castSelector(o outCol, col *storage.Column, casts []string) (outCol, cql.TypeInfo, string, error) {
	typ, text := col.Typ, col.Name
	for _, to := range casts {
		id := grammar.SimpleTypes[to]
		if id == typ.ID {
			continue // a cast to its own type is ignored, as 4.1 does
		}
		if !castable(typ.ID, to) {
			return o, typ, text, invalidf("%s cannot be cast to %s", col.Name, to)
		}
		next := cql.TypeInfo{ID: id}
		o.casts = append(o.casts, castStep{from: typ, to: next})
		o.derived = true
		typ, text = next, "cast("+text+" as "+castName(to)+")"
	}
	return o, typ, text, nil
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

// castResult applies the casts of selector s to the result of the selector just compiled,
// the last of p's: its value (an aggregate's once aggregated), type and column name.
func castResult(p *selectPlan, s grammar.Selector) error {
	o, sp := &p.out[len(p.out)-1], &p.specs[len(p.specs)-1]
	typ, text := sp.Type, sp.Name
	var steps []castStep
	for _, to := range s.Casts {
		id := grammar.SimpleTypes[to]
		if id == typ.ID {
			continue // a cast to its own type is ignored, as 4.1 does
		}
		if !castable(typ.ID, to) {
			return invalidf("%s cannot be cast to %s", selectorColumn(s), to)
		}
		next := cql.TypeInfo{ID: id}
		steps = append(steps, castStep{from: typ, to: next})
		typ, text = next, "cast("+text+" as "+castName(to)+")"
	}
	if o.agg != aggNone {
		o.post = append(o.post, steps...)
	} else if len(steps) > 0 {
		o.casts = append(o.casts, steps...)
		o.derived = true
	}
	sp.Type, sp.Name = typ, text
	return nil
}

// selectorColumn is the column 4.1 names in the error of a cast it has no function for:
// the first the selector reads.
func selectorColumn(s grammar.Selector) string {
	switch {
	case s.Col != "":
		return s.Col
	case len(s.Cols) > 0:
		return s.Cols[0]
	}
	return s.Text
}
