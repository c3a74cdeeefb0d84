// Package cqltext reads CQL text: it splits a statement into the tokens that Cassandra's
// lexer sees, and says what a name token names.
//
// It is the one reader of CQL text in tracecar: the redaction of literals, statement
// statistics, the tracing conventions, the proxy's search for system tables and the
// embedded node's parser all read through it, so that they agree on where a string, a
// comment or a name begins and ends.
//
// Reading is index-based and allocation-free: Next returns the bounds of one token in the
// text, a string or a byte slice, which is never copied. A token also says whether the
// text ends inside it or where it might go on, so that a caller holding only the start of
// a statement (a cut prefix of a compressed body) can tell what it knows from what lies
// beyond the cut.
//
// The functions are safe for concurrent use; a Scanner is not.
package cqltext

// Text is what the functions of this package read: a string or a byte slice. It is never
// copied or changed.
type Text interface{ ~string | ~[]byte }

// Kind is the kind of a token.
type Kind uint8

// The kinds of tokens. A Kind's zero value is EOF.
const (
	EOF         Kind = iota // the end of the text: no token
	Space                   // spaces, tabs, carriage returns and newlines
	Comment                 // -- or // to the end of the line, or /* … */
	Ident                   // an unquoted identifier or keyword: a letter or _, then letters, digits and _
	QuotedIdent             // "…", with "" for a quote inside
	String                  // '…', with '' for a quote inside, or $$…$$
	Integer                 // 42
	Float                   // 1.5, 2., 1e-3, 1.5E+3
	Duration                // 1h30m: an integer followed by letters (or a malformed number, 12abc)
	Blob                    // 0x then hex digits
	UUID                    // 123e4567-e89b-12d3-a456-426614174000
	Punct                   // one byte of anything else, or <=, >=, != (a byte of 0x80 or more takes its UTF-8 sequence)
)

var kindNames = [...]string{"EOF", "Space", "Comment", "Ident", "QuotedIdent", "String",
	"Integer", "Float", "Duration", "Blob", "UUID", "Punct"}

// String returns the kind's name, as in the constant.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(?)"
}

// Token is one token of a text: its kind and its bounds, text[Start:End]. It has four
// fields so that the compiler keeps it in registers.
type Token struct {
	Kind       Kind
	Start, End int
	flags      uint8
}

const (
	unterminated uint8 = 1 << iota
	open
)

// Unterminated reports whether the text ends inside the token: a string, quoted name or
// block comment without its closing quote, $$ or */. Its End is then the end of the text.
func (t Token) Unterminated() bool { return t.flags&unterminated != 0 }

// Open reports whether the end of the text decided the token's kind or end: a name, a
// number or spaces that stop there might go on, and 1.5e or a quote at the end might be the
// start of 1.5e3 or of a doubled quote. In a text that goes on, the token there may differ;
// one that is not Open is the same token in any longer text that starts with the same
// bytes (so are ")" and "/* c */" at the end). Unterminated tokens and EOF are always Open.
func (t Token) Open() bool { return t.flags&open != 0 }

// Next returns the token that starts at text[i], of any kind, Space and Comment included;
// its End is where the next one starts. At or beyond the end of the text it returns EOF,
// with Start and End at the end. It is the lexer: the other functions of this package
// read what it returns.
func Next[T Text](text T, i int) Token { return lex(text, i, false) }

// NextSignificant returns the first token at or after text[i] that is neither Space nor
// Comment, or EOF.
func NextSignificant[T Text](text T, i int) Token {
	t := lex(text, i, true)
	for t.Kind == Comment {
		t = lex(text, t.End, true)
	}
	return t
}

// lex is Next, after the spaces at text[i] when skip is set. It reads the commonest
// tokens, a name or keyword and one byte of punctuation, without a call (which would make
// every token pay for saving its registers), and leaves the others to lexOther.
func lex[T Text](text T, i int, skip bool) Token {
	n := len(text)
	if skip {
		for i < n && isSpace(text[i]) {
			i++
		}
	}
	if i >= n {
		return Token{Kind: EOF, Start: n, End: n, flags: open}
	}
	switch cl := classes[text[i]]; {
	case cl == 0:
		return Token{Kind: Punct, Start: i, End: i + 1}
	case cl&identStart != 0 && (cl&hex == 0 || i+8 < n && text[i+8] != '-'):
		// A name that cannot be a UUID: that needs a hex digit first and a '-' at i+8.
		j := i + 1
		for j < n && isIdentChar(text[j]) {
			j++
		}
		if j >= n {
			return Token{Kind: Ident, Start: i, End: j, flags: open}
		}
		return Token{Kind: Ident, Start: i, End: j}
	}
	return lexOther(text, i)
}

