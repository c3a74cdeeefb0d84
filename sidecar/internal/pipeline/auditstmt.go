package pipeline

import (
	"encoding/hex"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/cql/cqltext"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// What the audit log says of a statement's text: its category, as ScyllaDB's audit
// classifies its statements, the keyspace and table it names, and its text redacted as the
// slow log redacts it (no literal, no password). The text is read through cqltext, the one
// reader of CQL text, and the table of a SELECT, INSERT, UPDATE, DELETE, TRUNCATE or USE
// through statements.Target, as statement statistics read it.

// auditStmt is what the audit log records of one statement text. It is immutable.
type auditStmt struct {
	query    string // the text it was made from, the cache's key
	cat      audit.Category
	keyspace string // "" when the statement names none: the connection's keyspace applies to a table
	table    string
	op       string // the text redacted (cql.NormalizeQuery, literals out)
	// batch are the statements of a BEGIN BATCH … APPLY BATCH text, each recorded on its
	// own (one record per child, as a BATCH request's).
	batch []auditStmt
}

// describeStmt reads what the audit log records of the statement text q.
func describeStmt(q string) auditStmt {
	s := auditStmt{query: q}
	s.cat, s.keyspace, s.table = classifyStmt(q)
	s.op, _ = cql.NormalizeQuery(q, false, tracing.DefaultMaxQueryLen)
	if s.cat == audit.DML && cqltext.IsKeyword(q, cqltext.NextSignificant(q, 0), "begin") {
		for _, child := range batchChildren(q) {
			s.batch = append(s.batch, describeStmt(child))
		}
	}
	return s
}

// classifyStmt returns the audit category of the statement text q and the keyspace and
// table it names. The categories are ScyllaDB's: SELECT is QUERY; INSERT, UPDATE, DELETE,
// BATCH, and as ScyllaDB (after Cassandra) USE and TRUNCATE, are DML; CREATE, ALTER and
// DROP of a keyspace, table, type, index, view, function, aggregate or trigger are DDL; the
// statements on roles and users, GRANT, REVOKE and LIST are DCL; those on service levels
// (ScyllaDB's CQL administration) are ADMIN. DESCRIBE and a text the node will refuse are
// QUERY.
func classifyStmt(q string) (audit.Category, string, string) {
	first := cqltext.NextSignificant(q, 0)
	kw := func(t cqltext.Token, w string) bool { return cqltext.IsKeyword(q, t, w) }
	switch {
	case kw(first, "select"):
		ks, table := statements.Target(q)
		return audit.QUERY, ks, table
	case kw(first, "insert"), kw(first, "update"), kw(first, "delete"), kw(first, "truncate"), kw(first, "use"):
		ks, table := statements.Target(q)
		return audit.DML, ks, table
	case kw(first, "begin"):
		return audit.DML, "", ""
	case kw(first, "grant"), kw(first, "revoke"):
		return audit.DCL, "", ""
	case kw(first, "list"):
		// ScyllaDB's LIST [ALL] [ATTACHED | EFFECTIVE] SERVICE LEVEL[S] are ADMIN, as the
		// rest of its service-level statements; LIST ROLES, USERS, PERMISSIONS are DCL.
		t := cqltext.NextSignificant(q, first.End)
		for kw(t, "all") || kw(t, "attached") || kw(t, "effective") {
			t = cqltext.NextSignificant(q, t.End)
		}
		if kw(t, "service") {
			return audit.ADMIN, "", ""
		}
		return audit.DCL, "", ""
	case kw(first, "attach"), kw(first, "detach"):
		return audit.ADMIN, "", ""
	case kw(first, "create"), kw(first, "alter"), kw(first, "drop"):
		return classifySchema(q, first.End)
	}
	return audit.QUERY, "", ""
}

// classifySchema reads a CREATE, ALTER or DROP from the word after it, at i.
func classifySchema(q string, i int) (audit.Category, string, string) {
	kw := func(t cqltext.Token, w string) bool { return cqltext.IsKeyword(q, t, w) }
	t := cqltext.NextSignificant(q, i)
	if kw(t, "or") { // CREATE OR REPLACE FUNCTION / AGGREGATE
		t = cqltext.NextSignificant(q, cqltext.NextSignificant(q, t.End).End)
	}
	if kw(t, "materialized") || kw(t, "custom") { // MATERIALIZED VIEW, CUSTOM INDEX
		t = cqltext.NextSignificant(q, t.End)
	}
	switch {
	case kw(t, "role"), kw(t, "user"):
		return audit.DCL, "", ""
	case kw(t, "service"):
		return audit.ADMIN, "", ""
	case kw(t, "keyspace"), kw(t, "schema"):
		_, ks := nameRef(q, skipIfExists(q, t.End))
		return audit.DDL, ks, ""
	case kw(t, "table"), kw(t, "columnfamily"), kw(t, "view"):
		ks, table := nameRef(q, skipIfExists(q, t.End))
		return audit.DDL, ks, table
	case kw(t, "type"), kw(t, "function"), kw(t, "aggregate"):
		ks, _ := nameRef(q, skipIfExists(q, t.End))
		return audit.DDL, ks, ""
	case kw(t, "index"), kw(t, "trigger"):
		// CREATE INDEX [name] ON [ks.]table, CREATE|DROP TRIGGER name ON [ks.]table, and
		// DROP INDEX [ks.]name, which names the keyspace alone.
		j := skipIfExists(q, t.End)
		for u := cqltext.NextSignificant(q, j); u.Kind != cqltext.EOF; u = cqltext.NextSignificant(q, u.End) {
			if kw(u, "on") {
				ks, table := nameRef(q, u.End)
				return audit.DDL, ks, table
			}
			if cqltext.IsPunct(q, u, "(") || cqltext.IsPunct(q, u, ";") {
				break
			}
		}
		ks, _ := nameRef(q, j)
		return audit.DDL, ks, ""
	}
	return audit.DDL, "", ""
}

// skipIfExists returns where the statement goes on after an IF [NOT] EXISTS at i, or i.
func skipIfExists(q string, i int) int {
	t := cqltext.NextSignificant(q, i)
	if !cqltext.IsKeyword(q, t, "if") {
		return i
	}
	t = cqltext.NextSignificant(q, t.End)
	if cqltext.IsKeyword(q, t, "not") {
		t = cqltext.NextSignificant(q, t.End)
	}
	return t.End
}

// nameRef reads [keyspace '.'] name at i, by CQL's rule for a name's case.
func nameRef(q string, i int) (ks, name string) {
	first := cqltext.NextSignificant(q, i)
	if first.Kind != cqltext.Ident && first.Kind != cqltext.QuotedIdent {
		return "", ""
	}
	dot := cqltext.NextSignificant(q, first.End)
	if !cqltext.IsPunct(q, dot, ".") {
		return "", cqltext.Name(q, first)
	}
	return cqltext.Name(q, first), cqltext.Name(q, cqltext.NextSignificant(q, dot.End))
}

// batchChildren splits the text of a BEGIN [UNLOGGED | COUNTER] BATCH … APPLY BATCH into its
// statements: each starts at an INSERT, UPDATE or DELETE outside parentheses (words that no
// statement of a batch holds unquoted elsewhere) and ends before the next one, its ';' or
// the APPLY.
func batchChildren(q string) []string {
	var out []string
	start, end, depth := -1, -1, 0
	flush := func() {
		if start >= 0 {
			out = append(out, strings.TrimSpace(q[start:end]))
		}
	}
	for t := cqltext.NextSignificant(q, 0); t.Kind != cqltext.EOF; t = cqltext.NextSignificant(q, t.End) {
		switch {
		case cqltext.IsPunct(q, t, "("):
			depth++
		case cqltext.IsPunct(q, t, ")"):
			depth--
		case depth != 0:
		case cqltext.IsKeyword(q, t, "insert"), cqltext.IsKeyword(q, t, "update"), cqltext.IsKeyword(q, t, "delete"):
			flush()
			start = t.Start
		case cqltext.IsPunct(q, t, ";"):
			flush()
			start = -1
			continue
		case cqltext.IsKeyword(q, t, "apply"):
			flush()
			return out
		}
		end = t.End
	}
	flush()
	return out
}

// auditStmts remember what the audit log records of the statement texts audited lately,
// as the slow log's cache remembers their normalized text: a workload repeats few
// statements, and reading one costs more than its record. It is a direct-mapped table of
// atomic slots, so that a reader never waits; texts longer than auditCacheMaxLen are read
// every time. It is safe for concurrent use.
type auditStmts struct {
	seed  maphash.Seed
	slots [auditCacheSlots]atomic.Pointer[auditStmt]
	// ids are the prepared statements' by id, with the keyspace of their metadata: an
	// EXECUTE costs a hash of its id rather than a registry lookup and a hash of its text.
	ids [auditCacheSlots]atomic.Pointer[preparedStmt]
	// clock pairs a wall time with the tracing.Now of the same moment, so that a record's
	// time comes from the clock read the request made anyway (a wall clock read costs
	// about 100 ns in a VM). It is read again once a second, so that a change of the wall
	// clock shows within one.
	clock atomic.Pointer[wallClock]
}

type wallClock struct {
	wall time.Time
	mono int64
}

// wallTime returns the wall time of now, a tracing.Now.
func (c *auditStmts) wallTime(now int64) time.Time {
	k := c.clock.Load()
	if k == nil || now-k.mono > int64(time.Second) {
		k = &wallClock{wall: time.Now(), mono: tracing.Now()}
		c.clock.Store(k)
	}
	return k.wall.Add(time.Duration(now - k.mono))
}

// preparedStmt is what the audit log records of the prepared statement id.
type preparedStmt struct {
	id string
	s  *auditStmt
}

const (
	auditCacheSlots  = 256
	auditCacheMaxLen = 4 << 10
)

// get returns what the audit log records of the text q.
func (c *auditStmts) get(q []byte) *auditStmt {
	if len(q) > auditCacheMaxLen {
		s := describeStmt(string(q))
		return &s
	}
	slot := &c.slots[maphash.Bytes(c.seed, q)%auditCacheSlots]
	if s := slot.Load(); s != nil && s.query == string(q) {
		return s
	}
	s := describeStmt(string(q))
	slot.Store(&s)
	return &s
}

// getString is get for a text the sidecar keeps, a prepared statement's.
func (c *auditStmts) getString(q string) *auditStmt {
	if len(q) > auditCacheMaxLen {
		s := describeStmt(q)
		return &s
	}
	slot := &c.slots[maphash.String(c.seed, q)%auditCacheSlots]
	if s := slot.Load(); s != nil && s.query == q {
		return s
	}
	s := describeStmt(q)
	slot.Store(&s)
	return &s
}

// prepared returns what is recorded of the prepared statement id: its text's, when the
// registry reg learnt it from its PREPARE, with the keyspace the node gave it, and true;
// otherwise "EXECUTE <hex id> /* prepared before this process: text unknown */", of
// category DML (the category a prepared statement has most often), with no keyspace or
// table, and false.
func (c *auditStmts) prepared(reg *tracing.Statements, id []byte) (*auditStmt, bool) {
	slot := &c.ids[maphash.Bytes(c.seed, id)%auditCacheSlots]
	if p := slot.Load(); p != nil && p.id == string(id) {
		return p.s, true
	}
	ps := reg.Lookup(id)
	if ps == nil || ps.Query == "" {
		return &auditStmt{cat: audit.DML, op: "EXECUTE " + hex.EncodeToString(id) + " " + unknownPrepared}, false
	}
	s := withKeyspace(c.getString(ps.Query), ps.Keyspace)
	slot.Store(&preparedStmt{id: string(id), s: s})
	return s, true
}

// withKeyspace returns s with the keyspace ks, the one a prepared statement's metadata
// names, for a table named without its keyspace.
func withKeyspace(s *auditStmt, ks string) *auditStmt {
	if s.keyspace != "" || s.table == "" || ks == "" {
		return s
	}
	k := *s
	k.keyspace = ks
	return &k
}

// unknownPrepared ends the operation of an EXECUTE whose text the sidecar does not know.
const unknownPrepared = "/* prepared before this process: text unknown */"
