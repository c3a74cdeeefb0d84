package sidecar

import (
	"bytes"
	"sync"

	"github.com/tracecar/tracecar/internal/cql"
)

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
	k, _, _ := statementScan(q, inSystem, -1, scan{})
	return k
}

// scan is how far statementScan read a statement: the scan of a longer q that starts with
// the same bytes goes on from there. The zero scan is the start of a statement.
type scan struct {
	at       int  // the end of the last token read
	depth    int  // parentheses open at at
	selected bool // the first word was SELECT
	from     bool // the last token was the FROM: the table reference follows
}

// statementStart is statementTable on q, which is only the start of the statement when
// cut. Every token that ends before the end of q is the one the whole statement has there,
// so the answer is known unless it needs a token that reaches the end of a cut q (which may
// go on beyond it) or lies beyond it: then known is false, and the scan of the whole
// statement can go on from sc (statementScan).
func statementStart(q []byte, inSystem, cut bool) (k rewriteKind, known bool, sc scan) {
	open := -1
	if cut {
		open = len(q)
	}
	return statementScan(q, inSystem, open, scan{})
}

// statementScan reads q from sc. open is where a token may go on beyond q: its end when q
// is cut, nowhere (-1) otherwise.
func statementScan(q []byte, inSystem bool, open int, sc scan) (rewriteKind, bool, scan) {
	if !sc.selected {
		s, e := nextToken(q, 0)
		switch {
		case e == open:
			return kindNone, false, sc
		case equalWord(q[s:e], "use"):
			return kindUse, true, sc
		case !equalWord(q[s:e], "select"):
			return kindNone, true, sc
		}
		sc = scan{at: e, selected: true}
	}
	if !sc.from {
		i, depth := sc.at, sc.depth
		for {
			s, e := nextToken(q, i)
			switch {
			case e == open:
				return kindNone, false, scan{at: i, depth: depth, selected: true}
			case s == e:
				return kindNone, true, sc
			}
			i = e
			if t := q[s:e]; t[0] == '(' {
				depth++
			} else if t[0] == ')' {
				depth--
			} else if depth == 0 && equalWord(t, "from") {
				break
			}
		}
		sc = scan{at: i, selected: true, from: true}
	}
	k, known := tableRef(q, sc.at, inSystem, open)
	return k, known, sc
}

// tableRef reads the table reference at i: [keyspace '.'] table. open is as in
// statementStart.
func tableRef(q []byte, i int, inSystem bool, open int) (rewriteKind, bool) {
	s, e := nextToken(q, i)
	first := q[s:e]
	ds, de := nextToken(q, e)
	if de == open {
		return kindNone, false
	}
	if de-ds == 1 && q[ds] == '.' {
		if !nameIs(first, "system") {
			return kindNone, true
		}
		ts, te := nextToken(q, de)
		if te == open {
			return kindNone, false
		}
		return systemTableName(q[ts:te]), true
	}
	if !inSystem {
		return kindNone, true
	}
	return systemTableName(first), true
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

// Prepared statements are found by their PREPARE; a sidecar that did not see it (it was
// restarted, or the driver prepared through another one) learns the statement from its
// first EXECUTE instead: it asks for the result metadata (clearing skip_metadata, which a
// driver handles as the protocol says), and the keyspace and table there tell whether the
// statement reads a system table. Each id is probed once; the ids found not to are kept in
// a bounded set.

// kindProbe marks an EXECUTE of a statement id not seen before.
const kindProbe rewriteKind = 0x80

// maxCheckedStmts bounds the ids remembered as not reading a system table; beyond it, new
// ids are not probed.
const maxCheckedStmts = 1 << 16

// checkedStmts is the set of prepared ids known not to read a system table.
type checkedStmts struct {
	mu  sync.RWMutex
	ids map[string]struct{}
}

func (s *checkedStmts) has(id []byte) (found, full bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, found = s.ids[string(id)]
	return found, len(s.ids) >= maxCheckedStmts
}

func (s *checkedStmts) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = make(map[string]struct{})
	}
	if len(s.ids) < maxCheckedStmts {
		s.ids[id] = struct{}{}
	}
}

// probeResult learns from the response to a probed EXECUTE whether its statement reads a
// system table, and rewrites the rows when it does.
func (c *conn) probeResult(m cql.Message, req inflight) bool {
	switch m := m.(type) {
	case cql.RowsResult:
		cols := m.Metadata.Columns
		kind := kindNone
		// Without metadata (a node that ignored the request for it) nothing can be
		// learnt; the id is not probed again, so that the hot path does not pay twice.
		if m.Metadata.Flags&cql.RowsNoMetadata == 0 && len(cols) > 0 && cols[0].Keyspace == "system" {
			kind = systemTableName([]byte(cols[0].Table))
		}
		if kind == kindNone {
			c.p.checked.add(req.probe)
			return false
		}
		c.p.rememberStmt([]byte(req.probe), kind, cols)
		return c.rewriteRows(kind, cols, m.Rows)
	case cql.VoidResult:
		c.p.checked.add(req.probe)
	}
	return false
}
