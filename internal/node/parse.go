package node

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// maxNesting bounds the recursion of nested collection literals and types.
const maxNesting = 64

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
func parse(query string) (ps *parsedStmt, err error) {
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
	return &parsedStmt{stmt: st, markers: p.markers}, nil
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
var reserved = map[string]bool{
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
		if reserved[strings.ToLower(p.tok.text)] {
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

func (p *parser) tableName() tableName {
	first := p.ident()
	if p.acceptPunct(".") {
		return tableName{ks: first, name: p.identAny()}
	}
	return tableName{name: first}
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

func (p *parser) statement() statement {
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
		return &useStmt{keyspace: p.identAny()}
	case "create":
		p.advance()
		return p.createStmt()
	case "drop":
		p.advance()
		return p.dropStmt()
	case "truncate":
		p.advance()
		p.acceptKeyword("table")
		return &truncateStmt{table: p.tableName()}
	case "alter":
		p.advance()
		return p.alterStmt()
	case "describe", "desc":
		p.skipRest()
		return &unsupportedStmt{what: "DESCRIBE statements are not supported by the embedded node (the drivers' metadata APIs describe the schema from system_schema)"}
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

func (p *parser) createStmt() statement {
	switch {
	case p.acceptKeyword("keyspace"), p.acceptKeyword("schema"):
		st := &createKeyspaceStmt{}
		st.ifNotExists = p.ifNotExists()
		st.name = p.ident()
		p.expectKeyword("with")
		st.opts = p.keyspaceOptions()
		return st
	case p.acceptKeyword("table"), p.acceptKeyword("columnfamily"):
		return p.createTable()
	case p.acceptKeyword("type"):
		st := &createTypeStmt{}
		st.ifNotExists = p.ifNotExists()
		st.name = p.tableName()
		p.expectPunct("(")
		for {
			f := colDef{name: p.identAny()}
			f.ref = p.typ(0)
			st.fields = append(st.fields, f)
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
		return p.roleStatement(roleCreate)
	case p.isKeyword("trigger"):
		what := strings.ToUpper(p.tok.text)
		p.skipRest()
		return &unsupportedStmt{what: "CREATE " + what + " is not supported by the embedded node"}
	}
	p.unexpected()
	return nil
}

func (p *parser) dropStmt() statement {
	switch {
	case p.acceptKeyword("keyspace"), p.acceptKeyword("schema"):
		st := &dropKeyspaceStmt{}
		st.ifExists = p.ifExists()
		st.name = p.ident()
		return st
	case p.acceptKeyword("table"), p.acceptKeyword("columnfamily"):
		st := &dropTableStmt{}
		st.ifExists = p.ifExists()
		st.table = p.tableName()
		return st
	case p.acceptKeyword("type"):
		st := &dropTypeStmt{}
		st.ifExists = p.ifExists()
		st.name = p.tableName()
		return st
	case p.isKeyword("function"), p.isKeyword("aggregate"):
		st := &dropFunctionStmt{aggregate: p.isKeyword("aggregate")}
		p.advance()
		st.ifExists = p.ifExists()
		st.name = p.tableName()
		if p.acceptPunct("(") {
			st.hasArgs = true
			if !p.acceptPunct(")") {
				for {
					st.args = append(st.args, p.typ(0))
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
		st := &dropIndexStmt{}
		st.ifExists = p.ifExists()
		st.name = p.tableName()
		return st
	case p.acceptKeyword("materialized"):
		p.expectKeyword("view")
		st := &viewStmt{}
		st.ifExists = p.ifExists()
		st.name = p.tableName()
		return st
	case p.tok.kind == tIdent:
		what := strings.ToUpper(p.tok.text)
		p.skipRest()
		return &unsupportedStmt{what: "DROP " + what + " is not supported by the embedded node"}
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
			if v.m == nil {
				p.failPlain("Invalid value for property 'replication'. It should be a map.")
			}
			o.replication = v.m
		case "durable_writes":
			b := strings.EqualFold(v.text, "true")
			if !b && !strings.EqualFold(v.text, "false") {
				p.failPlain("Invalid boolean value %s for 'durable_writes' property", v.text)
			}
			o.durableWrites = &b
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
func (p *parser) option() optValue {
	if p.isPunct("{") {
		return optValue{m: p.stringMap()}
	}
	return optValue{text: p.constantText()}
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

func (p *parser) createTable() statement {
	st := &createTableStmt{options: map[string]optValue{}}
	st.ifNotExists = p.ifNotExists()
	st.table = p.tableName()
	p.expectPunct("(")
	for {
		if p.isKeyword("primary") {
			p.advance()
			p.expectKeyword("key")
			if st.pk != nil {
				p.failf("Multiple PRIMARY KEYs specified (exactly one required)")
			}
			st.pk, st.ck = p.primaryKey()
		} else {
			c := colDef{name: p.ident()}
			c.ref = p.typ(0)
			if p.acceptKeyword("static") {
				c.static = true
			}
			if p.isKeyword("primary") {
				p.advance()
				p.expectKeyword("key")
				if st.pk != nil {
					p.failf("Multiple PRIMARY KEYs specified (exactly one required)")
				}
				st.pk = []string{c.name}
			}
			st.cols = append(st.cols, c)
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
				st.order = p.clusteringOrder()
			case p.isKeyword("compact"):
				p.advance()
				p.expectKeyword("storage")
				st.compact = true
			default:
				name := p.identAny()
				p.expectPunct("=")
				st.options[name] = p.option()
			}
			if !p.acceptKeyword("and") {
				break
			}
		}
	}
	return st
}

var simpleTypes = map[string]cql.TypeID{
	"ascii": cql.TypeASCII, "bigint": cql.TypeBigint, "blob": cql.TypeBlob, "boolean": cql.TypeBoolean,
	"counter": cql.TypeCounter, "date": cql.TypeDate, "decimal": cql.TypeDecimal, "double": cql.TypeDouble,
	"float": cql.TypeFloat, "inet": cql.TypeInet, "int": cql.TypeInt, "smallint": cql.TypeSmallint,
	"text": cql.TypeVarchar, "varchar": cql.TypeVarchar, "time": cql.TypeTime, "timestamp": cql.TypeTimestamp,
	"timeuuid": cql.TypeTimeUUID, "tinyint": cql.TypeTinyint, "uuid": cql.TypeUUID, "varint": cql.TypeVarint,
	"duration": cql.TypeDuration,
}

// typ reads a CQL type as written; user-defined types are resolved when the statement runs.
func (p *parser) typ(depth int) *typeRef {
	if depth > maxNesting {
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
	if _, ok := simpleTypes[name]; ok && p.tok.kind == tIdent {
		p.advance()
		return &typeRef{name: name}
	}
	if p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "<" {
		switch name {
		case "frozen":
			p.advance()
			p.advance()
			t := p.typ(depth + 1)
			p.expectPunct(">")
			t.frozen = true
			return t
		case "list", "set", "map", "tuple":
			p.advance()
			p.advance()
			t := &typeRef{name: name}
			for {
				t.args = append(t.args, p.typ(depth+1))
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(">")
			if want := map[string]int{"list": 1, "set": 1, "map": 2}[name]; want > 0 && len(t.args) != want {
				p.failf("%s takes %d type arguments, got %d", name, want, len(t.args))
			}
			return t
		}
	}
	// A user-defined type, perhaps qualified by its keyspace.
	n := p.ident()
	if p.acceptPunct(".") {
		return &typeRef{ks: n, name: p.identAny()}
	}
	return &typeRef{name: n}
}

func (p *parser) marker(name string) *term {
	t := &term{kind: termBind, idx: len(p.markers), name: name}
	p.markers = append(p.markers, name)
	return t
}

// value reads a term.
func (p *parser) value() *term { return p.valueDepth(0) }

func (p *parser) valueDepth(depth int) *term {
	if depth > maxNesting {
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
		return &term{kind: termConst, lit: literalOf[t.kind], text: t.text}
	case tPunct:
		switch t.text {
		case "-":
			n := p.peek(1)
			switch {
			case n.kind == tInt || n.kind == tFloat:
				p.advance()
				p.advance()
				lk := litInt
				if n.kind == tFloat {
					lk = litFloat
				}
				return &term{kind: termConst, lit: lk, text: "-" + n.text}
			case n.kind == tIdent && (strings.EqualFold(n.text, "nan") || strings.EqualFold(n.text, "infinity")):
				p.advance()
				p.advance()
				return &term{kind: termConst, lit: litFloat, text: "-" + strings.ToLower(n.text)}
			case n.kind == tDuration || n.kind == tIdent && isISODuration(n.text):
				p.advance()
				p.advance()
				return &term{kind: termConst, lit: litDuration, text: "-" + n.text}
			}
		case "[":
			p.advance()
			l := &term{kind: termList}
			if !p.acceptPunct("]") {
				for {
					l.elems = append(l.elems, p.valueDepth(depth+1))
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
				return &term{kind: termMap}
			}
			first := p.valueDepth(depth + 1)
			if p.acceptPunct(":") {
				m := &term{kind: termMap, elems: []*term{first}, vals: []*term{p.valueDepth(depth + 1)}}
				for p.acceptPunct(",") {
					m.elems = append(m.elems, p.valueDepth(depth+1))
					p.expectPunct(":")
					m.vals = append(m.vals, p.valueDepth(depth+1))
				}
				p.expectPunct("}")
				return m
			}
			s := &term{kind: termSet, elems: []*term{first}}
			for p.acceptPunct(",") {
				s.elems = append(s.elems, p.valueDepth(depth+1))
			}
			p.expectPunct("}")
			return s
		case "(":
			p.advance()
			tu := &term{kind: termTuple}
			for {
				tu.elems = append(tu.elems, p.valueDepth(depth+1))
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
			return &term{kind: termConst, lit: litBool, text: lower}
		case "null":
			p.advance()
			return &term{kind: termConst, lit: litNull, text: "null"}
		case "nan", "infinity":
			p.advance()
			return &term{kind: termConst, lit: litFloat, text: lower}
		}
		if isISODuration(t.text) {
			p.advance()
			return &term{kind: termConst, lit: litDuration, text: t.text}
		}
		if p.peek(1).kind == tPunct && p.peek(1).text == "(" {
			p.advance()
			p.advance()
			f := &term{kind: termFunc, name: lower}
			if !p.acceptPunct(")") {
				for {
					f.elems = append(f.elems, p.valueDepth(depth+1))
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
func (p *parser) udtLiteral(depth int) *term {
	p.expectPunct("{")
	u := &term{kind: termUDT}
	for {
		u.names = append(u.names, p.identAny())
		p.expectPunct(":")
		u.elems = append(u.elems, p.valueDepth(depth+1))
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct("}")
	return u
}

func (p *parser) using(ttl, ts **term) {
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

func (p *parser) insertStmt() statement {
	p.expectKeyword("into")
	st := &insertStmt{table: p.tableName()}
	if p.acceptKeyword("json") {
		switch p.tok.kind {
		case tString:
			st.json = &term{kind: termConst, lit: litString, text: p.tok.text}
			p.advance()
		case tMarker, tNamedMarker:
			st.json = p.value()
		default:
			p.unexpected()
		}
		if p.acceptKeyword("default") {
			if !p.acceptKeyword("unset") {
				p.expectKeyword("null")
			} else {
				st.jsonUnset = true
			}
		}
		st.ifNotExists = p.ifNotExists()
		p.using(&st.ttl, &st.ts)
		return st
	}
	p.expectPunct("(")
	for {
		st.cols = append(st.cols, p.ident())
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(")")
	p.expectKeyword("values")
	p.expectPunct("(")
	for {
		st.vals = append(st.vals, p.value())
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(")")
	st.ifNotExists = p.ifNotExists()
	p.using(&st.ttl, &st.ts)
	return st
}

func (p *parser) updateStmt() statement {
	st := &updateStmt{table: p.tableName()}
	p.using(&st.ttl, &st.ts)
	p.expectKeyword("set")
	for {
		col := p.ident()
		a := assignment{col: col}
		if p.acceptPunct(".") {
			a.field = p.identAny()
			p.expectPunct("=")
			a.val = p.value()
			st.assigns = append(st.assigns, a)
			if !p.acceptPunct(",") {
				break
			}
			continue
		}
		if p.acceptPunct("[") {
			a.op = assignKey
			a.key = p.value()
			p.expectPunct("]")
			p.expectPunct("=")
			a.val = p.value()
		} else {
			p.expectPunct("=")
			if (p.tok.kind == tIdent || p.tok.kind == tQuotedIdent) && p.peek(1).kind == tPunct &&
				(p.peek(1).text == "+" || p.peek(1).text == "-") && p.identMatches(col) {
				p.advance()
				if p.acceptPunct("+") {
					a.op = assignAdd
				} else {
					p.expectPunct("-")
					a.op = assignSub
				}
				a.val = p.value()
			} else {
				a.val = p.value()
				if p.acceptPunct("+") {
					if !p.identMatches(col) {
						p.failf("Only expressions of the form X = <value> + X are supported.")
					}
					p.advance()
					a.op = assignPrepend
				}
			}
		}
		st.assigns = append(st.assigns, a)
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectKeyword("where")
	st.where = p.relations()
	if p.isKeyword("if") {
		p.advance()
		if p.acceptKeyword("exists") {
			st.ifExists = true
		} else {
			st.conds = p.relations()
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

func (p *parser) deleteStmt() statement {
	st := &deleteStmt{}
	if !p.isKeyword("from") {
		for {
			d := deleteTarget{col: p.ident()}
			if p.acceptPunct(".") {
				d.field = p.identAny()
			} else if p.acceptPunct("[") {
				d.key = p.value()
				p.expectPunct("]")
			}
			st.cols = append(st.cols, d)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectKeyword("from")
	st.table = p.tableName()
	var ttl *term
	p.using(&ttl, &st.ts)
	if ttl != nil {
		p.failf("mismatched input 'TTL' expecting K_TIMESTAMP")
	}
	p.expectKeyword("where")
	st.where = p.relations()
	if p.isKeyword("if") {
		p.advance()
		if p.acceptKeyword("exists") {
			st.ifExists = true
		} else {
			st.conds = p.relations()
		}
	}
	return st
}

// relations parses relations joined by AND: a WHERE clause, or the conditions of IF.
func (p *parser) relations() []relation {
	var rs []relation
	for {
		rs = append(rs, p.relation())
		if !p.acceptKeyword("and") {
			return rs
		}
	}
}

func (p *parser) relation() relation {
	var r relation
	if p.isKeyword("token") && p.peek(1).kind == tPunct && p.peek(1).text == "(" {
		p.advance()
		p.advance()
		r.token = true
		for {
			r.cols = append(r.cols, p.ident())
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
	} else {
		if p.isPunct("(") {
			p.failf("multi-column relations are not supported by the embedded node")
		}
		r.col = p.ident()
		if p.acceptPunct("[") {
			r.key = p.value()
			p.expectPunct("]")
			p.expectPunct("=")
			r.op, r.val = opMapEq, p.value()
			return r
		}
	}
	switch {
	case p.tok.kind == tPunct:
		switch p.tok.text {
		case "=":
			r.op = opEq
		case "<":
			r.op = opLt
		case "<=":
			r.op = opLe
		case ">":
			r.op = opGt
		case ">=":
			r.op = opGe
		case "!=":
			r.op = opNe
		default:
			p.unexpected()
		}
		p.advance()
		r.val = p.value()
	case p.acceptKeyword("in"):
		r.op = opIn
		if p.acceptPunct("(") {
			r.vals = []*term{}
			if !p.acceptPunct(")") {
				for {
					r.vals = append(r.vals, p.value())
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
				r.val = p.marker("")
			case tNamedMarker:
				n := p.tok.text
				p.advance()
				r.val = p.marker(n)
			default:
				p.unexpected()
			}
		}
	case p.acceptKeyword("contains"):
		r.op = opContains
		if p.acceptKeyword("key") {
			r.op = opContainsKey
		}
		r.val = p.value()
	default:
		p.unexpected()
	}
	return r
}

func (p *parser) selectStmt() statement {
	st := &selectStmt{}
	if p.acceptKeyword("json") {
		st.json = true
	}
	if p.isKeyword("distinct") && !(p.peek(1).kind == tIdent && strings.EqualFold(p.peek(1).text, "from")) &&
		!(p.peek(1).kind == tPunct && (p.peek(1).text == "," || p.peek(1).text == "(")) {
		p.advance()
		st.distinct = true
	}
	if p.acceptPunct("*") {
		st.star = true
	} else {
		for {
			st.sels = append(st.sels, p.selector())
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectKeyword("from")
	st.table = p.tableName()
	if p.acceptKeyword("where") {
		st.where = p.relations()
	}
	if p.acceptKeyword("group") {
		p.expectKeyword("by")
		for {
			st.groupBy = append(st.groupBy, p.ident())
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.acceptKeyword("order") {
		p.expectKeyword("by")
		for {
			o := ordering{col: p.ident()}
			if p.acceptKeyword("desc") {
				o.desc = true
			} else {
				p.acceptKeyword("asc")
			}
			st.orderBy = append(st.orderBy, o)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.acceptKeyword("per") {
		p.expectKeyword("partition")
		p.expectKeyword("limit")
		st.partLimit = p.limitValue()
	}
	if p.acceptKeyword("limit") {
		st.limit = p.limitValue()
	}
	if p.acceptKeyword("allow") {
		p.expectKeyword("filtering")
		st.allowFiltering = true
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

func (p *parser) limitValue() *term {
	switch p.tok.kind {
	case tInt, tMarker, tNamedMarker:
		return p.value()
	}
	p.unexpected()
	return nil
}

func (p *parser) selector() selector {
	s := p.unaliasedSelector(0)
	if p.acceptKeyword("as") {
		s.alias = p.ident()
	}
	return s
}

// unaliasedSelector reads a selector without its alias: CAST(selector AS type) as the
// selector it casts, with the type added to its casts.
func (p *parser) unaliasedSelector(depth int) selector {
	var s selector
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
			s.kind, s.text = selCount, "count"
			if !p.acceptPunct("*") {
				if p.tok.kind == tInt && p.tok.text == "1" {
					p.advance()
				} else {
					s.col = p.ident()
					s.kind, s.agg, s.text = selAgg, "count", "system.count("+s.col+")"
				}
			}
			p.expectPunct(")")
		case "min", "max", "sum", "avg":
			p.advance()
			p.advance()
			s.col, s.argCasts = p.castArg(0)
			p.expectPunct(")")
			s.kind, s.agg, s.text = selAgg, fn, "system."+fn+"("+s.col+")"
		case "cast":
			p.castOpen(depth)
			s = p.unaliasedSelector(depth + 1)
			s.casts = append(s.casts, p.castType())
		case "tojson":
			p.advance()
			p.advance()
			s.col = p.ident()
			p.expectPunct(")")
			s.kind, s.text = selToJSON, "system.tojson("+s.col+")"
		case "writetime", "ttl":
			p.advance()
			p.advance()
			s.col = p.ident()
			p.expectPunct(")")
			s.kind = selWritetime
			if fn == "ttl" {
				s.kind = selTTL
			}
			s.text = fn + "(" + s.col + ")"
		case "token":
			p.advance()
			p.advance()
			for {
				s.cols = append(s.cols, p.ident())
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
			s.kind, s.text = selToken, "system.token("+strings.Join(s.cols, ", ")+")"
		default:
			if a := p.peek(2); a.kind == tQuotedIdent || a.kind == tIdent && !literalWord(a.text) && !(p.peek(3).kind == tPunct && p.peek(3).text == "(") {
				// f(col, ...): a user-defined function or aggregate of columns.
				s.kind, s.fn = selUDF, &term{kind: termFunc, name: fn}
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
				s.text, s.cols = fn+"("+strings.Join(args, ", ")+")", args
				break
			}
			s.kind = selFunc
			s.fn = p.value()
			s.text = "system." + fn + "()"
		}
	} else if p.tok.kind == tIdent && p.peek(1).kind == tPunct && p.peek(1).text == "." && p.peek(2).kind == tIdent &&
		p.peek(3).kind == tPunct && p.peek(3).text == "(" {
		// ks.f(...): a user-defined function or aggregate.
		s.kind, s.fnKs = selUDF, p.ident()
		p.advance()
		s.fn = &term{kind: termFunc, name: strings.ToLower(p.tok.text)}
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
		s.text = s.fnKs + "." + s.fn.name + "(" + strings.Join(args, ", ") + ")"
	} else {
		s.col = p.ident()
		s.text = s.col
		for p.acceptPunct(".") {
			f := p.identAny()
			s.fields = append(s.fields, f)
			s.text += "." + f
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
	if depth > maxNesting {
		p.failf("CAST nesting too deep")
	}
	p.advance()
	p.advance()
}

// castType reads the "AS type)" that ends a cast, and returns the type.
func (p *parser) castType() string {
	p.expectKeyword("as")
	to := strings.ToLower(p.tok.text)
	if _, ok := simpleTypes[to]; !ok || p.tok.kind != tIdent {
		p.unexpected()
	}
	p.advance()
	p.expectPunct(")")
	return to
}

func (p *parser) batchStmt() statement {
	st := &batchStmt{}
	switch {
	case p.acceptKeyword("unlogged"):
		st.typ = 1
	case p.acceptKeyword("counter"):
		st.typ = 2
	case p.acceptKeyword("logged"):
	}
	p.expectKeyword("batch")
	var ttl *term
	p.using(&ttl, &st.ts)
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
			st.stmts = append(st.stmts, p.insertStmt())
		case "update":
			p.advance()
			st.stmts = append(st.stmts, p.updateStmt())
		case "delete":
			p.advance()
			st.stmts = append(st.stmts, p.deleteStmt())
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
		o := ordering{col: p.ident()}
		if p.acceptKeyword("desc") {
			o.desc = true
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
func (p *parser) createView() statement {
	st := &createViewStmt{options: map[string]optValue{}}
	st.ifNotExists = p.ifNotExists()
	st.name = p.tableName()
	p.expectKeyword("as")
	p.expectKeyword("select")
	if p.acceptPunct("*") {
		st.star = true
	} else {
		for {
			c := p.ident()
			if p.acceptKeyword("as") {
				st.aliased = c + " AS " + p.ident()
			}
			st.cols = append(st.cols, c)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectKeyword("from")
	st.base = p.tableName()
	if p.acceptKeyword("where") {
		for {
			if p.tok.kind == tIdent || p.tok.kind == tQuotedIdent {
				if n := p.peek(1); n.kind == tIdent && strings.EqualFold(n.text, "is") {
					c := p.ident()
					p.expectKeyword("is")
					p.expectKeyword("not")
					p.expectKeyword("null")
					st.notNull = append(st.notNull, c)
					if !p.acceptKeyword("and") {
						break
					}
					continue
				}
			}
			r := p.relation()
			st.others = append(st.others, r.col)
			if !p.acceptKeyword("and") {
				break
			}
		}
	}
	p.expectKeyword("primary")
	p.expectKeyword("key")
	st.pk, st.ck = p.primaryKey()
	if p.acceptKeyword("with") {
		for {
			if p.isKeyword("clustering") {
				st.order = p.clusteringOrder()
			} else {
				name := p.identAny()
				p.expectPunct("=")
				st.options[name] = p.option()
			}
			if !p.acceptKeyword("and") {
				break
			}
		}
	}
	return st
}
