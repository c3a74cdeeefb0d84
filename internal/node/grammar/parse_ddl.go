package grammar

import (
	"strconv"
	"strings"
)

// The parsing of ALTER and of the schema statements beyond keyspaces and tables.

func (p ddlParser) alterStmt() Statement {
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
		return authParser{p.parser}.roleStatement(RoleAlter)
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
func (p ddlParser) unsupported(verb string) Statement {
	what := verb
	if p.tok.kind == tIdent {
		what += " " + upper(p.tok.text)
	}
	p.skipRest()
	return &UnsupportedStmt{What: what + " is not supported by the embedded node"}
}

// alterTable reads ALTER TABLE, after the verb: ADD, DROP or RENAME of columns, WITH
// options, DROP COMPACT STORAGE, or ALTER of a column's type.
func (p ddlParser) alterTable() Statement {
	st := &AlterTableStmt{}
	st.IfExists = p.ifExists()
	st.Table = p.tableName()
	switch {
	case p.acceptKeyword("add"):
		st.Op = AlterAdd
		st.IfColumn = p.ifNotExists()
		p.addedColumns(st)
	case p.acceptKeyword("drop"):
		if p.acceptKeyword("compact") {
			p.expectKeyword("storage")
			st.Op = AlterDropCompact
			return st
		}
		st.Op = AlterDrop
		st.IfColumn = p.ifExists()
		p.droppedColumns(st)
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

// addedColumns reads the columns of ALTER TABLE ADD into st: one, or a parenthesized list,
// each a name, a type and maybe STATIC.
func (p ddlParser) addedColumns(st *AlterTableStmt) {
	column := func() {
		c := ColDef{Name: p.ident()}
		c.Ref = p.typ(0)
		c.Static = p.acceptKeyword("static")
		st.Add = append(st.Add, c)
	}
	if !p.acceptPunct("(") {
		column()
		return
	}
	for {
		column()
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(")")
}

// droppedColumns reads the columns of ALTER TABLE DROP into st, one or a parenthesized
// list, then USING TIMESTAMP t if given.
func (p ddlParser) droppedColumns(st *AlterTableStmt) {
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
	if !p.acceptKeyword("using") {
		return
	}
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

func (p ddlParser) alterType() Statement {
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
func (p ddlParser) createIndex() Statement {
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
func (p ddlParser) createFunction() Statement {
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

func (p ddlParser) createStmt() Statement {
	switch {
	case p.acceptKeyword("keyspace"), p.acceptKeyword("schema"):
		st := &CreateKeyspaceStmt{}
		st.IfNotExists = p.ifNotExists()
		st.Name = p.ident()
		p.expectKeyword("with")
		st.Opts = p.keyspaceOptions()
		return st
	case p.acceptKeyword("table"), p.acceptKeyword("columnfamily"):
		return p.createTable()
	case p.acceptKeyword("type"):
		st := &CreateTypeStmt{}
		st.IfNotExists = p.ifNotExists()
		st.Name = p.tableName()
		p.expectPunct("(")
		for {
			f := ColDef{Name: p.identAny()}
			f.Ref = p.typ(0)
			st.Fields = append(st.Fields, f)
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
		return st
	case p.isKeyword("index"), p.isKeyword("custom"):
		return p.createIndex()
	case p.acceptKeyword("materialized"):
		p.expectKeyword("view")
		return p.createView()
	case p.isKeyword("function"), p.isKeyword("aggregate"), p.isKeyword("or"):
		return p.createFunction()
	case p.isKeyword("role"), p.isKeyword("user"):
		return authParser{p.parser}.roleStatement(RoleCreate)
	case p.isKeyword("trigger"):
		what := strings.ToUpper(p.tok.text)
		p.skipRest()
		return &UnsupportedStmt{What: "CREATE " + what + " is not supported by the embedded node"}
	}
	p.unexpected()
	return nil
}

func (p ddlParser) dropStmt() Statement {
	switch {
	case p.acceptKeyword("keyspace"), p.acceptKeyword("schema"):
		st := &DropKeyspaceStmt{}
		st.IfExists = p.ifExists()
		st.Name = p.ident()
		return st
	case p.acceptKeyword("table"), p.acceptKeyword("columnfamily"):
		st := &DropTableStmt{}
		st.IfExists = p.ifExists()
		st.Table = p.tableName()
		return st
	case p.acceptKeyword("type"):
		st := &DropTypeStmt{}
		st.IfExists = p.ifExists()
		st.Name = p.tableName()
		return st
	case p.isKeyword("function"), p.isKeyword("aggregate"):
		st := &DropFunctionStmt{Aggregate: p.isKeyword("aggregate")}
		p.advance()
		st.IfExists = p.ifExists()
		st.Name = p.tableName()
		if p.acceptPunct("(") {
			st.HasArgs = true
			if !p.acceptPunct(")") {
				for {
					st.Args = append(st.Args, p.typ(0))
					if !p.acceptPunct(",") {
						break
					}
				}
				p.expectPunct(")")
			}
		}
		return st
	case p.isKeyword("role"), p.isKeyword("user"):
		return authParser{p.parser}.roleStatement(roleDrop)
	case p.acceptKeyword("index"):
		st := &DropIndexStmt{}
		st.IfExists = p.ifExists()
		st.Name = p.tableName()
		return st
	case p.acceptKeyword("materialized"):
		p.expectKeyword("view")
		st := &ViewStmt{}
		st.IfExists = p.ifExists()
		st.Name = p.tableName()
		return st
	case p.tok.kind == tIdent:
		what := strings.ToUpper(p.tok.text)
		p.skipRest()
		return &UnsupportedStmt{What: "DROP " + what + " is not supported by the embedded node"}
	}
	p.unexpected()
	return nil
}

// keyspaceOptions reads the options of CREATE and ALTER KEYSPACE.
func (p ddlParser) keyspaceOptions() keyspaceOpts {
	var o keyspaceOpts
	for {
		opt := p.identAny()
		p.expectPunct("=")
		v := p.option()
		switch opt {
		case "replication":
			if v.M == nil {
				p.failPlain("Invalid value for property 'replication'. It should be a map.")
			}
			o.Replication = v.M
		case "durable_writes":
			b := strings.EqualFold(v.Text, "true")
			if !b && !strings.EqualFold(v.Text, "false") {
				p.failPlain("Invalid boolean value %s for 'durable_writes' property", v.Text)
			}
			o.DurableWrites = &b
		default:
			p.failPlain("Unknown property '%s'", opt)
		}
		if !p.acceptKeyword("and") {
			return o
		}
	}
}

func (p ddlParser) createTable() Statement {
	st := &CreateTableStmt{Options: map[string]OptValue{}}
	st.IfNotExists = p.ifNotExists()
	st.Table = p.tableName()
	p.expectPunct("(")
	for {
		if p.isKeyword("primary") {
			p.advance()
			p.expectKeyword("key")
			if st.Pk != nil {
				p.failf("Multiple PRIMARY KEYs specified (exactly one required)")
			}
			st.Pk, st.Ck = p.primaryKey()
		} else {
			c := ColDef{Name: p.ident()}
			c.Ref = p.typ(0)
			if p.acceptKeyword("static") {
				c.Static = true
			}
			if p.isKeyword("primary") {
				p.advance()
				p.expectKeyword("key")
				if st.Pk != nil {
					p.failf("Multiple PRIMARY KEYs specified (exactly one required)")
				}
				st.Pk = []string{c.Name}
			}
			st.Cols = append(st.Cols, c)
		}
		if !p.acceptPunct(",") {
			break
		}
		if p.isPunct(")") {
			break
		}
	}
	p.expectPunct(")")
	if p.acceptKeyword("with") {
		for {
			switch {
			case p.isKeyword("clustering"):
				st.Order = p.clusteringOrder()
			case p.isKeyword("compact"):
				p.advance()
				p.expectKeyword("storage")
				st.Compact = true
			default:
				name := p.identAny()
				p.expectPunct("=")
				st.Options[name] = p.option()
			}
			if !p.acceptKeyword("and") {
				break
			}
		}
	}
	return st
}

// primaryKey reads (a, b), ((a, b), c) or (a, c, d): the partition key and clustering
// columns. The opening parenthesis is the current token.
func (p ddlParser) primaryKey() (pk, ck []string) {
	p.expectPunct("(")
	if p.acceptPunct("(") {
		for {
			pk = append(pk, p.ident())
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
	} else {
		pk = []string{p.ident()}
	}
	for p.acceptPunct(",") {
		ck = append(ck, p.ident())
	}
	p.expectPunct(")")
	return pk, ck
}

// clusteringOrder reads CLUSTERING ORDER BY (c [ASC|DESC], ...).
func (p ddlParser) clusteringOrder() []ordering {
	p.expectKeyword("clustering")
	p.expectKeyword("order")
	p.expectKeyword("by")
	p.expectPunct("(")
	var out []ordering
	for {
		o := ordering{Col: p.ident()}
		if p.acceptKeyword("desc") {
			o.Desc = true
		} else {
			p.acceptKeyword("asc")
		}
		out = append(out, o)
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(")")
	return out
}

// createView reads the rest of CREATE MATERIALIZED VIEW [IF NOT EXISTS] v AS SELECT ...
// FROM t WHERE ... PRIMARY KEY (...) [WITH ...].
func (p ddlParser) createView() Statement {
	st := &CreateViewStmt{Options: map[string]OptValue{}}
	st.IfNotExists = p.ifNotExists()
	st.Name = p.tableName()
	p.expectKeyword("as")
	p.expectKeyword("select")
	if p.acceptPunct("*") {
		st.Star = true
	} else {
		for {
			c := p.ident()
			if p.acceptKeyword("as") {
				st.Aliased = c + " AS " + p.ident()
			}
			st.Cols = append(st.Cols, c)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectKeyword("from")
	st.Base = p.tableName()
	if p.acceptKeyword("where") {
		for {
			if p.tok.kind == tIdent || p.tok.kind == tQuotedIdent {
				if n := p.peek(1); n.kind == tIdent && strings.EqualFold(n.text, "is") {
					c := p.ident()
					p.expectKeyword("is")
					p.expectKeyword("not")
					p.expectKeyword("null")
					st.NotNull = append(st.NotNull, c)
					if !p.acceptKeyword("and") {
						break
					}
					continue
				}
			}
			r := dmlParser{p.parser}.relation()
			st.Others = append(st.Others, r.Col)
			if !p.acceptKeyword("and") {
				break
			}
		}
	}
	p.expectKeyword("primary")
	p.expectKeyword("key")
	st.Pk, st.Ck = p.primaryKey()
	if p.acceptKeyword("with") {
		for {
			if p.isKeyword("clustering") {
				st.Order = p.clusteringOrder()
			} else {
				name := p.identAny()
				p.expectPunct("=")
				st.Options[name] = p.option()
			}
			if !p.acceptKeyword("and") {
				break
			}
		}
	}
	return st
}
