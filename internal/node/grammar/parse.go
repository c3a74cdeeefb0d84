package grammar

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// maxNesting bounds the recursion of nested collection literals and types.
const MaxNesting = 64

type parser struct {
	lex     lexer
	tok     token
	peeked  []token
	markers []string
	depth   int
}

// syntaxError is the parser's panic-free failure value.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

// parse parses one statement. The returned error is a *cql.Error of code Syntax.
func Parse(query string) (ps *ParsedStmt, err error) {
	p := &parser{lex: lexer{src: query}}
	p.advance()
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*syntaxError)
			if !ok {
				panic(r)
			}
			ps, err = nil, &cql.Error{Code: cql.ErrCodeSyntax, Message: se.msg}
		}
	}()
	st := p.statement()
	p.acceptPunct(";")
	if p.tok.kind == tBad {
		p.unexpected()
	}
	if p.tok.kind != tEOF {
		p.failf("extraneous input %s expecting EOF", p.quote(p.tok))
	}
	return &ParsedStmt{Stmt: st, Markers: p.markers}, nil
}

func (p *parser) advance() {
	if len(p.peeked) > 0 {
		p.tok = p.peeked[0]
		p.peeked = p.peeked[1:]
		return
	}
	p.tok = p.lex.next()
}

// peek returns the token n positions after the current one (n ≥ 1).
func (p *parser) peek(n int) token {
	for len(p.peeked) < n {
		p.peeked = append(p.peeked, p.lex.next())
	}
	return p.peeked[n-1]
}

func (p *parser) quote(t token) string {
	if t.kind == tEOF {
		return "<EOF>"
	}
	switch t.kind {
	case tString:
		return "'''" + t.text + "''"
	case tQuotedIdent:
		return "'\"" + t.text + "\"'"
	case tNamedMarker:
		return "':" + t.text + "'"
	}
	return "'" + t.text + "'"
}

func (p *parser) failf(format string, args ...any) {
	msg := fmt.Sprintf("line %d:%d %s", p.tok.line, p.tok.col, fmt.Sprintf(format, args...))
	panic(&syntaxError{msg: msg})
}

// failPlain fails with a message that, like Cassandra's checks after parsing, carries no
// position.
func (p *parser) failPlain(format string, args ...any) {
	panic(&syntaxError{msg: fmt.Sprintf(format, args...)})
}

func (p *parser) unexpected() {
	if p.tok.kind == tEOF {
		p.failf("mismatched input '<EOF>' expecting an identifier or keyword")
	}
	if p.tok.kind == tBad {
		p.failf("no viable alternative at character '%s'", p.tok.text)
	}
	p.failf("no viable alternative at input %s", p.quote(p.tok))
}

func (p *parser) isKeyword(kw string) bool {
	return p.tok.kind == tIdent && strings.EqualFold(p.tok.text, kw)
}

func (p *parser) acceptKeyword(kw string) bool {
	if p.isKeyword(kw) {
		p.advance()
		return true
	}
	return false
}

func (p *parser) expectKeyword(kw string) {
	if !p.acceptKeyword(kw) {
		if p.tok.kind == tEOF {
			p.failf("mismatched input '<EOF>' expecting K_%s", strings.ToUpper(kw))
		}
		p.failf("mismatched input %s expecting K_%s", p.quote(p.tok), strings.ToUpper(kw))
	}
}

func (p *parser) isPunct(s string) bool { return p.tok.kind == tPunct && p.tok.text == s }

func (p *parser) acceptPunct(s string) bool {
	if p.isPunct(s) {
		p.advance()
		return true
	}
	return false
}

func (p *parser) expectPunct(s string) {
	if !p.acceptPunct(s) {
		p.failf("mismatched input %s expecting '%s'", p.quote(p.tok), s)
	}
}

// reserved lists keywords that cannot be unquoted identifiers.
var Reserved = map[string]bool{
	"add": true, "allow": true, "alter": true, "and": true, "apply": true, "asc": true, "authorize": true,
	"batch": true, "begin": true, "by": true, "columnfamily": true, "create": true, "delete": true,
	"desc": true, "describe": true, "drop": true, "entries": true, "execute": true, "from": true,
	"full": true, "grant": true, "if": true, "in": true, "index": true, "infinity": true, "insert": true,
	"into": true, "keyspace": true, "limit": true, "modify": true, "nan": true, "norecursive": true,
	"not": true, "null": true, "of": true, "on": true, "or": true, "order": true, "primary": true,
	"rename": true, "replace": true, "revoke": true, "schema": true, "select": true, "set": true,
	"table": true, "to": true, "token": true, "truncate": true, "unlogged": true, "update": true,
	"use": true, "using": true, "view": true, "where": true, "with": true,
}

