package grammar

import (
	"strconv"
	"strings"
)

// The parsing of ALTER and of the schema statements beyond keyspaces and tables.

func (p *parser) alterStmt() Statement {
	switch {
	case p.acceptKeyword("keyspace"), p.acceptKeyword("schema"):
		st := &AlterKeyspaceStmt{}
		st.IfExists = p.ifExists()
		st.Name = p.ident()
		p.expectKeyword("with")
		st.Opts = p.keyspaceOptions()
		return st
	case p.acceptKeyword("table"), p.acceptKeyword("columnfamily"):
		return p.alterTable()
	case p.acceptKeyword("type"):
		return p.alterType()
	case p.isKeyword("role"), p.isKeyword("user"):
		return p.roleStatement(RoleAlter)
	case p.acceptKeyword("materialized"):
		p.expectKeyword("view")
		st := &ViewStmt{Alter: true, Opts: map[string]OptValue{}}
		st.IfExists = p.ifExists()
		st.Name = p.tableName()
		p.expectKeyword("with")
		for {
			name := p.identAny()
			p.expectPunct("=")
			st.Opts[name] = p.option()
			if !p.acceptKeyword("and") {
				break
			}
		}
		return st
	}
	return p.unsupported("ALTER")
}

// unsupported consumes the statement and returns its refusal, naming it by its first words.
func (p *parser) unsupported(verb string) Statement {
	what := verb
	if p.tok.kind == tIdent {
		what += " " + upper(p.tok.text)
	}
	p.skipRest()
	return &UnsupportedStmt{What: what + " is not supported by the embedded node"}
}

