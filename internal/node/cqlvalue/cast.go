package cqlvalue

import (
	"encoding/binary"
	"math"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// The conversions of CAST(x AS type), as Cassandra 4.1's CastFcts: Java's narrowing and
// widening of numbers, and the text of a value as toCQLLiteral spells it.

// Cast casts the value b of type from to type to, as Cassandra 4.1's CastFcts do (the
// engine checks which casts a selection may ask for): nil when 4.1 cannot convert it.
func Cast(from, to cql.TypeInfo, b []byte) []byte {
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
		v, _ := ApplyConv("todate", from, to, b)
		return v
	case cql.TypeTimestamp:
		v, _ := ApplyConv("totimestamp", from, to, b)
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
		return EncInt(n.int32())
	case cql.TypeBigint:
		return EncBigint(n.int64())
	case cql.TypeFloat:
		return binary.BigEndian.AppendUint32(nil, math.Float32bits(n.float32()))
	case cql.TypeDouble:
		return EncDouble(n.float64())
	case cql.TypeVarint:
		return EncVarint(big.NewInt(n.int64()))
	case cql.TypeDecimal:
		d := n.float64()
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil
		}
		v, _ := EncDecimal(JavaFloat(d, 64))
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
		v, ok := Int32Value(b)
		return number{kind: 'i', i: int64(v)}, ok
	case cql.TypeBigint, cql.TypeCounter:
		v, ok := Int64Value(b)
		return number{kind: 'i', i: v}, ok
	case cql.TypeFloat:
		if len(b) != 4 {
			return number{}, false
		}
		return number{kind: 'f', f: float64(math.Float32frombits(binary.BigEndian.Uint32(b)))}, true
	case cql.TypeDouble:
		v, ok := Int64Value(b)
		return number{kind: 'd', f: math.Float64frombits(uint64(v))}, ok
	case cql.TypeVarint:
		return number{kind: 'I', big: DecVarint(b)}, true
	case cql.TypeDecimal:
		if len(b) < 4 {
			return number{}, false
		}
		return number{kind: 'D', big: DecVarint(b[4:]), scale: int32(binary.BigEndian.Uint32(b))}, true
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
	f, _ := strconv.ParseFloat(JavaDecimal(n.big, n.scale), 64)
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
	f, _ := strconv.ParseFloat(JavaDecimal(n.big, n.scale), 32)
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
			return JavaFloat(n.f, 32), true
		}
		return JavaFloat(n.f, 64), true
	case cql.TypeInet:
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return "", false
		}
		return javaHostAddress(a), true
	case cql.TypeTimestamp:
		v, ok := Int64Value(b)
		return time.UnixMilli(v).UTC().Format("2006-01-02T15:04:05.000Z"), ok
	}
	s := ToJSON(t, b)
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
