package engine

import (
	"encoding/binary"
	"math"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
	"time"

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
		v = castValue(s.from, s.to, v)
	}
	return v
}

// castValue casts one value.
func castValue(from, to cql.TypeInfo, b []byte) []byte {
	switch to.ID {
	case cql.TypeASCII, cql.TypeVarchar:
		if from.ID == cql.TypeASCII {
			return b
		}
		s, ok := castText(from, b)
		if !ok {
			return nil
		}
		return []byte(s)
	case cql.TypeDate:
		v, _ := cqlvalue.ApplyConv("todate", from, to, b)
		return v
	case cql.TypeTimestamp:
		v, _ := cqlvalue.ApplyConv("totimestamp", from, to, b)
		return v
	}
	n, ok := numberOf(from, b)
	if !ok {
		return nil
	}
	switch to.ID {
	case cql.TypeTinyint:
		return []byte{byte(n.int32())}
	case cql.TypeSmallint:
		return binary.BigEndian.AppendUint16(nil, uint16(n.int32()))
	case cql.TypeInt:
		return cqlvalue.EncInt(n.int32())
	case cql.TypeBigint:
		return cqlvalue.EncBigint(n.int64())
	case cql.TypeFloat:
		return binary.BigEndian.AppendUint32(nil, math.Float32bits(n.float32()))
	case cql.TypeDouble:
		return cqlvalue.EncDouble(n.float64())
	case cql.TypeVarint:
		return cqlvalue.EncVarint(big.NewInt(n.int64()))
	case cql.TypeDecimal:
		d := n.float64()
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil
		}
		v, _ := cqlvalue.EncDecimal(cqlvalue.JavaFloat(d, 64))
		return v
	}
	return nil
}

// number is a value of a numeric type, as the Java Number it deserializes to.
type number struct {
	kind  byte // 'i' a Byte, Short, Integer or Long; 'f' a Float; 'd' a Double; 'D' a BigDecimal; 'I' a BigInteger
	i     int64
	f     float64
	big   *big.Int
	scale int32
}

// numberOf decodes a number of type t.
func numberOf(t cql.TypeInfo, b []byte) (number, bool) {
	switch t.ID {
	case cql.TypeTinyint:
		return number{kind: 'i', i: int64(int8(b[0]))}, len(b) == 1
	case cql.TypeSmallint:
		if len(b) != 2 {
			return number{}, false
		}
		return number{kind: 'i', i: int64(int16(binary.BigEndian.Uint16(b)))}, true
	case cql.TypeInt:
		v, ok := cqlvalue.Int32Value(b)
		return number{kind: 'i', i: int64(v)}, ok
	case cql.TypeBigint, cql.TypeCounter:
		v, ok := cqlvalue.Int64Value(b)
		return number{kind: 'i', i: v}, ok
	case cql.TypeFloat:
		if len(b) != 4 {
			return number{}, false
		}
		return number{kind: 'f', f: float64(math.Float32frombits(binary.BigEndian.Uint32(b)))}, true
	case cql.TypeDouble:
		v, ok := cqlvalue.Int64Value(b)
		return number{kind: 'd', f: math.Float64frombits(uint64(v))}, ok
	case cql.TypeVarint:
		return number{kind: 'I', big: cqlvalue.DecVarint(b)}, true
	case cql.TypeDecimal:
		if len(b) < 4 {
			return number{}, false
		}
		return number{kind: 'D', big: cqlvalue.DecVarint(b[4:]), scale: int32(binary.BigEndian.Uint32(b))}, true
	}
	return number{}, false
}

// int32 is Java's intValue: the low 32 bits of an integer, a float saturated.
func (n number) int32() int32 {
	switch n.kind {
	case 'f', 'd':
		return int32(saturate(n.f, math.MinInt32, math.MaxInt32))
	}
	return int32(n.int64())
}

