package statements

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql/cqltext"
)

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
	// fullScan: a SELECT that restricts no partition key, so that the node reads every
	// partition of the table: no WHERE (SELECT count(*) FROM t among them), or ALLOW
	// FILTERING.
	fullScan bool
	system   bool // reads or writes a system keyspace
	// ScyllaDB's extensions: USING TIMEOUT (on any statement, with TTL and TIMESTAMP or
	// not) and BYPASS CACHE (a SELECT that leaves the row cache alone).
	usingTimeout, bypassCache bool
}

// classify reads the shape of a statement's text through cqltext: its verb, the table it
// names (see Target), and the words that make anti-patterns (IF, ALLOW FILTERING, SELECT
// *). Unqualified table names take keyspace "" (the connection's USE keyspace is not
// tracked). It reads the normalized text of an entry as well as a statement's own.
func classify(q string) shape {
	var s shape
	first := cqltext.NextSignificant(q, 0)
	kw := func(t cqltext.Token, w string) bool { return cqltext.IsKeyword(q, t, w) }
	switch {
	case kw(first, "select"):
		s.verb = verbSelect
	case kw(first, "insert"):
		s.verb = verbInsert
	case kw(first, "update"):
		s.verb = verbUpdate
	case kw(first, "delete"):
		s.verb = verbDelete
	case kw(first, "begin"):
		s.verb = verbBatch
	}
	// The table reference follows UPDATE, TRUNCATE [TABLE] and USE at once, and the
	// first FROM or INTO outside parentheses of the others.
	refAt := "" // the keyword the table reference follows
	switch {
	case s.verb == verbSelect, s.verb == verbDelete:
		refAt = "from"
	case s.verb == verbInsert:
		refAt = "into"
	case s.verb == verbUpdate:
		s.keyspace, s.table = tableRef(q, first.End)
	case kw(first, "truncate"):
		i := first.End
		if t := cqltext.NextSignificant(q, i); kw(t, "table") && isName(cqltext.NextSignificant(q, t.End)) {
			i = t.End
		}
		s.keyspace, s.table = tableRef(q, i)
	case kw(first, "use"):
		s.keyspace = cqltext.Name(q, cqltext.NextSignificant(q, first.End))
	}
	second := cqltext.NextSignificant(q, first.End)
	s.selectStar = s.verb == verbSelect && cqltext.IsPunct(q, second, "*")
	depth := 0
	where := false
	prev := first
	for t := second; t.Kind != cqltext.EOF; prev, t = t, cqltext.NextSignificant(q, t.End) {
		switch {
		case cqltext.IsPunct(q, t, "("):
			depth++
		case cqltext.IsPunct(q, t, ")"):
			depth--
		case kw(t, "if"):
			s.lwt = s.lwt || s.verb != verbSelect
		case kw(t, "filtering") && kw(prev, "allow"):
			s.allowFiltering = true
		case depth == 0 && kw(t, "timeout") && (kw(prev, "using") || kw(prev, "and")):
			s.usingTimeout = true
		case depth == 0 && kw(t, "cache") && kw(prev, "bypass"):
			s.bypassCache = true
		case depth == 0 && kw(t, "where"):
			where = true
		case refAt != "" && depth == 0 && kw(t, refAt):
			s.keyspace, s.table = tableRef(q, t.End)
			refAt = ""
		}
	}
	s.fullScan = s.verb == verbSelect && s.table != "" && (!where || s.allowFiltering)
	s.system = IsSystemKeyspace(s.keyspace)
	return s
}

// tableRef reads the table reference at q[i:], [keyspace '.'] table, and returns its
// names by CQL's rule for their case.
func tableRef(q string, i int) (keyspace, table string) {
	name := cqltext.NextSignificant(q, i)
	if !isName(name) {
		return "", ""
	}
	dot := cqltext.NextSignificant(q, name.End)
	if !cqltext.IsPunct(q, dot, ".") {
		return "", cqltext.Name(q, name)
	}
	return cqltext.Name(q, name), cqltext.Name(q, cqltext.NextSignificant(q, dot.End))
}

func isName(t cqltext.Token) bool { return t.Kind == cqltext.Ident || t.Kind == cqltext.QuotedIdent }

// IsSystemKeyspace reports whether ks is one of the node's own keyspaces, which drivers
// query on their control connection (system, system_schema, system_auth, system_traces,
// system_views, ...): the queries that views of the application's statements leave out
// unless asked. It is safe for concurrent use.
func IsSystemKeyspace(ks string) bool {
	return ks == "system" || strings.HasPrefix(ks, "system_")
}

// dmlOrSelect reports whether the statement reads or writes rows.
func (s shape) dmlOrSelect() bool { return s.verb >= verbSelect && s.verb <= verbDelete }

// Target returns the keyspace and the table that a statement's text names: the table
// after the FROM of a SELECT or DELETE, the INTO of an INSERT, UPDATE or TRUNCATE [TABLE],
// qualified by its keyspace or not, and the keyspace of a USE. Both follow CQL's rule for
// a name's case, as the node does: an unquoted name is lower-cased, a quoted one is as
// written, without its quotes. The keyspace is "" for an unqualified table, and both are
// "" for any other statement. It is safe for concurrent use.
func Target(text string) (keyspace, table string) {
	s := classify(text)
	return s.keyspace, s.table
}