func (p *parser) alterTable() Statement {
	st := &AlterTableStmt{}
	st.IfExists = p.ifExists()
	st.Table = p.tableName()
	switch {
	case p.acceptKeyword("add"):
		st.Op = AlterAdd
		st.IfColumn = p.ifNotExists()
		column := func() {
			c := ColDef{Name: p.ident()}
			c.Ref = p.typ(0)
			c.Static = p.acceptKeyword("static")
			st.Add = append(st.Add, c)
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
			st.Op = AlterDropCompact
			return st
		}
		st.Op = AlterDrop
		st.IfColumn = p.ifExists()
		if p.acceptPunct("(") {
			for {
				st.Drop = append(st.Drop, p.ident())
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
		} else {
			st.Drop = []string{p.ident()}
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
			st.Ts = &v
		}
	case p.acceptKeyword("rename"):
		st.Op = AlterRename
		st.IfColumn = p.ifExists()
		for {
			from := p.ident()
			p.expectKeyword("to")
			st.Renames = append(st.Renames, rename{From: from, To: p.ident()})
			if !p.acceptKeyword("and") {
				break
			}
		}
	case p.acceptKeyword("with"):
		st.Op = AlterOptions
		st.Opts = map[string]OptValue{}
		for {
			name := p.identAny()
			p.expectPunct("=")
			st.Opts[name] = p.option()
			if !p.acceptKeyword("and") {
				break
			}
		}
	case p.acceptKeyword("alter"):
		p.ident()
		p.expectKeyword("type")
		p.typ(0)
		st.Op = AlterType
	default:
		p.unexpected()
	}
	return st
}

func (p *parser) alterType() Statement {
	st := &AlterTypeStmt{}
	st.IfExists = p.ifExists()
	st.Name = p.tableName()
	switch {
	case p.acceptKeyword("add"):
		st.Op = AlterAdd
		st.IfField = p.ifNotExists()
		st.Add = ColDef{Name: p.identAny()}
		st.Add.Ref = p.typ(0)
	case p.acceptKeyword("rename"):
		st.Op = AlterRename
		st.IfField = p.ifExists()
		for {
			from := p.identAny()
			p.expectKeyword("to")
			st.Renames = append(st.Renames, rename{From: from, To: p.identAny()})
			if !p.acceptKeyword("and") {
				break
			}
		}
	case p.acceptKeyword("alter"):
		p.identAny()
		p.expectKeyword("type")
		p.typ(0)
		st.Op = AlterType
	default:
		p.unexpected()
	}
	return st
}

// createIndex reads CREATE [CUSTOM] INDEX [IF NOT EXISTS] [name] ON table (target)
// [USING 'class' [WITH OPTIONS = {...}]].
func (p *parser) createIndex() Statement {
	st := &CreateIndexStmt{}
	st.Custom = p.acceptKeyword("custom")
	p.expectKeyword("index")
	st.IfNotExists = p.ifNotExists()
	if !p.isKeyword("on") {
		n := p.tableName()
		st.Ks, st.Name = n.Ks, n.Name
	}
	p.expectKeyword("on")
	st.Table = p.tableName()
	if st.Table.Ks == "" {
		st.Table.Ks = st.Ks
	}
	p.expectPunct("(")
	if !p.isPunct(")") {
		kinds := map[string]IndexKind{"values": IndexValues, "keys": IndexKeys, "entries": IndexEntries, "full": IndexFull}
		if k, ok := kinds[strings.ToLower(p.tok.text)]; ok && p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "(" {
			p.advance()
			p.advance()
			st.Kind = k
			st.Col = p.ident()
			p.expectPunct(")")
		} else {
			st.Col = p.ident()
		}
	}
	p.expectPunct(")")
	if p.acceptKeyword("using") {
		if p.tok.kind != tString {
			p.unexpected()
		}
		st.Class = p.tok.text
		p.advance()
		if p.acceptKeyword("with") {
			p.expectKeyword("options")
			p.expectPunct("=")
			p.stringMap()
		}
	}
	if st.Custom && st.Class == "" {
		p.failf("mismatched input %s expecting K_USING", p.quote(p.tok))
	}
	return st
}

// createFunction reads CREATE [OR REPLACE] FUNCTION and CREATE [OR REPLACE] AGGREGATE.
func (p *parser) createFunction() Statement {
	orReplace := false
	if p.acceptKeyword("or") {
		p.expectKeyword("replace")
		orReplace = true
	}
	if p.acceptKeyword("aggregate") {
		st := &CreateAggregateStmt{OrReplace: orReplace}
		st.IfNotExists = p.ifNotExists()
		st.Name = p.tableName()
		p.expectPunct("(")
		if !p.acceptPunct(")") {
			for {
				st.ArgTypes = append(st.ArgTypes, p.typ(0))
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
		}
		p.expectKeyword("sfunc")
		st.StateFunc = p.ident()
		p.expectKeyword("stype")
		st.StateType = p.typ(0)
		if p.acceptKeyword("finalfunc") {
			st.FinalFunc = p.ident()
		}
		if p.acceptKeyword("initcond") {
			st.InitCond = p.value()
		}
		if orReplace && st.IfNotExists {
			p.failPlain("Cannot use both 'OR REPLACE' and 'IF NOT EXISTS' directives")
		}
		return st
	}
	p.expectKeyword("function")
	st := &CreateFunctionStmt{OrReplace: orReplace}
	st.IfNotExists = p.ifNotExists()
	st.Name = p.tableName()
	p.expectPunct("(")
	if !p.acceptPunct(")") {
		for {
			st.ArgNames = append(st.ArgNames, p.identAny())
			st.ArgTypes = append(st.ArgTypes, p.typ(0))
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
	}
	switch {
	case p.acceptKeyword("called"):
		st.CalledOnNull = true
	case p.acceptKeyword("returns"):
		p.expectKeyword("null")
	default:
		p.unexpected()
	}
	p.expectKeyword("on")
	p.expectKeyword("null")
	p.expectKeyword("input")
	p.expectKeyword("returns")
	st.Ret = p.typ(0)
	p.expectKeyword("language")
	st.Language = strings.ToLower(p.identAny())
	p.expectKeyword("as")
	if p.tok.kind != tString {
		p.unexpected()
	}
	st.Body = p.tok.text
	p.advance()
	if orReplace && st.IfNotExists {
		p.failPlain("Cannot use both 'OR REPLACE' and 'IF NOT EXISTS' directives")
	}
	return st
}