// ident reads an identifier: unquoted ones are folded to lower case.
func (p *parser) ident() string {
	switch p.tok.kind {
	case tIdent:
		if Reserved[strings.ToLower(p.tok.text)] {
			p.unexpected()
		}
		s := strings.ToLower(p.tok.text)
		p.advance()
		return s
	case tQuotedIdent:
		s := p.tok.text
		p.advance()
		return s
	}
	p.unexpected()
	return ""
}

// identAny reads an identifier, allowing keywords (for keyspace and table names after a
// dot, and options).
func (p *parser) identAny() string {
	if p.tok.kind == tIdent {
		s := strings.ToLower(p.tok.text)
		p.advance()
		return s
	}
	return p.ident()
}

func (p *parser) tableName() TableName {
	first := p.ident()
	if p.acceptPunct(".") {
		return TableName{Ks: first, Name: p.identAny()}
	}
	return TableName{Name: first}
}

func (p *parser) ifNotExists() bool {
	if p.isKeyword("if") {
		p.advance()
		p.expectKeyword("not")
		p.expectKeyword("exists")
		return true
	}
	return false
}

func (p *parser) ifExists() bool {
	if p.isKeyword("if") && strings.EqualFold(p.peek(1).text, "exists") {
		p.advance()
		p.advance()
		return true
	}
	return false
}

func (p *parser) statement() Statement {
	if p.tok.kind != tIdent {
		p.unexpected()
	}
	switch strings.ToLower(p.tok.text) {
	case "select":
		p.advance()
		return p.selectStmt()
	case "insert":
		p.advance()
		return p.insertStmt()
	case "update":
		p.advance()
		return p.updateStmt()
	case "delete":
		p.advance()
		return p.deleteStmt()
	case "begin":
		p.advance()
		return p.batchStmt()
	case "use":
		p.advance()
		return &UseStmt{Keyspace: p.identAny()}
	case "create":
		p.advance()
		return p.createStmt()
	case "drop":
		p.advance()
		return p.dropStmt()
	case "truncate":
		p.advance()
		p.acceptKeyword("table")
		return &TruncateStmt{Table: p.tableName()}
	case "alter":
		p.advance()
		return p.alterStmt()
	case "describe", "desc":
		p.skipRest()
		return &UnsupportedStmt{What: "DESCRIBE statements are not supported by the embedded node (the drivers' metadata APIs describe the schema from system_schema)"}
	case "grant", "revoke":
		revoke := p.isKeyword("revoke")
		p.advance()
		return p.grant(revoke)
	case "list":
		p.advance()
		return p.list()
	}
	p.unexpected()
	return nil
}

// skipRest consumes every remaining token.
func (p *parser) skipRest() {
	for p.tok.kind != tEOF {
		if p.tok.kind == tBad {
			p.unexpected()
		}
		p.advance()
	}
}

func (p *parser) createStmt() Statement {
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
		return p.roleStatement(RoleCreate)
	case p.isKeyword("trigger"):
		what := strings.ToUpper(p.tok.text)
		p.skipRest()
		return &UnsupportedStmt{What: "CREATE " + what + " is not supported by the embedded node"}
	}
	p.unexpected()
	return nil
}