// lexOther reads the token at text[i], of any kind: lex's cases are among them, so that
// it is the whole lexer on its own.
func lexOther[T Text](text T, i int) Token {
	var t Token
	// need is the last index the token's kind and end were decided by; a need at or
	// beyond the text's length means that the end of the text decided them.
	var need int
	// The commonest first: names and keywords, numbers, spaces, plain punctuation.
	switch cl := classes[text[i]]; {
	case cl&(identStart|digit) != 0:
		t, need = lexWord(text, i)
	case cl == 0:
		t, need = Token{Kind: Punct, Start: i, End: i + 1}, i
	case cl&space != 0:
		j := i + 1
		for j < len(text) && isSpace(text[j]) {
			j++
		}
		t, need = Token{Kind: Space, Start: i, End: j}, j
	default:
		t, need = lexMarked(text, i)
	}
	if need >= len(text) {
		t.flags |= open
	}
	return t
}

// lexWord reads the token at text[i], which starts with a letter or a digit: a UUID, a
// number, or a name or keyword; need is as in lexOther.
func lexWord[T Text](text T, i int) (t Token, need int) {
	n, c := len(text), text[i]
	// A UUID has its first '-' at i+8, so only there (or when the text ends before it,
	// which then decides) is it worth reading one; elsewhere the name or number read
	// below looks at least as far as a UUID would have.
	if isHex(c) && (i+8 >= n || text[i+8] == '-') {
		var isUUID bool
		if isUUID, need = uuidAt(text, i); isUUID {
			return Token{Kind: UUID, Start: i, End: i + 36}, need
		}
	}
	if isDigit(c) {
		kind, end, k := number(text, i)
		return Token{Kind: kind, Start: i, End: end}, max(need, k)
	}
	j := i + 1
	for j < n && isIdentChar(text[j]) {
		j++
	}
	return Token{Kind: Ident, Start: i, End: j}, max(need, j)
}

// lexMarked reads the token at text[i], which starts with a punctuation byte: a comment,
// a string or quoted name (unterminated when the text ends first), an operator, or one
// byte of punctuation; need is as in lexOther.
func lexMarked[T Text](text T, i int) (t Token, need int) {
	n, c := len(text), text[i]
	t = Token{Kind: Punct, Start: i, End: i + 1}
	switch {
	case (c == '-' || c == '/') && i+1 < n && text[i+1] == c:
		j := i + 2
		for j < n && text[j] != '\n' && text[j] != '\r' {
			j++
		}
		return Token{Kind: Comment, Start: i, End: j}, j
	case c == '/' && i+1 < n && text[i+1] == '*':
		t.Kind = Comment
		t.End, need = closing(text, i+2, '*', '/')
		if need >= n {
			t.flags = unterminated
		}
		return t, need
	case c == '\'' || c == '"':
		t.Kind = String
		if c == '"' {
			t.Kind = QuotedIdent
		}
		var closed bool
		t.End, need, closed = quoted(text, i, c)
		if !closed {
			t.flags = unterminated
		}
		return t, need
	case c == '$' && i+1 < n && text[i+1] == '$':
		t.Kind = String
		t.End, need = closing(text, i+2, '$', '$')
		if need >= n {
			t.flags = unterminated
		}
		return t, need
	case c == '<' || c == '>' || c == '!':
		if i+1 < n && text[i+1] == '=' {
			t.End = i + 2
		}
		return t, i + 1
	case c == '-' || c == '/' || c == '$':
		// One byte, decided by the next: it might have begun a comment or a $$ string.
		return t, i + 1
	case c >= 0x80:
		j := i + 1
		for j < n && j < i+4 && text[j]&0xC0 == 0x80 {
			j++
		}
		t.End = j
		return t, j
	}
	return t, i
}

// closing returns the end of a token closed by the two bytes a, b, searched from text[j],
// and the last index read; unclosed, it runs to the end of the text.
func closing[T Text](text T, j int, a, b byte) (end, need int) {
	for ; j+1 < len(text); j++ {
		if text[j] == a && text[j+1] == b {
			return j + 2, j + 1
		}
	}
	return len(text), len(text)
}

