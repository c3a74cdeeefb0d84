package grammar

import "strings"

func (p dmlParser) using(ttl, ts **Term) {
	if !p.acceptKeyword("using") {
		return
	}
	for {
		switch {
		case p.acceptKeyword("ttl"):
			*ttl = p.value()
		case p.acceptKeyword("timestamp"):
			*ts = p.value()
		case p.acceptKeyword("timeout"):
			p.usingTimeout()
		default:
			p.unexpected()
		}
		if !p.acceptKeyword("and") {
			return
		}
	}
}

func (p dmlParser) insertStmt() Statement {
	p.expectKeyword("into")
	st := &InsertStmt{Table: p.tableName()}
	if p.acceptKeyword("json") {
		switch p.tok.kind {
		case tString:
			st.Json = &Term{Kind: TermConst, Lit: LitString, Text: p.tok.text}
			p.advance()
		case tMarker, tNamedMarker:
			st.Json = p.value()
		default:
			p.unexpected()
		}
		if p.acceptKeyword("default") {
			if !p.acceptKeyword("unset") {
				p.expectKeyword("null")
			} else {
				st.JsonUnset = true
			}
		}
		st.IfNotExists = p.ifNotExists()
		p.using(&st.Ttl, &st.Ts)
		return st
	}
	p.expectPunct("(")
	for {
		st.Cols = append(st.Cols, p.ident())
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(")")
	p.expectKeyword("values")
	p.expectPunct("(")
	for {
		st.Vals = append(st.Vals, p.value())
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(")")
	st.IfNotExists = p.ifNotExists()
	p.using(&st.Ttl, &st.Ts)
	return st
}

func (p dmlParser) updateStmt() Statement {
	st := &UpdateStmt{Table: p.tableName()}
	p.using(&st.Ttl, &st.Ts)
	p.expectKeyword("set")
	for {
		col := p.ident()
		a := assignment{Col: col}
		if p.acceptPunct(".") {
			a.Field = p.identAny()
			p.expectPunct("=")
			a.Val = p.value()
			st.Assigns = append(st.Assigns, a)
			if !p.acceptPunct(",") {
				break
			}
			continue
		}
		if p.acceptPunct("[") {
			a.Op = AssignKey
			a.Key = p.value()
			p.expectPunct("]")
			p.expectPunct("=")
			a.Val = p.value()
		} else {
			p.expectPunct("=")
			if (p.tok.kind == tIdent || p.tok.kind == tQuotedIdent) && p.peek(1).kind == tPunct &&
				(p.peek(1).text == "+" || p.peek(1).text == "-") && p.identMatches(col) {
				p.advance()
				if p.acceptPunct("+") {
					a.Op = AssignAdd
				} else {
					p.expectPunct("-")
					a.Op = AssignSub
				}
				a.Val = p.value()
			} else {
				a.Val = p.value()
				if p.acceptPunct("+") {
					if !p.identMatches(col) {
						p.failf("Only expressions of the form X = <value> + X are supported.")
					}
					p.advance()
					a.Op = AssignPrepend
				}
			}
		}
		st.Assigns = append(st.Assigns, a)
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectKeyword("where")
	st.Where = p.relations()
	if p.isKeyword("if") {
		p.advance()
		if p.acceptKeyword("exists") {
			st.IfExists = true
		} else {
			st.Conds = p.relations()
		}
	}
	return st
}

func (p dmlParser) deleteStmt() Statement {
	st := &DeleteStmt{}
	if !p.isKeyword("from") {
		for {
			d := deleteTarget{Col: p.ident()}
			if p.acceptPunct(".") {
				d.Field = p.identAny()
			} else if p.acceptPunct("[") {
				d.Key = p.value()
				p.expectPunct("]")
			}
			st.Cols = append(st.Cols, d)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectKeyword("from")
	st.Table = p.tableName()
	var ttl *Term
	p.using(&ttl, &st.Ts)
	if ttl != nil {
		p.failf("mismatched input 'TTL' expecting K_TIMESTAMP")
	}
	p.expectKeyword("where")
	st.Where = p.relations()
	if p.isKeyword("if") {
		p.advance()
		if p.acceptKeyword("exists") {
			st.IfExists = true
		} else {
			st.Conds = p.relations()
		}
	}
	return st
}

// relations parses relations joined by AND: a WHERE clause, or the conditions of IF.
func (p dmlParser) relations() []Relation {
	var rs []Relation
	for {
		rs = append(rs, p.relation())
		if !p.acceptKeyword("and") {
			return rs
		}
	}
}

// relation reads one relation of a WHERE or IF: a column, token(columns) or m[k] on the
// left, then a comparison, IN or CONTAINS [KEY] and what it compares with.
func (p dmlParser) relation() Relation {
	var r Relation
	if p.relationLeft(&r) {
		return r
	}
	switch {
	case p.tok.kind == tPunct:
		r.Op = p.comparison()
		r.Val = p.value()
	case p.acceptKeyword("in"):
		r.Op = OpIn
		p.inValues(&r)
	case p.acceptKeyword("contains"):
		r.Op = OpContains
		if p.acceptKeyword("key") {
			r.Op = OpContainsKey
		}
		r.Val = p.value()
	default:
		p.unexpected()
	}
	return r
}

// relationLeft reads the left side of a relation into r: token(columns), a column, or m[k];
// the last is a whole relation, m[k] = v, and relationLeft reports that it read it all.
func (p dmlParser) relationLeft(r *Relation) (whole bool) {
	if p.isKeyword("token") && p.peek(1).kind == tPunct && p.peek(1).text == "(" {
		p.advance()
		p.advance()
		r.Token = true
		for {
			r.Cols = append(r.Cols, p.ident())
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
		return false
	}
	if p.isPunct("(") {
		p.failf("multi-column relations are not supported by the embedded node")
	}
	r.Col = p.ident()
	if !p.acceptPunct("[") {
		return false
	}
	r.Key = p.value()
	p.expectPunct("]")
	p.expectPunct("=")
	r.Op, r.Val = OpMapEq, p.value()
	return true
}

// comparison reads the operator of a comparison: =, <, <=, >, >= or !=.
func (p dmlParser) comparison() RelOp {
	var op RelOp
	switch p.tok.text {
	case "=":
		op = OpEq
	case "<":
		op = OpLt
	case "<=":
		op = OpLe
	case ">":
		op = OpGt
	case ">=":
		op = OpGe
	case "!=":
		op = OpNe
	default:
		p.unexpected()
	}
	p.advance()
	return op
}

// inValues reads what follows IN into r: a parenthesized list of values into r.Vals (empty,
// not nil, for ()), or a marker for the whole list into r.Val.
func (p dmlParser) inValues(r *Relation) {
	if p.acceptPunct("(") {
		r.Vals = []*Term{}
		if !p.acceptPunct(")") {
			for {
				r.Vals = append(r.Vals, p.value())
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
		}
		return
	}
	switch p.tok.kind {
	case tMarker:
		p.advance()
		r.Val = p.marker("")
	case tNamedMarker:
		n := p.tok.text
		p.advance()
		r.Val = p.marker(n)
	default:
		p.unexpected()
	}
}

func (p dmlParser) selectStmt() Statement {
	st := &SelectStmt{}
	if p.acceptKeyword("json") {
		st.Json = true
	}
	if p.isKeyword("distinct") && !(p.peek(1).kind == tIdent && strings.EqualFold(p.peek(1).text, "from")) &&
		!(p.peek(1).kind == tPunct && (p.peek(1).text == "," || p.peek(1).text == "(")) {
		p.advance()
		st.Distinct = true
	}
	if p.acceptPunct("*") {
		st.Star = true
	} else {
		for {
			st.Sels = append(st.Sels, p.selector())
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectKeyword("from")
	st.Table = p.tableName()
	if p.acceptKeyword("where") {
		st.Where = p.relations()
	}
	if p.acceptKeyword("group") {
		p.expectKeyword("by")
		for {
			st.GroupBy = append(st.GroupBy, p.ident())
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.acceptKeyword("order") {
		p.expectKeyword("by")
		for {
			o := ordering{Col: p.ident()}
			if p.acceptKeyword("desc") {
				o.Desc = true
			} else {
				p.acceptKeyword("asc")
			}
			st.OrderBy = append(st.OrderBy, o)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.acceptKeyword("per") {
		p.expectKeyword("partition")
		p.expectKeyword("limit")
		st.PartLimit = p.limitValue()
	}
	if p.acceptKeyword("limit") {
		st.Limit = p.limitValue()
	}
	if p.acceptKeyword("allow") {
		p.expectKeyword("filtering")
		st.AllowFiltering = true
	}
	p.scyllaSelectTail()
	return st
}

// scyllaSelectTail accepts ScyllaDB's extensions at the end of a SELECT, which its drivers
// and tools send: BYPASS CACHE (a hint about the row cache, which the node has not) and
// USING TIMEOUT.
func (p dmlParser) scyllaSelectTail() {
	if p.acceptKeyword("bypass") {
		p.expectKeyword("cache")
	}
	if p.acceptKeyword("using") {
		p.expectKeyword("timeout")
		p.usingTimeout()
	}
}

// usingTimeout reads the duration of ScyllaDB's USING TIMEOUT, which the node accepts
// and does not apply (it answers long before any timeout). Only a literal duration is
// taken, as ScyllaDB's drivers send it (5000ms); a bind marker is refused.
func (p dmlParser) usingTimeout() {
	if p.tok.kind != tDuration {
		p.failf("USING TIMEOUT takes a literal duration such as 5000ms or 2s, got %s", p.quote(p.tok))
	}
	p.advance()
}

func (p dmlParser) selector() Selector {
	s := p.unaliasedSelector(0)
	if p.acceptKeyword("as") {
		s.Alias = p.ident()
	}
	return s
}

// unaliasedSelector reads a selector without its alias: CAST(selector AS type) as the
// selector it casts, with the type added to its casts.
func (p dmlParser) unaliasedSelector(depth int) Selector {
	if p.tok.kind == tIdent && strings.EqualFold(p.tok.text, "system") && p.peek(1).kind == tPunct && p.peek(1).text == "." &&
		p.peek(2).kind == tIdent && p.peek(3).kind == tPunct && p.peek(3).text == "(" {
		// system.fn(...): the native functions, named with their keyspace.
		p.advance()
		p.advance()
	}
	switch {
	case p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "(":
		return p.callSelector(depth)
	case p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "." && p.peek(2).kind == tIdent &&
		p.peek(3).kind == tPunct && p.peek(3).text == "(":
		// ks.f(...): a user-defined function or aggregate.
		var s Selector
		s.Kind, s.FnKs = SelUDF, p.ident()
		p.advance()
		s.Fn = &Term{Kind: TermFunc, Name: strings.ToLower(p.tok.text)}
		p.advance()
		p.advance()
		args := p.udfArgs()
		s.Text = s.FnKs + "." + s.Fn.Name + "(" + strings.Join(args, ", ") + ")"
		return s
	}
	var s Selector
	s.Col = p.ident()
	s.Text = s.Col
	for p.acceptPunct(".") {
		f := p.identAny()
		s.Fields = append(s.Fields, f)
		s.Text += "." + f
	}
	return s
}

// callSelector reads a selector that calls a function named without a keyspace: an
// aggregate, CAST (at nesting depth), toJson, writetime or ttl, token, a user-defined
// function of columns, or a native function of values.
func (p dmlParser) callSelector(depth int) Selector {
	var s Selector
	fn := strings.ToLower(p.tok.text)
	switch fn {
	case "count":
		return p.countSelector()
	case "min", "max", "sum", "avg":
		p.advance()
		p.advance()
		s.Col, s.ArgCasts = p.castArg(0)
		p.expectPunct(")")
		s.Kind, s.Agg, s.Text = SelAgg, fn, "system."+fn+"("+s.Col+")"
	case "cast":
		p.castOpen(depth)
		s = p.unaliasedSelector(depth + 1)
		s.Casts = append(s.Casts, p.castType())
	case "tojson":
		p.advance()
		p.advance()
		s.Col = p.ident()
		p.expectPunct(")")
		s.Kind, s.Text = SelToJSON, "system.tojson("+s.Col+")"
	case "writetime", "ttl":
		p.advance()
		p.advance()
		s.Col = p.ident()
		p.expectPunct(")")
		s.Kind = SelWritetime
		if fn == "ttl" {
			s.Kind = SelTTL
		}
		s.Text = fn + "(" + s.Col + ")"
	case "token":
		p.advance()
		p.advance()
		for {
			s.Cols = append(s.Cols, p.ident())
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
		s.Kind, s.Text = SelToken, "system.token("+strings.Join(s.Cols, ", ")+")"
	default:
		if a := p.peek(2); a.kind == tQuotedIdent || a.kind == tIdent && !literalWord(a.text) && !(p.peek(3).kind == tPunct && p.peek(3).text == "(") {
			// f(col, ...): a user-defined function or aggregate of columns.
			s.Kind, s.Fn = SelUDF, &Term{Kind: TermFunc, Name: fn}
			p.advance()
			p.advance()
			args := p.udfArgs()
			s.Text, s.Cols = fn+"("+strings.Join(args, ", ")+")", args
			break
		}
		s.Kind = SelFunc
		s.Fn = p.value()
		s.Text = "system." + fn + "()"
	}
	return s
}

// countSelector reads count(*), count(1) or count(column); the last is an aggregate of
// the column.
func (p dmlParser) countSelector() Selector {
	p.advance()
	p.advance()
	s := Selector{Kind: SelCount, Text: "count"}
	if !p.acceptPunct("*") {
		if p.tok.kind == tInt && p.tok.text == "1" {
			p.advance()
		} else {
			s.Col = p.ident()
			s.Kind, s.Agg, s.Text = SelAgg, "count", "system.count("+s.Col+")"
		}
	}
	p.expectPunct(")")
	return s
}

// udfArgs reads the columns a user-defined function is called with, after its opening
// parenthesis and up to its closing one.
func (p dmlParser) udfArgs() []string {
	var args []string
	for !p.acceptPunct(")") {
		args = append(args, p.ident())
		if !p.acceptPunct(",") {
			p.expectPunct(")")
			break
		}
	}
	return args
}

// castArg reads an aggregate's argument: a column, or CAST(… AS type) of one, nested as
// deep as written: the column and the types, innermost first.
func (p dmlParser) castArg(depth int) (string, []string) {
	if !(p.tok.kind == tIdent && strings.EqualFold(p.tok.text, "cast") && p.peek(1).kind == tPunct && p.peek(1).text == "(") {
		return p.ident(), nil
	}
	p.castOpen(depth)
	col, casts := p.castArg(depth + 1)
	return col, append(casts, p.castType())
}

// castOpen reads the "CAST(" of a cast at nesting depth, which is bounded.
func (p dmlParser) castOpen(depth int) {
	if depth > MaxNesting {
		p.failf("CAST nesting too deep")
	}
	p.advance()
	p.advance()
}

// castType reads the "AS type)" that ends a cast, and returns the type.
func (p dmlParser) castType() string {
	p.expectKeyword("as")
	to := strings.ToLower(p.tok.text)
	if _, ok := SimpleTypes[to]; !ok || p.tok.kind != tIdent {
		p.unexpected()
	}
	p.advance()
	p.expectPunct(")")
	return to
}

func (p dmlParser) batchStmt() Statement {
	st := &BatchStmt{}
	switch {
	case p.acceptKeyword("unlogged"):
		st.typ = 1
	case p.acceptKeyword("counter"):
		st.typ = 2
	case p.acceptKeyword("logged"):
	}
	p.expectKeyword("batch")
	var ttl *Term
	p.using(&ttl, &st.Ts)
	if ttl != nil {
		p.failf("mismatched input 'TTL' expecting K_TIMESTAMP")
	}
	for {
		p.acceptPunct(";")
		if p.isKeyword("apply") {
			p.advance()
			p.expectKeyword("batch")
			return st
		}
		if p.tok.kind != tIdent {
			p.unexpected()
		}
		switch strings.ToLower(p.tok.text) {
		case "insert":
			p.advance()
			st.Stmts = append(st.Stmts, p.insertStmt())
		case "update":
			p.advance()
			st.Stmts = append(st.Stmts, p.updateStmt())
		case "delete":
			p.advance()
			st.Stmts = append(st.Stmts, p.deleteStmt())
		default:
			p.failf("no viable alternative at input %s", p.quote(p.tok))
		}
	}
}
