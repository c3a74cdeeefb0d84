package storage

import (
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// maxTTL is Cassandra's limit, 20 years.
const MaxTTL = 20 * 365 * 24 * 60 * 60

const (
	CondNone uint8 = iota
	CondNotExists
	CondExists
	CondIf // IF col = value ...
)

// condVal is an evaluated condition, checked under the partition lock.
type CondVal struct {
	Col  *Column
	Op   grammar.RelOp
	V    []byte
	List [][]byte
}

func (cv *CondVal) holds(v []byte) bool {
	typ := cv.Col.Typ
	switch cv.Op {
	case grammar.OpEq:
		return v == nil && cv.V == nil || v != nil && cv.V != nil && cqlvalue.CompareValues(typ, v, cv.V) == 0
	case grammar.OpNe:
		return !(v == nil && cv.V == nil || v != nil && cv.V != nil && cqlvalue.CompareValues(typ, v, cv.V) == 0)
	case grammar.OpIn:
		for _, w := range cv.List {
			if v == nil && w == nil || v != nil && w != nil && cqlvalue.CompareValues(typ, v, w) == 0 {
				return true
			}
		}
		return false
	}
	if v == nil || cv.V == nil {
		return false
	}
	c := cqlvalue.CompareValues(typ, v, cv.V)
	switch cv.Op {
	case grammar.OpLt:
		return c < 0
	case grammar.OpLe:
		return c <= 0
	case grammar.OpGt:
		return c > 0
	}
	return c >= 0
}
