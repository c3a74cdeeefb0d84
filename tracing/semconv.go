package tracing

import (
	"net/netip"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/cql/cqltext"
	"github.com/tracecar/tracecar/tracing/statements"
)

// semconv is what the OpenTelemetry database conventions for Cassandra
// (semantic-conventions docs/db/cassandra.md) say about a session.
type semconv struct {
	operation  string // db.operation.name: SELECT, INSERT, BATCH, BATCH INSERT…
	namespace  string // db.namespace: the keyspace, when known
	collection string // db.collection.name: the table, when there is one
	summary    string // db.query.summary: "SELECT users"
	batchSize  int    // db.operation.batch.size, or -1 when not a batch
}

// describe reads the conventions' fields from s: the keyspace and table from the query
// text (ks.table), or the keyspace from the prepared statement's metadata.
// Target returns the keyspace and table that the session's statement reads or writes, as
// its span names them (db.namespace, db.collection.name): from ks.table in its text, else
// the keyspace of its prepared statement or request; "" where unknown. A BATCH's is its
// first statement's keyspace, and its table when all its statements share it.
func (s *Session) Target() (keyspace, table string) {
	sc := describe(s)
	return sc.namespace, sc.collection
}

func describe(s *Session) semconv {
	sc := semconv{batchSize: -1}
	if s.Command == "BATCH" {
		var ops, targets []string
		for i := 0; ; i++ {
			q, ok := s.Parameters[indexed("query", i)]
			if !ok {
				if _, unknown := s.Parameters[indexed("prepared_id", i)]; !unknown {
					break
				}
			}
			op, ks, table := parseTarget(q)
			if ks == "" {
				ks = s.Parameters[indexed("keyspace", i)]
			}
			ops = append(ops, op)
			targets = append(targets, ks+"."+table)
			if i == 0 {
				sc.namespace, sc.collection = ks, table
			}
		}
		sc.batchSize = len(ops)
		sc.operation, sc.summary = "BATCH", "BATCH"
		if len(ops) > 0 && same(ops) && ops[0] != "" {
			sc.operation += " " + ops[0]
			if same(targets) && sc.collection != "" {
				sc.summary = "BATCH " + ops[0] + " " + sc.collection
			}
		}
		if !same(targets) {
			sc.collection = ""
		}
		return sc
	}
	op, ks, table := parseTarget(s.Parameters["query"])
	if ks == "" {
		ks = s.Parameters["keyspace"]
	}
	sc.namespace, sc.collection = ks, table
	switch {
	case s.Command == "PREPARE":
		sc.operation = "PREPARE"
	case op != "":
		sc.operation = op
	default:
		sc.operation = s.Command
	}
	sc.summary = sc.operation
	if table != "" {
		sc.summary += " " + table
	}
	return sc
}

func same(xs []string) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// spanName is "{db.operation.name} {db.namespace}.{db.collection.name}", with what is
// known of the target.
func (sc semconv) spanName() string {
	switch {
	case sc.namespace != "" && sc.collection != "":
		return sc.operation + " " + sc.namespace + "." + sc.collection
	case sc.collection != "":
		return sc.operation + " " + sc.collection
	case sc.namespace != "":
		return sc.operation + " " + sc.namespace
	}
	return sc.operation
}

