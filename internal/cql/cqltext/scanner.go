package cqltext

// Scanner reads the tokens of a text in order, as Next does, Space and Comment included,
// except that it joins a minus sign to the number that follows it when the minus follows
// no operand: in "c > -1.5" the constant is -1.5, while "a-1" and "f(x) -1" have a
// minus. This is the reading that a constant's redaction needs; the node's parser, which
// has its own rule for a unary minus, reads with Next.
//
// The zero Scanner reads an empty text. A Scanner is not safe for concurrent use.
type Scanner[T Text] struct {
	text T
	pos  int
	prev Token // the last token that is not Space or Comment
}

// NewScanner returns a Scanner of text, at its start.
func NewScanner[T Text](text T) Scanner[T] { return Scanner[T]{text: text} }

// Next returns the next token, or EOF at the end of the text.
func (s *Scanner[T]) Next() Token {
	t := Next(s.text, s.pos)
	if IsPunct(s.text, t, "-") && s.signAllowed() {
		if n := Next(s.text, t.End); n.Kind == Integer || n.Kind == Float || n.Kind == Duration {
			n.Start = t.Start
			t = n
		}
	}
	s.pos = t.End
	if t.Kind != Space && t.Kind != Comment && t.Kind != EOF {
		s.prev = t
	}
	return t
}

// signAllowed reports whether a minus here is a sign: it follows no operand (a name, a
// constant, a bind marker or a closing bracket).
func (s *Scanner[T]) signAllowed() bool {
	p := s.prev
	switch p.Kind {
	case EOF:
		return true
	case Punct:
		return !IsPunct(s.text, p, ")") && !IsPunct(s.text, p, "]") && !IsPunct(s.text, p, "}") && !IsPunct(s.text, p, "?")
	}
	return false
}
