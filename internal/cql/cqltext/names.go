package cqltext

import "strings"

// CQL's rule for names: an unquoted name is folded to lower case, so that Users, USERS and
// users are one table, while a quoted name keeps the case it is written in ("Users" is
// another table), with "" standing for a quote inside.

// Name returns the name that an Ident or QuotedIdent token stands for, by CQL's rule:
// unquoted, folded to lower case; quoted, as written without its quotes and with ""
// read as ". It returns "" for a token of any other kind. For a string text it allocates
// only when the name must change.
func Name[T Text](text T, t Token) string {
	switch t.Kind {
	case Ident:
		return strings.ToLower(string(text[t.Start:t.End]))
	case QuotedIdent:
		return unquote(text, t, '"')
	}
	return ""
}

// NameIs reports whether the Ident or QuotedIdent token t names name, given as CQL's rule
// leaves it (lower case for a name that is meant unquoted): an unquoted token in any case
// names its lower case, a quoted one exactly its content. An unterminated quoted name
// names nothing. It does not allocate.
func NameIs[T Text](text T, t Token, name string) bool {
	switch t.Kind {
	case Ident:
		if t.End-t.Start != len(name) {
			return false
		}
		for k := range len(name) {
			if lower(text[t.Start+k]) != name[k] {
				return false
			}
		}
		return true
	case QuotedIdent:
		if t.Unterminated() {
			return false
		}
		k := 0
		for j := t.Start + 1; j < t.End-1; j++ {
			if k == len(name) || text[j] != name[k] {
				return false
			}
			if text[j] == '"' {
				j++ // the second of a doubled quote
			}
			k++
		}
		return k == len(name)
	}
	return false
}

// IsKeyword reports whether t is the unquoted word kw, in any case: keywords are not case
// sensitive, and a quoted name is never a keyword. kw is made of letters, digits and _.
// It does not allocate.
func IsKeyword[T Text](text T, t Token, kw string) bool {
	if t.Kind != Ident || t.End-t.Start != len(kw) {
		return false
	}
	for k := range len(kw) {
		// Among letters, digits and _, setting the 0x20 bit folds case and nothing else.
		if text[t.Start+k]|0x20 != kw[k]|0x20 {
			return false
		}
	}
	return true
}

// IsPunct reports whether t is the punctuation p, such as "(" or "<=". It does not
// allocate.
func IsPunct[T Text](text T, t Token, p string) bool {
	return t.Kind == Punct && t.End-t.Start == len(p) && string(text[t.Start:t.End]) == p
}

// Constant reports whether t is a constant of CQL's grammar: a string, a number, a
// duration, a blob, a UUID, or one of the words true, false, NaN and Infinity. (A minus
// before a number is a separate token for Next; a Scanner joins it to the number.)
func Constant[T Text](text T, t Token) bool {
	switch t.Kind {
	case String, Integer, Float, Duration, Blob, UUID:
		return true
	case Ident:
		return IsKeyword(text, t, "true") || IsKeyword(text, t, "false") ||
			IsKeyword(text, t, "nan") || IsKeyword(text, t, "infinity")
	}
	return false
}

// StringValue returns the value of a String token: its content without the quotes, a
// doubled quote read as one in a '…' string; a $$…$$ string is taken as it is. It returns
// "" for a token of any other kind.
func StringValue[T Text](text T, t Token) string {
	if t.Kind != String {
		return ""
	}
	if text[t.Start] == '$' {
		end := t.End
		if !t.Unterminated() {
			end -= 2
		}
		return string(text[t.Start+2 : end])
	}
	return unquote(text, t, '\'')
}

// unquote returns the content of a quoted token, a doubled quote read as one.
func unquote[T Text](text T, t Token, quote byte) string {
	end := t.End
	if !t.Unterminated() {
		end--
	}
	s := string(text[t.Start+1 : end])
	if strings.IndexByte(s, quote) < 0 {
		return s
	}
	return strings.ReplaceAll(s, string([]byte{quote, quote}), string(quote))
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
