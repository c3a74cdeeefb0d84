package sidecar

import "bytes"

// The proxy rewrites the answers to queries on system.local, system.peers and
// system.peers_v2. It finds them from the statement's table reference, as the node would:
// the table after the FROM of a SELECT, qualified by its keyspace or by the connection's
// keyspace (set by USE). Text inside string literals, comments and quoted names never
// counts, so a user's query that mentions 'system.local' in a literal is left alone.

// kindUse marks a USE statement: its answer sets the connection's keyspace.
const kindUse rewriteKind = 0x40

// statementTable returns the system table that the CQL statement q reads (kindLocal,
// kindPeers, kindPeersV2), kindUse for a USE statement, or kindNone. inSystem says whether
// the connection's keyspace is system, for a table named without its keyspace. It does
// not allocate.
func statementTable(q []byte, inSystem bool) rewriteKind {
	s, e := nextToken(q, 0)
	switch {
	case equalWord(q[s:e], "use"):
		return kindUse
	case !equalWord(q[s:e], "select"):
		return kindNone
	}
	depth := 0
	for i := e; i < len(q); {
		s, e = nextToken(q, i)
		if s == e {
			return kindNone
		}
		i = e
		switch t := q[s:e]; {
		case t[0] == '(':
			depth++
		case t[0] == ')':
			depth--
		case depth == 0 && equalWord(t, "from"):
			return tableRef(q, e, inSystem)
		}
	}
	return kindNone
}

// tableRef reads the table reference at i: [keyspace '.'] table.
func tableRef(q []byte, i int, inSystem bool) rewriteKind {
	s, e := nextToken(q, i)
	first := q[s:e]
	ds, de := nextToken(q, e)
	if de-ds == 1 && q[ds] == '.' {
		ts, te := nextToken(q, de)
		if !nameIs(first, "system") {
			return kindNone
		}
		return systemTableName(q[ts:te])
	}
	if !inSystem {
		return kindNone
	}
	return systemTableName(first)
}

func systemTableName(t []byte) rewriteKind {
	switch {
	case nameIs(t, "local"):
		return kindLocal
	case nameIs(t, "peers"):
		return kindPeers
	case nameIs(t, "peers_v2"):
		return kindPeersV2
	}
	return kindNone
}

// nameIs reports whether the identifier token t names name (lower case): unquoted in any
// case, or quoted exactly.
func nameIs(t []byte, name string) bool {
	if len(t) >= 2 && t[0] == '"' {
		return string(t[1:len(t)-1]) == name
	}
	return equalWord(t, name)
}

// equalWord reports whether the token t is the word w (lower case), in any case.
func equalWord(t []byte, w string) bool {
	if len(t) != len(w) {
		return false
	}
	for i := range len(t) {
		c := t[i]
		if 'A' <= c && c <= 'Z' {
			c |= 0x20
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// nextToken returns the bounds of the first token at or after i, after spaces and comments
// (--, // and /* */): a word, a number, a quoted name ("…", with "" inside), a string
// ('…' with ” inside, or $$…$$), or one other byte. At the end of q it returns len(q) twice.
func nextToken(q []byte, i int) (int, int) {
	for i < len(q) {
		switch c := q[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && i+1 < len(q) && q[i+1] == '-', c == '/' && i+1 < len(q) && q[i+1] == '/':
			if j := bytes.IndexByte(q[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(q)
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			if j := bytes.Index(q[i+2:], []byte("*/")); j >= 0 {
				i += j + 4
			} else {
				i = len(q)
			}
		case c == '\'' || c == '"':
			return i, quotedEnd(q, i, c)
		case c == '$' && i+1 < len(q) && q[i+1] == '$':
			if j := bytes.Index(q[i+2:], []byte("$$")); j >= 0 {
				return i, i + j + 4
			}
			return i, len(q)
		case isIdent(c):
			j := i + 1
			for j < len(q) && isIdent(q[j]) {
				j++
			}
			return i, j
		default:
			return i, i + 1
		}
	}
	return len(q), len(q)
}

// quotedEnd returns the end of the literal opened by quote at i; a doubled quote inside
// does not close it.
func quotedEnd(q []byte, i int, quote byte) int {
	for j := i + 1; j < len(q); j++ {
		if q[j] == quote {
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}
