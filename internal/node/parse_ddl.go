package node

import (
	"strconv"
	"strings"
)

// The parsing of ALTER and of the schema statements beyond keyspaces and tables.

func (p *parser) alterStmt() statement {
	switch {
	case p.acceptKeyword("keyspace"), p.acceptKeyword("schema"):
		st := &alterKeyspaceStmt{}
		st.ifExists = p.ifExists()
		st.name = p.ident()
		p.expectKeyword("with")
		st.opts = p.keyspaceOptions()
		return st
	case p.acceptKeyword("table"), p.acceptKeyword("columnfamily"):
		return p.alterTable()
	case p.acceptKeyword("type"):
		return p.alterType()
	case p.isKeyword("role"), p.isKeyword("user"):
		return p.roleStatement(roleAlter)
	case p.acceptKeyword("materialized"):
		p.expectKeyword("view")
		st := &viewStmt{alter: true, opts: map[string]optValue{}}
		st.ifExists = p.ifExists()
		st.name = p.tableName()
		p.expectKeyword("with")
		for {
			name := p.identAny()
			p.expectPunct("=")
			st.opts[name] = p.option()
			if !p.acceptKeyword("and") {
				break
			}
		}
		return st
	}
	return p.unsupported("ALTER")
}

// unsupported consumes the statement and returns its refusal, naming it by its first words.
func (p *parser) unsupported(verb string) statement {
	what := verb
	if p.tok.kind == tIdent {
		what += " " + upper(p.tok.text)
	}
	p.skipRest()
	return &unsupportedStmt{what: what + " is not supported by the embedded node"}
}

