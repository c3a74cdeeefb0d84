package node

import "strings"

// function is a user-defined function: its DDL and system_schema.functions row. The node
// stores it but cannot run its Java body.
type function struct {
	ks, name     string
	argNames     []string
	argRefs      []*typeRef
	argTypes     []ctype
	retRef       *typeRef
	ret          ctype
	calledOnNull bool
	language     string
	body         string
}

// signature is the function's key among its overloads: name(type, ...).
func (f *function) signature() string {
	parts := make([]string, len(f.argTypes))
	for i, a := range f.argTypes {
		parts[i] = a.text
	}
	return f.name + "(" + strings.Join(parts, ",") + ")"
}

// aggregate is a user-defined aggregate: its DDL and system_schema.aggregates row.
type aggregate struct {
	ks, name  string
	argTypes  []ctype
	stateFunc string
	stateType ctype
	finalFunc string
	ret       ctype
	initCond  string // the CQL literal, or "" for none
	hasInit   bool
}
