package node

import (
	"unsafe"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// maxTTL is Cassandra's limit, 20 years.
const maxTTL = 20 * 365 * 24 * 60 * 60

const (
	condNone uint8 = iota
	condNotExists
	condExists
	condIf // IF col = value ...
)

// condVal is an evaluated condition, checked under the partition lock.
type condVal struct {
	col  *column
	op   grammar.RelOp
	v    []byte
	list [][]byte
}

func (cv *condVal) holds(v []byte) bool {
	typ := cv.col.typ
	switch cv.op {
	case grammar.OpEq:
		return v == nil && cv.v == nil || v != nil && cv.v != nil && cqlvalue.CompareValues(typ, v, cv.v) == 0
	case grammar.OpNe:
		return !(v == nil && cv.v == nil || v != nil && cv.v != nil && cqlvalue.CompareValues(typ, v, cv.v) == 0)
	case grammar.OpIn:
		for _, w := range cv.list {
			if v == nil && w == nil || v != nil && w != nil && cqlvalue.CompareValues(typ, v, w) == 0 {
				return true
			}
		}
		return false
	}
	if v == nil || cv.v == nil {
		return false
	}
	c := cqlvalue.CompareValues(typ, v, cv.v)
	switch cv.op {
	case grammar.OpLt:
		return c < 0
	case grammar.OpLe:
		return c <= 0
	case grammar.OpGt:
		return c > 0
	}
	return c >= 0
}

// unsafeString views b as a string; b must never change afterwards.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