// quoted returns the end of the token that quote opens at text[i], where a doubled quote
// stands for itself; the last index read, the one after the closing quote (which might
// have doubled it); and whether it was closed. Unclosed, it runs to the end of the text.
func quoted[T Text](text T, i int, quote byte) (end, need int, closed bool) {
	for j := i + 1; j < len(text); j++ {
		if text[j] != quote {
			continue
		}
		if j+1 < len(text) && text[j+1] == quote {
			j++
			continue
		}
		return j + 1, j + 1, true
	}
	return len(text), len(text), false
}

// number reads the Integer, Float or Duration at text[i], which is a digit, as the node
// does: digits, then a fraction (a dot, unless a letter follows it that does not begin an
// exponent, as in 1.foo), then an exponent; an integer followed by a letter is a duration
// with all the letters and digits that follow (1h30m). It returns the kind, the end and
// the last index read.
func number[T Text](text T, i int) (Kind, int, int) {
	n := len(text)
	if text[i] == '0' && i+1 < n && (text[i+1] == 'x' || text[i+1] == 'X') {
		j := i + 2
		for j < n && isHex(text[j]) {
			j++
		}
		return Blob, j, j
	}
	j := i + 1
	for j < n && isDigit(text[j]) {
		j++
	}
	kind, need := Integer, j
	if j < n && text[j] == '.' {
		need = j + 1
		if j+1 >= n || isDigit(text[j+1]) || text[j+1] == 'e' || text[j+1] == 'E' || !isIdentStart(text[j+1]) {
			kind = Float
			j++
			for j < n && isDigit(text[j]) {
				j++
			}
			need = j
		}
	}
	if j < n && (text[j] == 'e' || text[j] == 'E') {
		k := j + 1
		if k < n && (text[k] == '+' || text[k] == '-') {
			k++
		}
		need = max(need, k)
		if k < n && isDigit(text[k]) {
			for k < n && isDigit(text[k]) {
				k++
			}
			kind, j, need = Float, k, k
		}
	}
	if kind == Integer && j < n && isIdentStart(text[j]) {
		for j < n && isIdentChar(text[j]) {
			j++
		}
		return Duration, j, max(need, j)
	}
	return kind, j, need
}

// uuidAt reports whether a UUID starts at text[i], not followed by an identifier
// character, and the last index it read.
func uuidAt[T Text](text T, i int) (bool, int) {
	for k := range 36 {
		j := i + k
		if j >= len(text) {
			return false, j
		}
		switch k {
		case 8, 13, 18, 23:
			if text[j] != '-' {
				return false, j
			}
		default:
			if !isHex(text[j]) {
				return false, j
			}
		}
	}
	j := i + 36
	return j >= len(text) || !isIdentChar(text[j]), j
}

// The classes of a byte, for the lexer's loops.
const (
	space      uint8 = 1 << iota // CQL's white space, as Cassandra's lexer has it: space, tab, CR, LF
	identStart                   // a letter or _
	digit
	hex     // a hex digit
	special // a byte that may begin a token other than a name, a number or one byte of punctuation
)

var classes = func() (c [256]uint8) {
	for _, b := range []byte(" \t\r\n") {
		c[b] |= space
	}
	for b := 'a'; b <= 'z'; b++ {
		c[b] |= identStart
		c[b-'a'+'A'] |= identStart
	}
	c['_'] |= identStart
	for b := '0'; b <= '9'; b++ {
		c[b] |= digit | hex
	}
	for b := 'a'; b <= 'f'; b++ {
		c[b] |= hex
		c[b-'a'+'A'] |= hex
	}
	for _, b := range []byte("-/'\"$<>!") {
		c[b] |= special
	}
	for b := 0x80; b < 0x100; b++ {
		c[b] |= special
	}
	return c
}()

func isSpace(c byte) bool      { return classes[c]&space != 0 }
func isDigit(c byte) bool      { return classes[c]&digit != 0 }
func isHex(c byte) bool        { return classes[c]&hex != 0 }
func isIdentStart(c byte) bool { return classes[c]&identStart != 0 }
func isIdentChar(c byte) bool  { return classes[c]&(identStart|digit) != 0 }
