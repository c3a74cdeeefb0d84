package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

type parser struct {
	lex     lexer
	tok     token
	peeked  []token
	markers []string
	depth   int
}

// ddlParser parses the statements that change the schema (CREATE, ALTER, DROP of
// keyspaces, tables, views, types, indexes and functions).
type ddlParser struct{ *parser }

// dmlParser parses the statements that read and write data (SELECT, INSERT, UPDATE,
// DELETE, BATCH), their selectors, relations and USING clauses.
type dmlParser struct{ *parser }

// authParser parses the statements of roles and permissions.
type authParser struct{ *parser }

// syntaxError is the parser's panic-free failure value.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

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

// valueDepth reads a term at nesting depth, which is bounded: a bind marker, a constant,
// a collection, tuple or user type literal, or a function call.
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
		if v := p.punctValue(depth); v != nil {
			return v
		}
	case tIdent:
		if v := p.wordValue(depth); v != nil {
			return v
		}
	}
	p.unexpected()
	return nil
}

// punctValue reads a term that starts with punctuation: a negative number or duration,
// a list, a set, a map, a user type literal or a tuple. It returns nil, having read
// nothing, when the punctuation starts no term.
func (p *parser) punctValue(depth int) *Term {
	switch p.tok.text {
	case "-":
		return p.negativeValue()
	case "[":
		p.advance()
		l := &Term{Kind: TermList}
		if !p.acceptPunct("]") {
			l.Elems = p.valuesDepth(depth + 1)
			p.expectPunct("]")
		}
		return l
	case "{":
		if n := p.peek(1); (n.kind == tQuotedIdent || n.kind == tIdent && !literalWord(n.text)) &&
			p.peek(2).kind == tPunct && p.peek(2).text == ":" {
			return p.udtLiteral(depth)
		}
		return p.setOrMap(depth)
	case "(":
		p.advance()
		tu := &Term{Kind: TermTuple, Elems: p.valuesDepth(depth + 1)}
		p.expectPunct(")")
		return tu
	}
	return nil
}

// negativeValue reads a minus sign and the number, NaN, Infinity or duration it negates.
// It returns nil, having read nothing, when what follows the sign is none of them.
func (p *parser) negativeValue() *Term {
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
	return nil
}

// setOrMap reads {} (an empty map), {k: v, ...} or {e, ...}, their elements at depth.
func (p *parser) setOrMap(depth int) *Term {
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
}

// wordValue reads a term that starts with a word: true, false, null, NaN, Infinity, an
// ISO 8601 duration, or a function call, its arguments at depth. It returns nil, having
// read nothing, when the word starts no term.
func (p *parser) wordValue(depth int) *Term {
	t := p.tok
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
			f.Elems = p.valuesDepth(depth + 1)
			p.expectPunct(")")
		}
		return f
	}
	return nil
}

// valuesDepth reads one or more terms at depth, separated by commas.
func (p *parser) valuesDepth(depth int) []*Term {
	var ts []*Term
	for {
		ts = append(ts, p.valueDepth(depth))
		if !p.acceptPunct(",") {
			return ts
		}
	}
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

func (p *parser) limitValue() *Term {
	switch p.tok.kind {
	case tInt, tMarker, tNamedMarker:
		return p.value()
	}
	p.unexpected()
	return nil
}

func upper(s string) string { return strings.ToUpper(s) }

// atoiLimited parses a non-negative decimal int that fits in an int32.
func atoiLimited(s string) (int, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int(n), err == nil
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