func (p *parser) alterTable() statement {
	st := &alterTableStmt{}
	st.ifExists = p.ifExists()
	st.table = p.tableName()
	switch {
	case p.acceptKeyword("add"):
		st.op = alterAdd
		st.ifColumn = p.ifNotExists()
		column := func() {
			c := colDef{name: p.ident()}
			c.ref = p.typ(0)
			c.static = p.acceptKeyword("static")
			st.add = append(st.add, c)
		}
		if p.acceptPunct("(") {
			for {
				column()
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
		} else {
			column()
		}
	case p.acceptKeyword("drop"):
		if p.acceptKeyword("compact") {
			p.expectKeyword("storage")
			st.op = alterDropCompact
			return st
		}
		st.op = alterDrop
		st.ifColumn = p.ifExists()
		if p.acceptPunct("(") {
			for {
				st.drop = append(st.drop, p.ident())
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
		} else {
			st.drop = []string{p.ident()}
		}
		if p.acceptKeyword("using") {
			p.expectKeyword("timestamp")
			if p.tok.kind != tInt {
				p.unexpected()
			}
			v, err := strconv.ParseInt(p.tok.text, 10, 64)
			if err != nil {
				p.failf("Invalid timestamp %s", p.tok.text)
			}
			p.advance()
			st.ts = &v
		}
	case p.acceptKeyword("rename"):
		st.op = alterRename
		st.ifColumn = p.ifExists()
		for {
			from := p.ident()
			p.expectKeyword("to")
			st.renames = append(st.renames, rename{from: from, to: p.ident()})
			if !p.acceptKeyword("and") {
				break
			}
		}
	case p.acceptKeyword("with"):
		st.op = alterOptions
		st.opts = map[string]optValue{}
		for {
			name := p.identAny()
			p.expectPunct("=")
			st.opts[name] = p.option()
			if !p.acceptKeyword("and") {
				break
			}
		}
	case p.acceptKeyword("alter"):
		p.ident()
		p.expectKeyword("type")
		p.typ(0)
		st.op = alterType
	default:
		p.unexpected()
	}
	return st
}

func (p *parser) alterType() statement {
	st := &alterTypeStmt{}
	st.ifExists = p.ifExists()
	st.name = p.tableName()
	switch {
	case p.acceptKeyword("add"):
		st.op = alterAdd
		st.ifField = p.ifNotExists()
		st.add = colDef{name: p.identAny()}
		st.add.ref = p.typ(0)
	case p.acceptKeyword("rename"):
		st.op = alterRename
		st.ifField = p.ifExists()
		for {
			from := p.identAny()
			p.expectKeyword("to")
			st.renames = append(st.renames, rename{from: from, to: p.identAny()})
			if !p.acceptKeyword("and") {
				break
			}
		}
	case p.acceptKeyword("alter"):
		p.identAny()
		p.expectKeyword("type")
		p.typ(0)
		st.op = alterType
	default:
		p.unexpected()
	}
	return st
}

// createIndex reads CREATE [CUSTOM] INDEX [IF NOT EXISTS] [name] ON table (target)
// [USING 'class' [WITH OPTIONS = {...}]].
func (p *parser) createIndex() statement {
	st := &createIndexStmt{}
	st.custom = p.acceptKeyword("custom")
	p.expectKeyword("index")
	st.ifNotExists = p.ifNotExists()
	if !p.isKeyword("on") {
		n := p.tableName()
		st.ks, st.name = n.ks, n.name
	}
	p.expectKeyword("on")
	st.table = p.tableName()
	if st.table.ks == "" {
		st.table.ks = st.ks
	}
	p.expectPunct("(")
	if !p.isPunct(")") {
		kinds := map[string]indexKind{"values": indexValues, "keys": indexKeys, "entries": indexEntries, "full": indexFull}
		if k, ok := kinds[strings.ToLower(p.tok.text)]; ok && p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "(" {
			p.advance()
			p.advance()
			st.kind = k
			st.col = p.ident()
			p.expectPunct(")")
		} else {
			st.col = p.ident()
		}
	}
	p.expectPunct(")")
	if p.acceptKeyword("using") {
		if p.tok.kind != tString {
			p.unexpected()
		}
		st.class = p.tok.text
		p.advance()
		if p.acceptKeyword("with") {
			p.expectKeyword("options")
			p.expectPunct("=")
			p.stringMap()
		}
	}
	if st.custom && st.class == "" {
		p.failf("mismatched input %s expecting K_USING", p.quote(p.tok))
	}
	return st
}

// createFunction reads CREATE [OR REPLACE] FUNCTION and CREATE [OR REPLACE] AGGREGATE.
func (p *parser) createFunction() statement {
	orReplace := false
	if p.acceptKeyword("or") {
		p.expectKeyword("replace")
		orReplace = true
	}
	if p.acceptKeyword("aggregate") {
		st := &createAggregateStmt{orReplace: orReplace}
		st.ifNotExists = p.ifNotExists()
		st.name = p.tableName()
		p.expectPunct("(")
		if !p.acceptPunct(")") {
			for {
				st.argTypes = append(st.argTypes, p.typ(0))
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
		}
		p.expectKeyword("sfunc")
		st.stateFunc = p.ident()
		p.expectKeyword("stype")
		st.stateType = p.typ(0)
		if p.acceptKeyword("finalfunc") {
			st.finalFunc = p.ident()
		}
		if p.acceptKeyword("initcond") {
			st.initCond = p.value()
		}
		if orReplace && st.ifNotExists {
			p.failPlain("Cannot use both 'OR REPLACE' and 'IF NOT EXISTS' directives")
		}
		return st
	}
	p.expectKeyword("function")
	st := &createFunctionStmt{orReplace: orReplace}
	st.ifNotExists = p.ifNotExists()
	st.name = p.tableName()
	p.expectPunct("(")
	if !p.acceptPunct(")") {
		for {
			st.argNames = append(st.argNames, p.identAny())
			st.argTypes = append(st.argTypes, p.typ(0))
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
	}
	switch {
	case p.acceptKeyword("called"):
		st.calledOnNull = true
	case p.acceptKeyword("returns"):
		p.expectKeyword("null")
	default:
		p.unexpected()
	}
	p.expectKeyword("on")
	p.expectKeyword("null")
	p.expectKeyword("input")
	p.expectKeyword("returns")
	st.ret = p.typ(0)
	p.expectKeyword("language")
	st.language = strings.ToLower(p.identAny())
	p.expectKeyword("as")
	if p.tok.kind != tString {
		p.unexpected()
	}
	st.body = p.tok.text
	p.advance()
	if orReplace && st.ifNotExists {
		p.failPlain("Cannot use both 'OR REPLACE' and 'IF NOT EXISTS' directives")
	}
	return st
}
