package node

import (
	"strings"
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
type lexer struct {
	src       string
	pos       int
	line      int
	lineStart int
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// matchUUID reports whether s starts with a UUID literal of 36 characters.
func matchUUID(s string) bool {
	if len(s) < 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHexDigit(s[i]) {
				return false
			}
		}
	}
	return len(s) == 36 || !isIdentChar(s[36])
}

func (l *lexer) skipSpace() {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.pos++
			l.line++
			l.lineStart = l.pos
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			l.pos++
		case c == '-' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '-',
			c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '/':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '*':
			end := strings.Index(l.src[l.pos+2:], "*/")
			if end < 0 {
				l.pos = len(l.src)
				return
			}
			for _, ch := range []byte(l.src[l.pos : l.pos+2+end+2]) {
				if ch == '\n' {
					l.line++
				}
			}
			l.pos += 2 + end + 2
			if i := strings.LastIndexByte(l.src[:l.pos], '\n'); i >= 0 {
				l.lineStart = i + 1
			}
		default:
			return
		}
	}
}

func (l *lexer) next() token {
	l.skipSpace()
	t := token{line: l.line + 1, col: l.pos - l.lineStart}
	if l.pos >= len(l.src) {
		t.kind = tEOF
		return t
	}
	s := l.src[l.pos:]
	c := s[0]
	switch {
	case (isDigit(c) || isHexDigit(c)) && matchUUID(s):
		t.kind, t.text = tUUID, s[:36]
		l.pos += 36
	case c == '0' && len(s) > 1 && (s[1] == 'x' || s[1] == 'X'):
		i := 2
		for i < len(s) && isHexDigit(s[i]) {
			i++
		}
		t.kind, t.text = tHex, s[:i]
		l.pos += i
	case isDigit(c):
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		kind := tInt
		if i < len(s) && s[i] == '.' && (i+1 >= len(s) || isDigit(s[i+1]) || s[i+1] == 'e' || s[i+1] == 'E' || !isIdentStart(s[i+1])) {
			kind = tFloat
			i++
			for i < len(s) && isDigit(s[i]) {
				i++
			}
		}
		if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
			j := i + 1
			if j < len(s) && (s[j] == '+' || s[j] == '-') {
				j++
			}
			if j < len(s) && isDigit(s[j]) {
				for j < len(s) && isDigit(s[j]) {
					j++
				}
				kind, i = tFloat, j
			}
		}
		if kind == tInt && i < len(s) && isIdentStart(s[i]) {
			// A duration such as 1h30m, or garbage such as 12abc.
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			t.kind, t.text = tDuration, s[:j]
			l.pos += j
			return t
		}
		t.kind, t.text = kind, s[:i]
		l.pos += i
	case isIdentStart(c):
		i := 1
		for i < len(s) && isIdentChar(s[i]) {
			i++
		}
		t.kind, t.text = tIdent, s[:i]
		l.pos += i
	case c == '"':
		var b strings.Builder
		i := 1
		for {
			if i >= len(s) {
				t.kind, t.text = tBad, s
				l.pos = len(l.src)
				return t
			}
			if s[i] == '"' {
				if i+1 < len(s) && s[i+1] == '"' {
					b.WriteByte('"')
					i += 2
					continue
				}
				i++
				break
			}
			b.WriteByte(s[i])
			i++
		}
		t.kind, t.text = tQuotedIdent, b.String()
		l.pos += i
	case c == '\'':
		i := 1
		simple := true
		for {
			if i >= len(s) {
				t.kind, t.text = tBad, s
				l.pos = len(l.src)
				return t
			}
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					simple = false
					i += 2
					continue
				}
				i++
				break
			}
			i++
		}
		body := s[1 : i-1]
		if !simple {
			body = strings.ReplaceAll(body, "''", "'")
		}
		l.countLines(s[:i])
		t.kind, t.text = tString, body
		l.pos += i
	case c == '$' && len(s) > 1 && s[1] == '$':
		end := strings.Index(s[2:], "$$")
		if end < 0 {
			t.kind, t.text = tBad, s
			l.pos = len(l.src)
			return t
		}
		l.countLines(s[:end+4])
		t.kind, t.text = tString, s[2:2+end]
		l.pos += end + 4
	case c == '?':
		t.kind, t.text = tMarker, "?"
		l.pos++
	case c == ':' && len(s) > 1 && (isIdentStart(s[1]) || s[1] == '"'):
		l.pos++
		n := l.next()
		if n.kind != tIdent && n.kind != tQuotedIdent {
			t.kind, t.text = tBad, ":"
			return t
		}
		name := n.text
		if n.kind == tIdent {
			name = strings.ToLower(name)
		}
		t.kind, t.text = tNamedMarker, name
	case c == '<' || c == '>' || c == '!':
		if len(s) > 1 && s[1] == '=' {
			t.kind, t.text = tPunct, s[:2]
			l.pos += 2
		} else if c == '!' {
			t.kind, t.text = tBad, "!"
			l.pos++
		} else {
			t.kind, t.text = tPunct, s[:1]
			l.pos++
		}
	case strings.IndexByte("(),;.*=[]{}:+-", c) >= 0:
		t.kind, t.text = tPunct, s[:1]
		l.pos++
	default:
		// Take one whole UTF-8 sequence so the message quotes a real character.
		n := 1
		for n < len(s) && n < 4 && s[n]&0xC0 == 0x80 {
			n++
		}
		t.kind, t.text = tBad, s[:n]
		l.pos += n
	}
	return t
}

func (l *lexer) countLines(s string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			l.line++
			l.lineStart = l.pos + i + 1
		}
	}
}
