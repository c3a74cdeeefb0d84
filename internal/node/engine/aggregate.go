package engine

import (
	"encoding/binary"
	"math"
	"math/big"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
)

// The native aggregates (count, min, max, sum, avg) and GROUP BY, with Cassandra 4.1's
// arithmetic: integer sums wrap in their type, integer averages are truncated and computed
// without overflow, float and double sums are compensated (Kahan), and a decimal average
// keeps the scale of the sum, rounded half-even.

type aggKind uint8

const (
	aggNone      aggKind = iota // a plain selector: the first row of the group
	aggCountRows                // count(*)
	aggCount
	aggMin
	aggMax
	aggSum
	aggAvg
)

var aggKinds = map[string]aggKind{"count": aggCount, "min": aggMin, "max": aggMax, "sum": aggSum, "avg": aggAvg}

// numericTypes are the argument types of sum and avg, in the order Cassandra lists their
// signatures.
var numericTypes = []cql.TypeID{cql.TypeTinyint, cql.TypeSmallint, cql.TypeInt, cql.TypeBigint, cql.TypeFloat,
	cql.TypeDouble, cql.TypeDecimal, cql.TypeVarint, cql.TypeCounter}

// aggResultType checks an aggregate's argument type and returns its result type.
func aggResultType(fn string, kind aggKind, t cql.TypeInfo) (cql.TypeInfo, error) {
	switch kind {
	case aggCount:
		return cql.TypeInfo{ID: cql.TypeBigint}, nil
	case aggMin, aggMax:
		return t, nil
	}
	for _, id := range numericTypes {
		if t.ID == id {
			if id == cql.TypeCounter {
				return cql.TypeInfo{ID: cql.TypeBigint}, nil
			}
			return t, nil
		}
	}
	sigs := make([]string, len(numericTypes))
	for i, id := range numericTypes {
		ret := cql.TypeInfo{ID: id}
		if id == cql.TypeCounter {
			ret = cql.TypeInfo{ID: cql.TypeBigint}
		}
		sigs[i] = "system." + fn + " : (" + cql.TypeInfo{ID: id}.String() + ") -> " + ret.String()
	}
	return cql.TypeInfo{}, invalidf("Invalid call to function %s, none of its type signatures match (known type signatures: %s)", fn, strings.Join(sigs, ", "))
}

// acc accumulates one aggregate over the rows of a group.
type acc struct {
	kind aggKind
	typ  cql.TypeInfo // the argument's type
	n    int64
	best []byte   // min, max
	sum  int64    // integer sums, wrapping
	big  *big.Int // integer averages and varint; the unscaled decimal sum
	f    float64  // float and double: compensated sum
	comp float64
	raw  float64 // the plain sum, for Cassandra's infinity rule
	dec  int32   // the decimal sum's scale
}

func (a *acc) add(v []byte) {
	if a.kind == aggCountRows {
		a.n++
		return
	}
	if len(v) == 0 {
		return
	}
	a.n++
	switch a.kind {
	case aggMin, aggMax:
		if a.best == nil {
			a.best = v
			return
		}
		c := cqlvalue.CompareValues(a.typ, v, a.best)
		if a.kind == aggMin && c < 0 || a.kind == aggMax && c > 0 {
			a.best = v
		}
	case aggSum, aggAvg:
		switch a.typ.ID {
		case cql.TypeFloat, cql.TypeDouble:
			x := float64(math.Float32frombits(binary.BigEndian.Uint32(pad(v, 4))))
			if a.typ.ID == cql.TypeDouble {
				x = math.Float64frombits(binary.BigEndian.Uint64(pad(v, 8)))
			}
			a.raw += x
			y := x - a.comp
			t := a.f + y
			a.comp = (t - a.f) - y
			a.f = t
		case cql.TypeDecimal:
			if len(v) < 4 {
				return
			}
			scale := int32(binary.BigEndian.Uint32(v))
			u := cqlvalue.DecVarint(v[4:])
			if a.big == nil {
				a.big, a.dec = u, scale
				return
			}
			switch {
			case scale > a.dec:
				a.big = new(big.Int).Mul(a.big, pow10(int64(scale-a.dec)))
				a.dec = scale
			case scale < a.dec:
				u = new(big.Int).Mul(u, pow10(int64(a.dec-scale)))
			}
			a.big = new(big.Int).Add(a.big, u)
		default:
			n := cqlvalue.DecVarint(v)
			if a.big == nil {
				a.big = new(big.Int)
			}
			a.big.Add(a.big, n)
			a.sum += n.Int64()
		}
	}
}

func pad(v []byte, n int) []byte {
	if len(v) >= n {
		return v
	}
	return append(make([]byte, n-len(v)), v...)
}

func pow10(n int64) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(n), nil) }

// result returns the aggregate's value.
func (a *acc) result() []byte {
	switch a.kind {
	case aggCountRows, aggCount:
		return cqlvalue.EncBigint(a.n)
	case aggMin, aggMax:
		return a.best
	}
	switch a.typ.ID {
	case cql.TypeFloat, cql.TypeDouble:
		s := a.f
		if math.IsNaN(s) && math.IsInf(a.raw, 0) {
			s = a.raw
		}
		if a.kind == aggAvg {
			if a.n == 0 {
				s = 0
			} else {
				s /= float64(a.n)
			}
		}
		if a.typ.ID == cql.TypeFloat {
			return binary.BigEndian.AppendUint32(nil, math.Float32bits(float32(s)))
		}
		return cqlvalue.EncDouble(s)
	case cql.TypeDecimal:
		if a.big == nil {
			return append(cqlvalue.EncInt(0), 0)
		}
		u := a.big
		if a.kind == aggAvg {
			u = divHalfEven(u, big.NewInt(a.n))
		}
		return append(cqlvalue.EncInt(a.dec), cqlvalue.EncVarint(u)...)
	case cql.TypeVarint:
		if a.big == nil {
			return []byte{0}
		}
		if a.kind == aggAvg {
			return cqlvalue.EncVarint(new(big.Int).Quo(a.big, big.NewInt(a.n)))
		}
		return cqlvalue.EncVarint(a.big)
	}
	v := a.sum
	if a.kind == aggAvg {
		v = 0
		if a.n > 0 {
			v = new(big.Int).Quo(a.big, big.NewInt(a.n)).Int64()
		}
	}
	switch a.typ.ID {
	case cql.TypeTinyint:
		return []byte{byte(v)}
	case cql.TypeSmallint:
		return binary.BigEndian.AppendUint16(nil, uint16(v))
	case cql.TypeInt:
		return cqlvalue.EncInt(int32(v))
	}
	return cqlvalue.EncBigint(v)
}

// divHalfEven divides, rounding half to even, as BigDecimal.divide with HALF_EVEN.
func divHalfEven(x, y *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(x, y, new(big.Int))
	if r.Sign() == 0 {
		return q
	}
	twice := new(big.Int).Abs(r)
	twice.Lsh(twice, 1)
	c := twice.Cmp(new(big.Int).Abs(y))
	if c > 0 || c == 0 && q.Bit(0) == 1 {
		if x.Sign()*y.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}
