package cql

import (
	"strings"
	"unicode/utf8"

	"github.com/tracecar/tracecar/internal/cql/cqltext"
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

// redactor reads q once, through cqltext's Scanner, and writes the normalized text to out.
type redactor struct {
	q    string
	keep bool
	out  []byte

	// The two previous significant tokens (not space or comment), for the PASSWORD rule.
	prev, prev2 cqltext.Token
	// role is set when the statement is CREATE or ALTER of a ROLE or USER.
	role   bool
	nsig   int           // significant tokens seen
	first  cqltext.Token // the first significant token
	groups []group
}

// group is an open [ or { whose content may collapse into one "?".
type group struct {
	at       int  // length of out before the opening bracket
	close    byte // the matching closing bracket
	literals bool // everything inside so far is a literal or punctuation
}

func (r *redactor) run() {
	s := cqltext.NewScanner(r.q)
	for t := s.Next(); t.Kind != cqltext.EOF; t = s.Next() {
		r.emit(t)
	}
}

// emit writes one token, redacted when it must be, and tracks the collection groups.
func (r *redactor) emit(t cqltext.Token) {
	text := r.q[t.Start:t.End]
	switch {
	case t.Kind == cqltext.Space || t.Kind == cqltext.Comment:
		r.out = append(r.out, text...)
		return
	case t.Kind == cqltext.String:
		if !r.keep || r.role || r.afterPassword() {
			r.out = append(r.out, '?')
		} else {
			r.out = append(r.out, text...)
		}
	case cqltext.Constant(r.q, t):
		if r.keep {
			r.out = append(r.out, text...)
		} else {
			r.out = append(r.out, '?')
		}
	case t.Kind == cqltext.Ident || t.Kind == cqltext.QuotedIdent:
		r.out = append(r.out, text...)
		if len(r.groups) > 0 {
			r.groups[len(r.groups)-1].literals = false
		}
	default:
		r.punct(text)
	}
	r.nsig++
	switch r.nsig {
	case 1:
		r.first = t
	case 2:
		r.role = (cqltext.IsKeyword(r.q, r.first, "create") || cqltext.IsKeyword(r.q, r.first, "alter")) &&
			(cqltext.IsKeyword(r.q, t, "role") || cqltext.IsKeyword(r.q, t, "user"))
	}
	if cqltext.IsPunct(r.q, t, ";") {
		r.nsig, r.first, r.role = 0, cqltext.Token{}, false // a new statement (cqlsh-style text)
	}
	r.prev2, r.prev = r.prev, t
}

// punct writes one punctuation token, opening or closing a collection group.
func (r *redactor) punct(p string) {
	switch p {
	case "[", "{":
		close := byte(']')
		if p == "{" {
			close = '}'
		}
		r.groups = append(r.groups, group{at: len(r.out), close: close, literals: true})
		r.out = append(r.out, p...)
	case "]", "}":
		n := len(r.groups)
		if n == 0 || r.groups[n-1].close != p[0] {
			r.out = append(r.out, p...)
			return
		}
		g := r.groups[n-1]
		r.groups = r.groups[:n-1]
		if g.literals && !r.keep {
			// Only literals inside: the whole collection is one value.
			r.out = append(r.out[:g.at], '?')
			return
		}
		r.out = append(r.out, p...)
		if !g.literals && n > 1 {
			r.groups[n-2].literals = false
		}
	default:
		r.out = append(r.out, p...)
	}
}

// afterPassword reports whether a string literal here is a password: it follows PASSWORD
// or a 'password' key, possibly with = or : between.
func (r *redactor) afterPassword() bool {
	p := r.prev
	if cqltext.IsPunct(r.q, p, "=") || cqltext.IsPunct(r.q, p, ":") {
		p = r.prev2
	}
	switch p.Kind {
	case cqltext.Ident:
		return cqltext.IsKeyword(r.q, p, "password")
	case cqltext.String:
		return strings.EqualFold(cqltext.StringValue(r.q, p), "password")
	}
	return false
}

// CarriesSecret reports whether the statement text q carries what NormalizeQuery treats as
// a secret whatever keepLiterals says, given as a literal or bound: it is a CREATE or ALTER
// of a ROLE or USER (all of whose strings NormalizeQuery redacts, a password bound as ? or
// :name included), or it has a string literal or bind marker after PASSWORD or a
// 'password' map key. The tracer asks the node for no trace of such a statement: the
// node's trace would keep the secret in plain text.
func CarriesSecret[T cqltext.Text](q T) bool {
	s := cqltext.NewScanner(q)
	var first, prev, prev2 cqltext.Token
	nsig := 0
	for t := s.Next(); t.Kind != cqltext.EOF; t = s.Next() {
		if t.Kind == cqltext.Space || t.Kind == cqltext.Comment {
			continue
		}
		nsig++
		switch {
		case nsig == 1:
			first = t
		case nsig == 2 && (cqltext.IsKeyword(q, first, "create") || cqltext.IsKeyword(q, first, "alter")) &&
			(cqltext.IsKeyword(q, t, "role") || cqltext.IsKeyword(q, t, "user")):
			return true
		}
		if t.Kind == cqltext.String || cqltext.IsPunct(q, t, "?") || cqltext.IsPunct(q, t, ":") {
			p := prev
			if cqltext.IsPunct(q, p, "=") || cqltext.IsPunct(q, p, ":") {
				p = prev2
			}
			switch {
			case p.Kind == cqltext.Ident && cqltext.IsKeyword(q, p, "password"):
				return true
			case p.Kind == cqltext.String && p.End-p.Start <= len("$$password$$") &&
				strings.EqualFold(cqltext.StringValue(q, p), "password"):
				return true
			}
		}
		if cqltext.IsPunct(q, t, ";") {
			nsig = 0
		}
		prev2, prev = prev, t
	}
	return false
}