// int64 is Java's longValue: the low 64 bits of an integer (a decimal's integer part), a
// float saturated.
func (n number) int64() int64 {
	switch n.kind {
	case 'i':
		return n.i
	case 'f', 'd':
		if n.f >= math.MaxInt64 {
			return math.MaxInt64 // float64(MaxInt64) is 2^63, which int64() cannot hold
		}
		return int64(saturate(n.f, math.MinInt64, math.MaxInt64))
	}
	return int64(lowBits(n.integer()))
}

// saturate is Java's float-to-integer narrowing before the conversion: NaN is 0, and a
// value past an end of [lo, hi] is that end.
func saturate(f, lo, hi float64) float64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= hi:
		return hi
	case f <= lo:
		return lo
	}
	return f
}

// integer is a BigInteger's value, or a BigDecimal's integer part (toBigInteger).
func (n number) integer() *big.Int {
	if n.kind == 'I' || n.scale == 0 {
		return n.big
	}
	if n.scale < 0 {
		if n.scale < -64 {
			return new(big.Int) // a multiple of 2^64: no low bits
		}
		return new(big.Int).Mul(n.big, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-n.scale)), nil))
	}
	if int(n.scale) > len(n.big.String()) {
		return new(big.Int)
	}
	return new(big.Int).Quo(n.big, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.scale)), nil))
}

// lowBits is the low 64 bits of x in two's complement.
func lowBits(x *big.Int) uint64 {
	return new(big.Int).And(x, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
}

// float64 is Java's doubleValue.
func (n number) float64() float64 {
	switch n.kind {
	case 'i':
		return float64(n.i)
	case 'f', 'd':
		return n.f
	case 'I':
		f, _ := new(big.Float).SetInt(n.big).Float64()
		return f
	}
	f, _ := strconv.ParseFloat(cqlvalue.JavaDecimal(n.big, n.scale), 64)
	return f
}

// float32 is Java's floatValue.
func (n number) float32() float32 {
	switch n.kind {
	case 'i':
		return float32(n.i)
	case 'f', 'd':
		return float32(n.f)
	case 'I':
		f, _ := new(big.Float).SetInt(n.big).Float32()
		return f
	}
	f, _ := strconv.ParseFloat(cqlvalue.JavaDecimal(n.big, n.scale), 32)
	return float32(f)
}

// castText spells a value as 4.1's toCQLLiteral does for a cast to text: Java's toString of
// a number, an inet's host address, a timestamp in ISO 8601 UTC with milliseconds.
func castText(t cql.TypeInfo, b []byte) (string, bool) {
	switch t.ID {
	case cql.TypeVarchar:
		return string(b), true
	case cql.TypeBoolean:
		return strconv.FormatBool(b[0] != 0), len(b) == 1
	case cql.TypeFloat, cql.TypeDouble:
		n, ok := numberOf(t, b)
		switch {
		case !ok:
			return "", false
		case math.IsNaN(n.f):
			return "NaN", true
		case math.IsInf(n.f, 1):
			return "Infinity", true
		case math.IsInf(n.f, -1):
			return "-Infinity", true
		}
		if t.ID == cql.TypeFloat {
			return cqlvalue.JavaFloat(n.f, 32), true
		}
		return cqlvalue.JavaFloat(n.f, 64), true
	case cql.TypeInet:
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return "", false
		}
		return javaHostAddress(a), true
	case cql.TypeTimestamp:
		v, ok := cqlvalue.Int64Value(b)
		return time.UnixMilli(v).UTC().Format("2006-01-02T15:04:05.000Z"), ok
	}
	s := cqlvalue.ToJSON(t, b)
	if s == `""` {
		return "", false
	}
	return strings.Trim(s, `"`), true
}

// javaHostAddress spells an address as Java's getHostAddress: an IPv6 one as eight groups of
// hex digits, none left out; one mapped from IPv4 as the IPv4 address.
func javaHostAddress(a netip.Addr) string {
	if a = a.Unmap(); a.Is4() {
		return a.String()
	}
	v := a.As16()
	parts := make([]string, 8)
	for i := range parts {
		parts[i] = strconv.FormatUint(uint64(binary.BigEndian.Uint16(v[2*i:])), 16)
	}
	return strings.Join(parts, ":")
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
