package cql

import (
	"strings"
	"unicode/utf8"
)

// TruncatedMark ends a query text that NormalizeQuery cut at its maximum length.
const TruncatedMark = "…"

// NormalizeQuery returns the text of a CQL statement as it may be recorded in a trace, and
// whether it was truncated.
//
// Unless keepLiterals is set, every literal value becomes "?", as in the "normalized" query
// text of the ScyllaDB monitoring stack: strings ('…' with ” escapes, and $$…$$), numbers,
// blobs (0x…), UUIDs, durations, booleans, NaN and Infinity; a list, set or map literal made
// only of literals ([1, 2], {'a': 1}) becomes a single "?". Identifiers, quoted identifiers,
// keywords, comments, bind markers and punctuation stay as they are.
//
// Passwords are redacted whatever keepLiterals says: in CREATE or ALTER ROLE and USER
// statements every string literal becomes "?", and in any statement a string literal that
// follows PASSWORD (PASSWORD = '…', HASHED PASSWORD = '…', WITH PASSWORD '…') or a
// 'password' map key ({'password': '…'}) does too.
//
// A maxLen above zero bounds the result's length in bytes, cut at a character boundary and
// followed by TruncatedMark; the result is then reported as truncated. Redaction happens
// before the cut, so a cut never exposes part of a literal. Input that ends inside a literal
// (a frame kept truncated) has that literal redacted to its end.
//
// NormalizeQuery never fails: any byte sequence gives a result. It is safe for concurrent
// use.
func NormalizeQuery(q string, keepLiterals bool, maxLen int) (string, bool) {
	truncated := false
	// Redaction never lengthens the text, so only a prefix of the input can reach the
	// result; bounding it bounds the work done on a huge statement.
	if maxLen > 0 && len(q) > 2*maxLen+16 {
		q = q[:2*maxLen+16]
		truncated = true
	}
	r := redactor{q: q, keep: keepLiterals, out: make([]byte, 0, len(q))}
	r.run()
	out := string(r.out)
	if maxLen > 0 && len(out) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut]
		truncated = true
	}
	if truncated {
		out += TruncatedMark
	}
	return out, truncated
}

// tokenKind is the kind of one lexical token of CQL text.
type tokenKind uint8

const (
	tokSpace   tokenKind = iota // whitespace
	tokComment                  // -- or // to the end of the line, or /* … */
	tokString                   // '…' or $$…$$, possibly unterminated
	tokQIdent                   // "…", a quoted identifier
	tokIdent                    // an identifier or keyword
	tokLiteral                  // a number, blob, UUID, duration, boolean, NaN or Infinity
	tokPunct                    // one byte of anything else
)

// redactor lexes q once and writes the normalized text to out.
type redactor struct {
	q    string
	keep bool
	out  []byte

	// The two previous significant tokens (not space or comment), for the PASSWORD rule.
	prev, prev2 token
	// role is set when the statement is CREATE or ALTER of a ROLE or USER.
	role   bool
	nsig   int    // significant tokens seen
	first  string // the first significant token, if an identifier
	groups []group
}

type token struct {
	kind tokenKind
	text string
}

// group is an open [ or { whose content may collapse into one "?".
type group struct {
	at       int  // length of out before the opening bracket
	close    byte // the matching closing bracket
	literals bool // everything inside so far is a literal or punctuation
}

func (r *redactor) run() {
	for i := 0; i < len(r.q); {
		kind, n := r.lex(i)
		text := r.q[i : i+n]
		i += n
		r.emit(token{kind, text})
	}
}

// emit writes one token, redacted when it must be, and tracks the collection groups.
func (r *redactor) emit(t token) {
	switch t.kind {
	case tokSpace, tokComment:
		r.out = append(r.out, t.text...)
		return
	case tokString:
		if !r.keep || r.role || r.afterPassword() {
			r.out = append(r.out, '?')
		} else {
			r.out = append(r.out, t.text...)
		}
	case tokLiteral:
		if r.keep {
			r.out = append(r.out, t.text...)
		} else {
			r.out = append(r.out, '?')
		}
	case tokIdent, tokQIdent:
		r.out = append(r.out, t.text...)
		if len(r.groups) > 0 {
			r.groups[len(r.groups)-1].literals = false
		}
	case tokPunct:
		r.punct(t.text[0])
	}
	r.nsig++
	if t.kind == tokIdent {
		switch r.nsig {
		case 1:
			r.first = t.text
		case 2:
			r.role = (strings.EqualFold(r.first, "create") || strings.EqualFold(r.first, "alter")) &&
				(strings.EqualFold(t.text, "role") || strings.EqualFold(t.text, "user"))
		}
	}
	if t.kind == tokPunct && t.text == ";" {
		r.nsig, r.first, r.role = 0, "", false // a new statement (cqlsh-style text)
	}
	r.prev2, r.prev = r.prev, t
}