func (p *parser) dropStmt() Statement {
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
		return p.roleStatement(roleDrop)
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
func (p *parser) keyspaceOptions() keyspaceOpts {
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

// stringMap reads {'k': 'v', ...} with constant values.
func (p *parser) stringMap() map[string]string {
	p.expectPunct("{")
	m := map[string]string{}
	if p.acceptPunct("}") {
		return m
	}
	for {
		if p.tok.kind != tString {
			p.unexpected()
		}
		k := p.tok.text
		p.advance()
		p.expectPunct(":")
		m[k] = p.constantText()
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct("}")
	return m
}

// option reads a constant or a map as the value of a WITH option.
func (p *parser) option() OptValue {
	if p.isPunct("{") {
		return OptValue{M: p.stringMap()}
	}
	return OptValue{Text: p.constantText()}
}

// constantText reads a constant and returns its text.
func (p *parser) constantText() string {
	neg := p.acceptPunct("-")
	switch p.tok.kind {
	case tString, tInt, tFloat, tIdent, tQuotedIdent, tHex, tUUID:
		s := p.tok.text
		if neg {
			s = "-" + s
		}
		p.advance()
		return s
	}
	p.unexpected()
	return ""
}

func (p *parser) createTable() Statement {
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

var SimpleTypes = map[string]cql.TypeID{
	"ascii": cql.TypeASCII, "bigint": cql.TypeBigint, "blob": cql.TypeBlob, "boolean": cql.TypeBoolean,
	"counter": cql.TypeCounter, "date": cql.TypeDate, "decimal": cql.TypeDecimal, "double": cql.TypeDouble,
	"float": cql.TypeFloat, "inet": cql.TypeInet, "int": cql.TypeInt, "smallint": cql.TypeSmallint,
	"text": cql.TypeVarchar, "varchar": cql.TypeVarchar, "time": cql.TypeTime, "timestamp": cql.TypeTimestamp,
	"timeuuid": cql.TypeTimeUUID, "tinyint": cql.TypeTinyint, "uuid": cql.TypeUUID, "varint": cql.TypeVarint,
	"duration": cql.TypeDuration,
}

// typ reads a CQL type as written; user-defined types are resolved when the statement runs.
func (p *parser) typ(depth int) *TypeRef {
	if depth > MaxNesting {
		p.failf("type nesting too deep")
	}
	if p.tok.kind == tString {
		r, msg := classNameType(p.tok.text)
		if msg != "" {
			p.failPlain("%s", msg)
		}
		p.advance()
		return r
	}
	if p.tok.kind != tIdent && p.tok.kind != tQuotedIdent {
		p.unexpected()
	}
	name := strings.ToLower(p.tok.text)
	if _, ok := SimpleTypes[name]; ok && p.tok.kind == tIdent {
		p.advance()
		return &TypeRef{Name: name}
	}
	if p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "<" {
		switch name {
		case "frozen":
			p.advance()
			p.advance()
			t := p.typ(depth + 1)
			p.expectPunct(">")
			t.Frozen = true
			return t
		case "list", "set", "map", "tuple":
			p.advance()
			p.advance()
			t := &TypeRef{Name: name}
			for {
				t.Args = append(t.Args, p.typ(depth+1))
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(">")
			if want := map[string]int{"list": 1, "set": 1, "map": 2}[name]; want > 0 && len(t.Args) != want {
				p.failf("%s takes %d type arguments, got %d", name, want, len(t.Args))
			}
			return t
		}
	}
	// A user-defined type, perhaps qualified by its keyspace.
	n := p.ident()
	if p.acceptPunct(".") {
		return &TypeRef{Ks: n, Name: p.identAny()}
	}
	return &TypeRef{Name: n}
}

func (p *parser) marker(name string) *Term {
	t := &Term{Kind: TermBind, Idx: len(p.markers), Name: name}
	p.markers = append(p.markers, name)
	return t
}

// value reads a term.
func (p *parser) value() *Term { return p.valueDepth(0) }

func (p *parser) valueDepth(depth int) *Term {
	if depth > MaxNesting {
		p.failf("literal nesting too deep")
	}
	t := p.tok
	switch t.kind {
	case tMarker:
		p.advance()
		return p.marker("")
	case tNamedMarker:
		p.advance()
		return p.marker(t.text)
	case tString, tInt, tFloat, tHex, tUUID, tDuration:
		p.advance()
		return &Term{Kind: TermConst, Lit: literalOf[t.kind], Text: t.text}
	case tPunct:
		switch t.text {
		case "-":
			n := p.peek(1)
			switch {
			case n.kind == tInt || n.kind == tFloat:
				p.advance()
				p.advance()
				lk := LitInt
				if n.kind == tFloat {
					lk = LitFloat
				}
				return &Term{Kind: TermConst, Lit: lk, Text: "-" + n.text}
			case n.kind == tIdent && (strings.EqualFold(n.text, "nan") || strings.EqualFold(n.text, "infinity")):
				p.advance()
				p.advance()
				return &Term{Kind: TermConst, Lit: LitFloat, Text: "-" + strings.ToLower(n.text)}
			case n.kind == tDuration || n.kind == tIdent && isISODuration(n.text):
				p.advance()
				p.advance()
				return &Term{Kind: TermConst, Lit: LitDuration, Text: "-" + n.text}
			}
		case "[":
			p.advance()
			l := &Term{Kind: TermList}
			if !p.acceptPunct("]") {
				for {
					l.Elems = append(l.Elems, p.valueDepth(depth+1))
					if !p.acceptPunct(",") {
						break
					}
				}
				p.expectPunct("]")
			}
			return l
		case "{":
			if n := p.peek(1); (n.kind == tQuotedIdent || n.kind == tIdent && !literalWord(n.text)) &&
				p.peek(2).kind == tPunct && p.peek(2).text == ":" {
				return p.udtLiteral(depth)
			}
			p.advance()
			if p.acceptPunct("}") {
				return &Term{Kind: TermMap}
			}
			first := p.valueDepth(depth + 1)
			if p.acceptPunct(":") {
				m := &Term{Kind: TermMap, Elems: []*Term{first}, Vals: []*Term{p.valueDepth(depth + 1)}}
				for p.acceptPunct(",") {
					m.Elems = append(m.Elems, p.valueDepth(depth+1))
					p.expectPunct(":")
					m.Vals = append(m.Vals, p.valueDepth(depth+1))
				}
				p.expectPunct("}")
				return m
			}
			s := &Term{Kind: TermSet, Elems: []*Term{first}}
			for p.acceptPunct(",") {
				s.Elems = append(s.Elems, p.valueDepth(depth+1))
			}
			p.expectPunct("}")
			return s
		case "(":
			p.advance()
			tu := &Term{Kind: TermTuple}
			for {
				tu.Elems = append(tu.Elems, p.valueDepth(depth+1))
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
			return tu
		}
	case tIdent:
		lower := strings.ToLower(t.text)
		switch lower {
		case "true", "false":
			p.advance()
			return &Term{Kind: TermConst, Lit: LitBool, Text: lower}
		case "null":
			p.advance()
			return &Term{Kind: TermConst, Lit: LitNull, Text: "null"}
		case "nan", "infinity":
			p.advance()
			return &Term{Kind: TermConst, Lit: LitFloat, Text: lower}
		}
		if isISODuration(t.text) {
			p.advance()
			return &Term{Kind: TermConst, Lit: LitDuration, Text: t.text}
		}
		if p.peek(1).kind == tPunct && p.peek(1).text == "(" {
			p.advance()
			p.advance()
			f := &Term{Kind: TermFunc, Name: lower}
			if !p.acceptPunct(")") {
				for {
					f.Elems = append(f.Elems, p.valueDepth(depth+1))
					if !p.acceptPunct(",") {
						break
					}
				}
				p.expectPunct(")")
			}
			return f
		}
	}
	p.unexpected()
	return nil
}

// literalWord reports whether an identifier-like token is a constant (true, null, NaN...).
func literalWord(s string) bool {
	switch strings.ToLower(s) {
	case "true", "false", "null", "nan", "infinity":
		return true
	}
	return false
}

// udtLiteral reads {field: value, ...}.
func (p *parser) udtLiteral(depth int) *Term {
	p.expectPunct("{")
	u := &Term{Kind: TermUDT}
	for {
		u.Names = append(u.Names, p.identAny())
		p.expectPunct(":")
		u.Elems = append(u.Elems, p.valueDepth(depth+1))
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct("}")
	return u
}

func (p *parser) using(ttl, ts **Term) {
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

func (p *parser) insertStmt() Statement {
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

func (p *parser) updateStmt() Statement {
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

// identMatches reports whether the current token is the identifier col.
func (p *parser) identMatches(col string) bool {
	switch p.tok.kind {
	case tIdent:
		return strings.ToLower(p.tok.text) == col
	case tQuotedIdent:
		return p.tok.text == col
	}
	return false
}

func (p *parser) deleteStmt() Statement {
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
func (p *parser) relations() []Relation {
	var rs []Relation
	for {
		rs = append(rs, p.relation())
		if !p.acceptKeyword("and") {
			return rs
		}
	}
}

func (p *parser) relation() Relation {
	var r Relation
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
	} else {
		if p.isPunct("(") {
			p.failf("multi-column relations are not supported by the embedded node")
		}
		r.Col = p.ident()
		if p.acceptPunct("[") {
			r.Key = p.value()
			p.expectPunct("]")
			p.expectPunct("=")
			r.Op, r.Val = OpMapEq, p.value()
			return r
		}
	}
	switch {
	case p.tok.kind == tPunct:
		switch p.tok.text {
		case "=":
			r.Op = OpEq
		case "<":
			r.Op = OpLt
		case "<=":
			r.Op = OpLe
		case ">":
			r.Op = OpGt
		case ">=":
			r.Op = OpGe
		case "!=":
			r.Op = OpNe
		default:
			p.unexpected()
		}
		p.advance()
		r.Val = p.value()
	case p.acceptKeyword("in"):
		r.Op = OpIn
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
		} else {
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

func (p *parser) selectStmt() Statement {
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
func (p *parser) scyllaSelectTail() {
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
func (p *parser) usingTimeout() {
	if p.tok.kind != tDuration {
		p.failf("USING TIMEOUT takes a literal duration such as 5000ms or 2s, got %s", p.quote(p.tok))
	}
	p.advance()
}

func (p *parser) limitValue() *Term {
	switch p.tok.kind {
	case tInt, tMarker, tNamedMarker:
		return p.value()
	}
	p.unexpected()
	return nil
}

func (p *parser) selector() Selector {
	s := p.unaliasedSelector(0)
	if p.acceptKeyword("as") {
		s.Alias = p.ident()
	}
	return s
}

// unaliasedSelector reads a selector without its alias: CAST(selector AS type) as the
// selector it casts, with the type added to its casts.
func (p *parser) unaliasedSelector(depth int) Selector {
	var s Selector
	if p.tok.kind == tIdent && strings.EqualFold(p.tok.text, "system") && p.peek(1).kind == tPunct && p.peek(1).text == "." &&
		p.peek(2).kind == tIdent && p.peek(3).kind == tPunct && p.peek(3).text == "(" {
		// system.fn(...): the native functions, named with their keyspace.
		p.advance()
		p.advance()
	}
	if p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "(" {
		fn := strings.ToLower(p.tok.text)
		switch fn {
		case "count":
			p.advance()
			p.advance()
			s.Kind, s.Text = SelCount, "count"
			if !p.acceptPunct("*") {
				if p.tok.kind == tInt && p.tok.text == "1" {
					p.advance()
				} else {
					s.Col = p.ident()
					s.Kind, s.Agg, s.Text = SelAgg, "count", "system.count("+s.Col+")"
				}
			}
			p.expectPunct(")")
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
				var args []string
				for !p.acceptPunct(")") {
					args = append(args, p.ident())
					if !p.acceptPunct(",") {
						p.expectPunct(")")
						break
					}
				}
				s.Text, s.Cols = fn+"("+strings.Join(args, ", ")+")", args
				break
			}
			s.Kind = SelFunc
			s.Fn = p.value()
			s.Text = "system." + fn + "()"
		}
	} else if p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "." && p.peek(2).kind == tIdent &&
		p.peek(3).kind == tPunct && p.peek(3).text == "(" {
		// ks.f(...): a user-defined function or aggregate.
		s.Kind, s.FnKs = SelUDF, p.ident()
		p.advance()
		s.Fn = &Term{Kind: TermFunc, Name: strings.ToLower(p.tok.text)}
		p.advance()
		p.advance()
		var args []string
		for !p.acceptPunct(")") {
			args = append(args, p.ident())
			if !p.acceptPunct(",") {
				p.expectPunct(")")
				break
			}
		}
		s.Text = s.FnKs + "." + s.Fn.Name + "(" + strings.Join(args, ", ") + ")"
	} else {
		s.Col = p.ident()
		s.Text = s.Col
		for p.acceptPunct(".") {
			f := p.identAny()
			s.Fields = append(s.Fields, f)
			s.Text += "." + f
		}
	}
	return s
}

// castArg reads an aggregate's argument: a column, or CAST(… AS type) of one, nested as
// deep as written: the column and the types, innermost first.
func (p *parser) castArg(depth int) (string, []string) {
	if !(p.tok.kind == tIdent && strings.EqualFold(p.tok.text, "cast") && p.peek(1).kind == tPunct && p.peek(1).text == "(") {
		return p.ident(), nil
	}
	p.castOpen(depth)
	col, casts := p.castArg(depth + 1)
	return col, append(casts, p.castType())
}

// castOpen reads the "CAST(" of a cast at nesting depth, which is bounded.
func (p *parser) castOpen(depth int) {
	if depth > MaxNesting {
		p.failf("CAST nesting too deep")
	}
	p.advance()
	p.advance()
}

// castType reads the "AS type)" that ends a cast, and returns the type.
func (p *parser) castType() string {
	p.expectKeyword("as")
	to := strings.ToLower(p.tok.text)
	if _, ok := SimpleTypes[to]; !ok || p.tok.kind != tIdent {
		p.unexpected()
	}
	p.advance()
	p.expectPunct(")")
	return to
}

func (p *parser) batchStmt() Statement {
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

func upper(s string) string { return strings.ToUpper(s) }

// atoiLimited parses a non-negative decimal int that fits in an int32.
func atoiLimited(s string) (int, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int(n), err == nil
}

// primaryKey reads (a, b), ((a, b), c) or (a, c, d): the partition key and clustering
// columns. The opening parenthesis is the current token.
func (p *parser) primaryKey() (pk, ck []string) {
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
func (p *parser) clusteringOrder() []ordering {
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
func (p *parser) createView() Statement {
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
			r := p.relation()
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
