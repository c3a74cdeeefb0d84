package grammar

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql/cqltext"
)

// tokKind classifies a lexical token of CQL.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tQuotedIdent
	tString
	tInt
	tFloat
	tHex
	tUUID
	tDuration
	tMarker      // ?
	tNamedMarker // :name
	tPunct       // one of ( ) , ; . * = < > <= >= != [ ] { } : + -
	tBad         // an unexpected character or an unterminated literal
)

// token is one lexical token. text holds the identifier (as written), the decoded string
// literal, the number's text, or the punctuation.
type token struct {
	kind tokKind
	text string
	line int
	col  int // 0-based column, as in Cassandra's messages
}

// lexer splits a query into tokens. It never fails: bad input yields a tBad token that
// the parser reports as a syntax error.
//
// The tokens are cqltext's, the one reader of CQL text in tracecar; the lexer only adapts
// them to the parser: it keeps the line and column of each (cqltext has only offsets),
// decodes strings and quoted names, makes ? and :name markers and tells the punctuation
// the grammar has from the characters it has not (tBad).
type lexer struct {
	src       string
	pos       int
	line      int
	lineStart int
}

// moveTo moves the lexer to src[to], counting the lines it passes.
func (l *lexer) moveTo(to int) {
	s := l.src[l.pos:to]
	if n := strings.Count(s, "\n"); n > 0 {
		l.line += n
		l.lineStart = l.pos + strings.LastIndexByte(s, '\n') + 1
	}
	l.pos = to
}

func (l *lexer) next() token {
	ct := cqltext.NextSignificant(l.src, l.pos)
	l.moveTo(ct.Start)
	t := token{line: l.line + 1, col: l.pos - l.lineStart}
	l.moveTo(ct.End)
	text := l.src[ct.Start:ct.End]
	switch ct.Kind {
	case cqltext.EOF:
		t.kind = tEOF
	case cqltext.Ident:
		t.kind, t.text = tIdent, text
	case cqltext.QuotedIdent:
		t.kind, t.text = tQuotedIdent, cqltext.Name(l.src, ct)
	case cqltext.String:
		t.kind, t.text = tString, cqltext.StringValue(l.src, ct)
	case cqltext.Integer:
		t.kind, t.text = tInt, text
	case cqltext.Float:
		t.kind, t.text = tFloat, text
	case cqltext.Duration:
		t.kind, t.text = tDuration, text
	case cqltext.Blob:
		t.kind, t.text = tHex, text
	case cqltext.UUID:
		t.kind, t.text = tUUID, text
	default:
		t.kind, t.text = l.punct(ct, text)
	}
	if ct.Unterminated() {
		// An unterminated string or quoted name; an unterminated comment is skipped
		// and gives EOF.
		t.kind, t.text = tBad, text
	}
	return t
}

// punct returns the kind of the punctuation token ct, and its text.
func (l *lexer) punct(ct cqltext.Token, text string) (tokKind, string) {
	switch text {
	case "?":
		return tMarker, text
	case ":":
		// :name, a named bind marker, with the name by CQL's rule for its case.
		n := cqltext.Next(l.src, ct.End)
		if n.Kind != cqltext.Ident && n.Kind != cqltext.QuotedIdent {
			return tPunct, text
		}
		l.moveTo(n.End)
		if n.Unterminated() {
			return tBad, text
		}
		return tNamedMarker, cqltext.Name(l.src, n)
	case "(", ")", ",", ";", ".", "*", "=", "[", "]", "{", "}", "+", "-", "<", ">", "<=", ">=", "!=":
		return tPunct, text
	}
	return tBad, text
}

// maxNesting bounds the recursion of nested collection literals and types.
const MaxNesting = 64
