package statements

import "strings"

// verb is what a statement does, from its first keyword.
type verb uint8

const (
	verbOther verb = iota
	verbSelect
	verbInsert
	verbUpdate
	verbDelete
	verbBatch
)

// shape is what the text of a statement says about it, read once when its entry is made.
type shape struct {
	verb           verb
	keyspace       string
	table          string
	lwt            bool // has an IF clause
	allowFiltering bool
	selectStar     bool
	system         bool // reads or writes a system keyspace
}

// words splits normalized CQL text into upper-cased words and single punctuation marks,
// skipping quoted strings; quoted identifiers keep their case, without the quotes.
func words(q string) []string {
	var out []string
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			j := i + 1
			for j < len(q) && q[j] != '"' {
				j++
			}
			out = append(out, q[i+1:min(j, len(q))])
			i = j + 1
		case c == '\'':
			j := i + 1
			for j < len(q) && q[j] != '\'' {
				j++
			}
			out = append(out, "?")
			i = j + 1
		case isWord(c):
			j := i
			for j < len(q) && isWord(q[j]) {
				j++
			}
			out = append(out, strings.ToUpper(q[i:j]))
			i = j
		default:
			out = append(out, q[i:i+1])
			i++
		}
		if len(out) > 4096 {
			break
		}
	}
	return out
}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// classify reads the shape of a statement's normalized text. Unqualified table names take
// keyspace "" (the connection's USE keyspace is not tracked).
func classify(q string) shape {
	w := words(q)
	var s shape
	if len(w) == 0 {
		return s
	}
	tableAt := -1
	switch w[0] {
	case "SELECT":
		s.verb = verbSelect
		s.selectStar = len(w) > 1 && w[1] == "*"
		tableAt = indexOf(w, "FROM") + 1
	case "INSERT":
		s.verb = verbInsert
		tableAt = indexOf(w, "INTO") + 1
	case "UPDATE":
		s.verb = verbUpdate
		tableAt = 1
	case "DELETE":
		s.verb = verbDelete
		tableAt = indexOf(w, "FROM") + 1
	case "BEGIN":
		s.verb = verbBatch
	}
	if tableAt > 0 && tableAt < len(w) {
		name := w[tableAt]
		if tableAt+2 < len(w) && w[tableAt+1] == "." {
			s.keyspace, s.table = strings.ToLower(name), strings.ToLower(w[tableAt+2])
		} else {
			s.table = strings.ToLower(name)
		}
	}
	for i, x := range w {
		switch x {
		case "IF":
			if s.verb != verbSelect {
				s.lwt = true
			}
		case "ALLOW":
			if i+1 < len(w) && w[i+1] == "FILTERING" {
				s.allowFiltering = true
			}
		}
	}
	s.system = isSystemKeyspace(s.keyspace)
	return s
}

func indexOf(w []string, x string) int {
	for i, y := range w {
		if y == x {
			return i
		}
	}
	return -1
}

// isSystemKeyspace reports whether ks is one of the node's own keyspaces, which drivers
// query on their control connection (system, system_schema, system_traces, ...).
func isSystemKeyspace(ks string) bool {
	return ks == "system" || strings.HasPrefix(ks, "system_")
}

// dmlOrSelect reports whether the statement reads or writes rows.
func (s shape) dmlOrSelect() bool { return s.verb >= verbSelect && s.verb <= verbDelete }

// Target returns the keyspace and table that a statement's text names, lower-cased; the
// keyspace is "" for an unqualified table.
func Target(text string) (keyspace, table string) {
	s := classify(text)
	return s.keyspace, s.table
}
