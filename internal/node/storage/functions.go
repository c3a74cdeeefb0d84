package storage

import (
	"strings"

	"github.com/tracecar/tracecar/internal/node/grammar"
)

// The user-defined functions and aggregates of a keyspace (schema.go).

// function is a user-defined function. It is immutable once published.
type Function struct {
	Ks, Name     string
	ArgNames     []string
	ArgRefs      []*grammar.TypeRef
	ArgTypes     []Ctype
	RetRef       *grammar.TypeRef
	Ret          Ctype
	CalledOnNull bool
	Language     string
	Body         string
}

// aggregate is a user-defined aggregate. It is immutable once published.
type Aggregate struct {
	Ks, Name  string
	ArgRefs   []*grammar.TypeRef
	ArgTypes  []Ctype
	StateFunc string
	StateType Ctype
	FinalFunc string
	Ret       Ctype
	InitCond  string // the CQL literal; "" for none
}

func (f *Function) Signature() string { return Signature(f.Name, f.ArgTypes) }

func (a *Aggregate) Signature() string { return Signature(a.Name, a.ArgTypes) }

// signature is a function's key among its overloads: name(type, ...).
func Signature(name string, args []Ctype) string {
	return name + "(" + strings.Join(TypeTexts(args), ", ") + ")"
}

func TypeTexts(ts []Ctype) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Text
	}
	return out
}