// attributes returns the span's attributes: the conventions' names, the pre-v1.26 names too
// when dup is set, and the rest under "tracecar.".
func (sc semconv) attributes(s *Session, dup bool) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 24)
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	str("db.system.name", "cassandra")
	str("db.namespace", sc.namespace)
	str("db.collection.name", sc.collection)
	str("db.operation.name", sc.operation)
	text := redactLiterals(statement(s))
	str("db.query.text", text)
	str("db.query.summary", sc.summary)
	if sc.batchSize >= 0 {
		attrs = append(attrs, attribute.Int("db.operation.batch.size", sc.batchSize))
	}
	cl := strings.ToLower(s.Parameters["consistency_level"])
	str("cassandra.consistency.level", cl)
	pageSize, _ := strconv.Atoi(s.Parameters["page_size"])
	if pageSize != 0 {
		attrs = append(attrs, attribute.Int("cassandra.page.size", pageSize))
	}
	if n, err := strconv.Atoi(s.Parameters["returned_rows"]); err == nil {
		attrs = append(attrs, attribute.Int("db.response.returned_rows", n))
	}
	if code, ok := errorCode(s.Error); ok {
		str("db.response.status_code", code)
		str("error.type", code)
	} else if s.Error != "" {
		str("error.type", "tracecar")
	}
	if ap, err := netip.ParseAddrPort(s.Coordinator); err == nil {
		str("server.address", ap.Addr().String())
		attrs = append(attrs, attribute.Int("server.port", int(ap.Port())))
	}
	if ap, err := netip.ParseAddrPort(s.Client); err == nil {
		str("network.peer.address", ap.Addr().String())
		attrs = append(attrs, attribute.Int("network.peer.port", int(ap.Port())))
	}
	if dup {
		str("db.system", "cassandra")
		str("db.name", sc.namespace)
		str("db.cassandra.table", sc.collection)
		str("db.operation", sc.operation)
		str("db.statement", text)
		str("db.cassandra.consistency_level", cl)
		if pageSize != 0 {
			attrs = append(attrs, attribute.Int("db.cassandra.page_size", pageSize))
		}
		if ap, err := netip.ParseAddrPort(s.Coordinator); err == nil {
			str("net.peer.name", ap.Addr().String())
			attrs = append(attrs, attribute.Int("net.peer.port", int(ap.Port())))
		}
	}
	str("tracecar.session_id", s.ID)
	str("tracecar.mode", s.Mode)
	str("tracecar.command", s.Command)
	str("tracecar.request", s.Request)
	str("tracecar.client", s.Client)
	str("db.user", s.Username) // the SASL PLAIN username; the current conventions have no user attribute
	str("tracecar.coordinator", s.Coordinator)
	attrs = append(attrs, attribute.Int64("tracecar.duration_us", s.DurationUS))
	str("tracecar.error", s.Error)
	for k, v := range s.Parameters {
		switch k {
		case "query", "consistency_level", "page_size", "keyspace", "returned_rows":
		default:
			if strings.HasPrefix(k, "query[") || strings.HasPrefix(k, "keyspace[") {
				continue
			}
			attrs = append(attrs, attribute.String("tracecar.param."+k, v))
		}
	}
	return attrs
}

// errorCode returns the CQL error code of a session error, "name (0x2200): message", as
// the decimal string the conventions use for db.response.status_code.
func errorCode(e string) (string, bool) {
	_, rest, ok := strings.Cut(e, "(0x")
	if !ok {
		return "", false
	}
	hex, _, ok := strings.Cut(rest, ")")
	if !ok {
		return "", false
	}
	n, err := strconv.ParseInt(hex, 16, 32)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}

// parseTarget reads the operation and the table a CQL statement acts upon, and its
// keyspace when the table is qualified: "SELECT v FROM ks.t WHERE …" gives SELECT, ks, t.
// The keyspace and table are statements.Target's, so that a span names them as the
// statement statistics and the trace filter do, by CQL's rule for a name's case (the
// conventions ask for the names as the database knows them: KS.T is ks.t, "Ks"."T" is
// Ks.T). A statement it does not know gives its first word and no table.
func parseTarget(q string) (op, keyspace, table string) {
	if first := cqltext.NextSignificant(q, 0); first.Kind == cqltext.Ident {
		op = strings.ToUpper(q[first.Start:first.End])
	}
	keyspace, table = statements.Target(q)
	return op, keyspace, table
}

// redactLiterals replaces the literal values of a CQL statement with "?", as the
// conventions ask of db.query.text when it is not parameterized: the project's one
// redactor, cql.NormalizeQuery, with literals dropped whatever --trace-query-literals says
// (a span leaves the host), passwords always redacted, and no length bound beyond the
// session's own.
func redactLiterals(q string) string {
	text, _ := cql.NormalizeQuery(q, false, 0)
	return text
}

// statement returns the CQL text of s: its query, or its batch's queries joined by "; "
// ("?" for a statement this sidecar never saw prepared).
func statement(s *Session) string {
	if q, ok := s.Parameters["query"]; ok {
		return q
	}
	var qs []string
	for i := 0; ; i++ {
		q, ok := s.Parameters[indexed("query", i)]
		if !ok {
			if _, unknown := s.Parameters[indexed("prepared_id", i)]; !unknown {
				break
			}
			q = "?"
		}
		qs = append(qs, q)
	}
	return strings.Join(qs, "; ")
}
