package node

// function is a user-defined function: its DDL and system_schema.functions row. The node
// stores it but cannot run its Java body.
type function struct {
	ks, name     string
	argNames     []string
	argTypes     []ctype
	ret          ctype
	calledOnNull bool
	language     string
	body         string
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