// punct writes one punctuation byte, opening or closing a collection group.
func (r *redactor) punct(b byte) {
	switch b {
	case '[', '{':
		close := byte(']')
		if b == '{' {
			close = '}'
		}
		r.groups = append(r.groups, group{at: len(r.out), close: close, literals: true})
		r.out = append(r.out, b)
	case ']', '}':
		n := len(r.groups)
		if n == 0 || r.groups[n-1].close != b {
			r.out = append(r.out, b)
			return
		}
		g := r.groups[n-1]
		r.groups = r.groups[:n-1]
		if g.literals && !r.keep {
			// Only literals inside: the whole collection is one value.
			r.out = append(r.out[:g.at], '?')
			return
		}
		r.out = append(r.out, b)
		if !g.literals && n > 1 {
			r.groups[n-2].literals = false
		}
	default:
		r.out = append(r.out, b)
	}
}

// afterPassword reports whether a string literal here is a password: it follows PASSWORD
// or a 'password' key, possibly with = or : between.
func (r *redactor) afterPassword() bool {
	p := r.prev
	if p.kind == tokPunct && (p.text == "=" || p.text == ":") {
		p = r.prev2
	}
	switch p.kind {
	case tokIdent:
		return strings.EqualFold(p.text, "password")
	case tokString:
		return strings.EqualFold(strings.Trim(p.text, "'$"), "password")
	}
	return false
}

// lex returns the kind and length of the token at q[i:].
func (r *redactor) lex(i int) (tokenKind, int) {
	q := r.q
	c := q[i]
	switch {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		j := i + 1
		for j < len(q) && (q[j] == ' ' || q[j] == '\t' || q[j] == '\n' || q[j] == '\r' || q[j] == '\f' || q[j] == '\v') {
			j++
		}
		return tokSpace, j - i
	case c == '-' && at(q, i+1) == '-', c == '/' && at(q, i+1) == '/':
		j := strings.IndexByte(q[i:], '\n')
		if j < 0 {
			return tokComment, len(q) - i
		}
		return tokComment, j
	case c == '/' && at(q, i+1) == '*':
		j := strings.Index(q[i+2:], "*/")
		if j < 0 {
			return tokComment, len(q) - i
		}
		return tokComment, j + 4
	case c == '\'':
		return tokString, quoted(q, i, '\'')
	case c == '"':
		return tokQIdent, quoted(q, i, '"')
	case c == '$' && at(q, i+1) == '$':
		j := strings.Index(q[i+2:], "$$")
		if j < 0 {
			return tokString, len(q) - i
		}
		return tokString, j + 4
	}
	if n := uuidLen(q[i:]); n > 0 {
		return tokLiteral, n
	}
	switch {
	case isDigit(c), c == '-' && isDigit(at(q, i+1)) && r.signAllowed(),
		c == '.' && isDigit(at(q, i+1)):
		return tokLiteral, numberLen(q, i)
	case isIdentStart(c):
		j := i + 1
		for j < len(q) && isIdentPart(q[j]) {
			j++
		}
		if w := q[i:j]; strings.EqualFold(w, "true") || strings.EqualFold(w, "false") ||
			strings.EqualFold(w, "nan") || strings.EqualFold(w, "infinity") {
			return tokLiteral, j - i
		}
		return tokIdent, j - i
	}
	return tokPunct, 1
}

// signAllowed reports whether a '-' here starts a negative number rather than being an
// operator: it follows no operand.
func (r *redactor) signAllowed() bool {
	switch r.prev.kind {
	case tokIdent, tokQIdent, tokLiteral, tokString:
		return false
	case tokPunct:
		return r.prev.text != ")" && r.prev.text != "]" && r.prev.text != "}" && r.prev.text != "?"
	}
	return true
}

// quoted returns the length of the quoted token at q[i:], whose quote doubles as its own
// escape; an unterminated one runs to the end.
func quoted(q string, i int, quote byte) int {
	for j := i + 1; j < len(q); j++ {
		if q[j] != quote {
			continue
		}
		if at(q, j+1) == quote {
			j++
			continue
		}
		return j + 1 - i
	}
	return len(q) - i
}

// numberLen returns the length of the number, blob or duration at q[i:]: an optional sign,
// then letters, digits, dots and exponent signs (1e-3, 0xCAFE, 1h30m, 1.5).
func numberLen(q string, i int) int {
	j := i + 1
	for j < len(q) {
		c := q[j]
		switch {
		case isIdentPart(c) || c == '.':
			j++
		case (c == '-' || c == '+') && (q[j-1] == 'e' || q[j-1] == 'E') && isDigit(at(q, j+1)) && !strings.HasPrefix(q[i:], "0x") && !strings.HasPrefix(q[i:], "0X"):
			j++
		default:
			return j - i
		}
	}
	return j - i
}

// uuidLen returns 36 when q starts with a UUID not followed by an identifier character.
func uuidLen(q string) int {
	if len(q) < 36 || len(q) > 36 && isIdentPart(q[36]) {
		return 0
	}
	for k := 0; k < 36; k++ {
		switch k {
		case 8, 13, 18, 23:
			if q[k] != '-' {
				return 0
			}
		default:
			if !isHex(q[k]) {
				return 0
			}
		}
	}
	return 36
}

func at(q string, i int) byte {
	if i < len(q) {
		return q[i]
	}
	return 0
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isHex(c byte) bool        { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }
