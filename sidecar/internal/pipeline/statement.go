package pipeline

import (
	"github.com/tracecar/tracecar/internal/cql/cqltext"
)

// The proxy rewrites the answers to queries on system.local, system.peers and
// system.peers_v2. It finds them from the statement's table reference, as the node would:
// the table after the FROM of a SELECT, qualified by its keyspace or by the connection's
// keyspace (set by USE). Text inside string literals, comments and quoted names never
// counts, so a user's query that mentions 'system.local' in a literal is left alone.

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
// is cut, nowhere (-1) otherwise. The tokens are cqltext's; on a cut q, an Open one is
// not known.
func statementScan(q []byte, inSystem bool, open int, sc scan) (rewriteKind, bool, scan) {
	cut := open >= 0
	if !sc.selected {
		t := cqltext.NextSignificant(q, 0)
		switch {
		case cut && t.Open():
			return kindNone, false, sc
		case cqltext.IsKeyword(q, t, "use"):
			return kindUse, true, sc
		case !cqltext.IsKeyword(q, t, "select"):
			return kindNone, true, sc
		}
		sc = scan{at: t.End, selected: true}
	}
	if !sc.from {
		i, depth := sc.at, sc.depth
		for {
			t := cqltext.NextSignificant(q, i)
			switch {
			case cut && t.Open():
				return kindNone, false, scan{at: i, depth: depth, selected: true}
			case t.Kind == cqltext.EOF:
				return kindNone, true, sc
			}
			i = t.End
			if cqltext.IsPunct(q, t, "(") {
				depth++
			} else if cqltext.IsPunct(q, t, ")") {
				depth--
			} else if depth == 0 && cqltext.IsKeyword(q, t, "from") {
				break
			}
		}
		sc = scan{at: i, selected: true, from: true}
	}
	k, known := tableRef(q, sc.at, inSystem, open >= 0)
	return k, known, sc
}

// tableRef reads the table reference at i: [keyspace '.'] table. On a cut q, it is not
// known while one of its tokens is Open.
func tableRef(q []byte, i int, inSystem, cut bool) (rewriteKind, bool) {
	first := cqltext.NextSignificant(q, i)
	dot := cqltext.NextSignificant(q, first.End)
	if cut && (first.Open() || dot.Open()) {
		return kindNone, false
	}
	if cqltext.IsPunct(q, dot, ".") {
		if !cqltext.NameIs(q, first, "system") {
			return kindNone, true
		}
		table := cqltext.NextSignificant(q, dot.End)
		if cut && table.Open() {
			return kindNone, false
		}
		return systemTableToken(q, table), true
	}
	if !inSystem {
		return kindNone, true
	}
	return systemTableToken(q, first), true
}

// systemTableToken returns the system table that the name token t names, by CQL's rule
// for a name's case.
func systemTableToken(q []byte, t cqltext.Token) rewriteKind {
	switch {
	case cqltext.NameIs(q, t, "local"):
		return kindLocal
	case cqltext.NameIs(q, t, "peers"):
		return kindPeers
	case cqltext.NameIs(q, t, "peers_v2"):
		return kindPeersV2
	}
	return kindNone
}

// systemTable returns the system table named name, as a result's metadata gives it.
func systemTable(name string) rewriteKind {
	switch name {
	case "local":
		return kindLocal
	case "peers":
		return kindPeers
	case "peers_v2":
		return kindPeersV2
	}
	return kindNone
}

// Prepared statements are found by their PREPARE; a sidecar that did not see it (it was
// restarted, or the driver prepared through another one) learns the statement from its
// first EXECUTE instead: it asks for the result metadata (clearing skip_metadata, which a
// driver handles as the protocol says), and the keyspace and table there tell whether the
// statement reads a system table. Each id is probed once; the ids found not to are kept in
// a bounded set.
