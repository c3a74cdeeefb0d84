package engine

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The compiled terms of a statement and the restrictions of a WHERE clause they make: what
// the compiler (engine_expr.go, where.go) writes, and the plans, the indexes and the
// conditional writes read. They point at nothing else of the engine.

// exprKind says where an expr takes its value.
type exprKind uint8

const (
	exConst exprKind = iota
	exBind
	exColl
	exFunc
	exJSON // a column of INSERT JSON: execCtx.json[idx]
)

// expr is a compiled term: its value is known at compile time, bound at execution, or
// computed (collections with markers inside, now()).
type expr struct {
	kind  exprKind
	b     []byte // constant value; nil is null
	idx   int
	typ   cql.TypeInfo
	col   string
	elems []*expr // collection elements; a map's keys and values alternate
	fn    string
	args  []*expr
}

// colRestr collects the restrictions of a WHERE clause on one column.
type colRestr struct {
	col      *storage.Column
	eq       *expr
	in       []*expr
	inMarker *expr // IN ? bound to a list
	lo, hi   *expr
	loIncl   bool
	hiIncl   bool
	others   []grammar.Relation // operators handled by filtering: !=, CONTAINS...
}

// isEq reports an = or IN restriction.
func (r *colRestr) isEq() bool { return r != nil && (r.eq != nil || r.in != nil || r.inMarker != nil) }

// isRange reports a bound of a range, of either end.
func (r *colRestr) isRange() bool { return r != nil && (r.lo != nil || r.hi != nil) }
