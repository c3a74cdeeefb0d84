package engine

import (
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

func TestParse(t *testing.T) {
	tests := []struct {
		query   string
		kind    string
		markers []string
	}{
		{"SELECT * FROM t", "SELECT", nil},
		{"select a, b as c, count(*), writetime(a), ttl(b), token(k) from ks.t where k in ? and c >= :lo limit 10 allow filtering;", "SELECT", []string{"", "lo"}},
		{"INSERT INTO t (a, \"B\") VALUES (?, [1, 2]) IF NOT EXISTS USING TTL 5 AND TIMESTAMP ?", "INSERT", []string{"", ""}},
		{"UPDATE t USING TTL ? SET a = a + {1: 'x'}, b[?] = ?, c = [1] + c WHERE k = ? IF EXISTS", "UPDATE", []string{"", "", "", ""}},
		{"DELETE a, m['k'] FROM t USING TIMESTAMP 5 WHERE k = 1 AND c > 2", "DELETE", nil},
		{"BEGIN UNLOGGED BATCH INSERT INTO t (a) VALUES (?); DELETE FROM t WHERE a = ?; APPLY BATCH", "BATCH", []string{"", ""}},
		{"CREATE KEYSPACE IF NOT EXISTS k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = false", "CREATE KEYSPACE", nil},
		{"CREATE TABLE IF NOT EXISTS k.t (a int, b frozen<map<text, list<int>>>, c tuple<int, text>, PRIMARY KEY ((a), b)) WITH CLUSTERING ORDER BY (b DESC) AND compaction = {'class': 'LeveledCompactionStrategy'} AND comment = 'x'", "CREATE TABLE", nil},
		{"DROP TABLE IF EXISTS t", "DROP TABLE", nil},
		{"DROP KEYSPACE k", "DROP KEYSPACE", nil},
		{"TRUNCATE TABLE t", "TRUNCATE", nil},
		{"USE \"MyKs\"", "USE", nil},
		{"CREATE INDEX ON t (a)", "CREATE INDEX", nil},
		{"CREATE MATERIALIZED VIEW v AS SELECT * FROM t WHERE a IS NOT NULL PRIMARY KEY (a)", "CREATE MATERIALIZED VIEW", nil},
		{"INSERT INTO t (a, b, c, d, e) VALUES (-1.5e3, 0xff, 123e4567-e89b-12d3-a456-426614174000, NaN, -Infinity)", "INSERT", nil},
		{"INSERT INTO t (a) VALUES ($$it's$$)", "INSERT", nil},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			ps, err := grammar.Parse(tc.query)
			if err != nil {
				t.Fatalf("got %v", err)
			}
			if got := ps.Stmt.StmtName(); got != tc.kind {
				t.Errorf("got %s; want %s", got, tc.kind)
			}
			if strings.Join(ps.Markers, ",") != strings.Join(tc.markers, ",") || len(ps.Markers) != len(tc.markers) {
				t.Errorf("markers: got %q; want %q", ps.Markers, tc.markers)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ query, want string }{
		{"", "line 1:0 mismatched input '<EOF>'"},
		{"SELECT", "line 1:6 mismatched input '<EOF>'"},
		{"SELECT * FROM t WHERE", "line 1:21 mismatched input '<EOF>'"},
		{"SELECT * FROM t t2", "line 1:16 extraneous input 't2' expecting EOF"},
		{"INSERT INTO t (a) VALUES ('x)", "no viable alternative at character"},
		{"SELECT * FROM select", "no viable alternative at input 'select'"},
		{"SELECT * FROM t\nWHERE a == 1", "line 2:9 no viable alternative at input '='"},
		{strings.Repeat("[", 200), "no viable alternative"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			_, err := grammar.Parse(tc.query)
			ce := cqlErr(err)
			if ce == nil || ce.Code != cql.ErrCodeSyntax || !strings.Contains(ce.Message, tc.want) {
				t.Errorf("got %v; want a syntax error containing %q", err, tc.want)
			}
		})
	}
}

func TestLiterals(t *testing.T) {
	tests := []struct {
		typ, lit string
		want     string // rendered, or "!" for an error
	}{
		{"int", "-2147483648", "-2147483648"},
		{"int", "2147483648", "!"},
		{"tinyint", "128", "!"},
		{"bigint", "9223372036854775807", "9223372036854775807"},
		{"varint", "-129", "-129"},
		{"varint", "255", "255"},
		{"decimal", "-0.001", "-0.001"},
		{"decimal", "1e3", "1000"},
		{"double", "NaN", "NaN"},
		{"float", "1", "1"},
		{"boolean", "false", "false"},
		{"text", "'it''s'", "it's"},
		{"ascii", "'é'", "!"},
		{"blob", "0x", "0x"},
		{"blob", "0xabc", "!"},
		{"inet", "'::1'", "::1"},
		{"inet", "'nope'", "!"},
		{"timestamp", "'2011-02-03T04:05:00.123+0100'", "2011-02-03T03:05:00.123Z"},
		{"timestamp", "'2011-02-03'", "2011-02-03T00:00:00Z"},
		{"timestamp", "1299038700000", "2011-03-02T04:05:00Z"},
		{"date", "'1970-01-01'", "2147483648"},
		{"time", "'23:59:59.999999999'", "86399999999999"},
		{"time", "'24:00:00'", "!"},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
		{"list<int>", "[1, 2]", "[1 2]"},
		{"set<int>", "{3, 1, 3}", "[1 3]"},
		{"set<int>", "{}", "[]"},
		{"map<text, int>", "{'b': 1, 'a': 2}", "{a:2 b:1}"},
		{"map<text, int>", "[1]", "!"},
		{"int", "null", "null"},
	}
	for _, tc := range tests {
		t.Run(tc.typ+" "+tc.lit, func(t *testing.T) {
			ps, err := grammar.Parse("INSERT INTO t (k, v) VALUES (0, " + tc.lit + ")")
			if err != nil {
				t.Fatal(err)
			}
			tp, err := grammar.Parse("CREATE TABLE t (v " + tc.typ + " PRIMARY KEY)")
			if err != nil {
				t.Fatal(err)
			}
			ct, err := storage.Resolver{Ks: "ks"}.Resolve(tp.Stmt.(*grammar.CreateTableStmt).Cols[0].Ref)
			if err != nil {
				t.Fatal(err)
			}
			typ := ct.Info
			b, err := cqlvalue.Literal(ps.Stmt.(*grammar.InsertStmt).Vals[1], typ, "v")
			got := render(typ, b)
			if err != nil {
				got = "!"
			}
			if got != tc.want {
				t.Errorf("got %s (err %v); want %s", got, err, tc.want)
			}
		})
	}
}

func TestMurmur3Token(t *testing.T) {
	// Values computed with the DataStax Python driver's murmur3, which matches Cassandra's.
	tests := []struct {
		key  string
		want int64
	}{
		{"", 0},
		{"123", -7468325962851647638},
		{"\x00\xff\x10\xfa\x99" + strings.Repeat("\x00", 11), -3759560648152891798},
		{"\xfe" + strings.Repeat("\x00", 15), 7013980299457995},
		{"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 6662781046685680142},
	}
	for _, tc := range tests {
		if got := storage.Murmur3Token([]byte(tc.key)); got != tc.want {
			t.Errorf("token(%x) = %d; want %d", tc.key, got, tc.want)
		}
	}
}

// FuzzParse checks that no input makes the parser or the engine panic.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"SELECT * FROM t WHERE k = ? AND c > 3 ORDER BY c DESC LIMIT 5 ALLOW FILTERING",
		"SELECT count(*), writetime(v), ttl(v), token(k) AS t FROM ks.t WHERE k IN (1, 2)",
		"INSERT INTO t (k, c, v, l, s, m) VALUES (1, 'x', 0xff, [1, 2], {'a'}, {'k': 1.5}) USING TTL 10 AND TIMESTAMP 5",
		"UPDATE t SET l = l + [?], m[?] = ?, n = n + 1 WHERE k = :k AND c IN ?",
		"DELETE l[0], v FROM t USING TIMESTAMP 1 WHERE k = 1 AND c >= 2",
		"BEGIN BATCH INSERT INTO t (k) VALUES (1); UPDATE t SET v = 2 WHERE k = 1; APPLY BATCH;",
		"CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '1'}",
		"CREATE TABLE t (k int, c text, v frozen<map<int, list<text>>>, s int static, PRIMARY KEY ((k), c)) WITH CLUSTERING ORDER BY (c DESC)",
		"DROP TABLE IF EXISTS t", "TRUNCATE t", "USE ks", "SELECT now(), uuid() FROM t",
		"INSERT INTO t (k) VALUES (123e4567-e89b-12d3-a456-426614174000)", "'unterminated", "/* open", "$$",
		"SELECT * FROM t WHERE token(k) > -9223372036854775808",
		// Schema changes, user types, indexes, JSON, aggregates, roles, LWT batches, UDFs.
		"ALTER TABLE t ADD (x int, y list<frozen<ty>>)", "ALTER TABLE t DROP IF EXISTS x USING TIMESTAMP 5",
		"ALTER TABLE t RENAME c TO c2 AND k TO k2", "ALTER TABLE t WITH comment = 'x' AND compaction = {'class': 'LeveledCompactionStrategy'}",
		"ALTER KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3} AND durable_writes = false",
		"CREATE TYPE IF NOT EXISTS ty2 (a int, b frozen<ty>, c map<text, frozen<list<int>>>)",
		"ALTER TYPE ty ADD z text", "ALTER TYPE ty RENAME a TO aa AND b TO bb", "DROP TYPE IF EXISTS ty2",
		"INSERT INTO t (k, c, u, nu, tu) VALUES (1, 'a', {a: 1, b: 'x'}, {b: ?}, (1, 'y'))",
		"UPDATE t SET nu.a = 3 WHERE k = 1 AND c = 'a'", "DELETE nu.b FROM t WHERE k = 1 AND c = 'a'",
		"SELECT u.a, nu.b, toJson(u) FROM t WHERE k = 1", "SELECT JSON * FROM t",
		`INSERT INTO t JSON '{"k": 1, "c": "x", "l": [1], "u": {"a": 2}, "du": "1h"}' DEFAULT UNSET IF NOT EXISTS`,
		"INSERT INTO t JSON ?", "INSERT INTO t (k, c, l) VALUES (2, 'b', fromJson('[1, 2]'))",
		"INSERT INTO t (k, c, du) VALUES (3, 'c', P1Y2M3DT4H5M6S)", "UPDATE t SET du = -1h30m WHERE k = 3 AND c = 'c'",
		"SELECT k, count(*), max(n), min(v), sum(n), avg(n), count(v) FROM t GROUP BY k PER PARTITION LIMIT 1 LIMIT 2",
		"SELECT k, c, sum(n) FROM t WHERE k = 1 GROUP BY c",
		"CREATE INDEX IF NOT EXISTS ON t (n)", "CREATE INDEX ON t (keys(m))", "CREATE INDEX e ON t (entries(m))",
		"SELECT * FROM t WHERE m['a'] = 1", "SELECT * FROM t WHERE l CONTAINS 1", "DROP INDEX IF EXISTS t_n_idx",
		"CREATE MATERIALIZED VIEW mv AS SELECT * FROM t WHERE k IS NOT NULL PRIMARY KEY (k)", "DROP MATERIALIZED VIEW IF EXISTS mv",
		"CREATE ROLE IF NOT EXISTS r WITH PASSWORD = 'p' AND LOGIN = true AND SUPERUSER = false", "GRANT SELECT ON ks.t TO r",
		"GRANT r TO s", "REVOKE ALL PERMISSIONS ON ALL KEYSPACES FROM r", "LIST ALL PERMISSIONS OF r NORECURSIVE",
		"LIST ROLES OF r", "CREATE USER u WITH PASSWORD 'p' NOSUPERUSER", "DROP ROLE IF EXISTS r",
		"BEGIN BATCH UPDATE t SET n = 1 WHERE k = 1 AND c = 'a' IF n = null; INSERT INTO t (k, c) VALUES (1, 'b') IF NOT EXISTS; APPLY BATCH",
		"CREATE OR REPLACE FUNCTION f(a int, b list<text>) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS 'return a;'",
		"CREATE AGGREGATE IF NOT EXISTS ag(int) SFUNC f2 STYPE int FINALFUNC f3 INITCOND 0", "SELECT f(n, l) FROM t",
		"DROP FUNCTION IF EXISTS f(int, list<text>)", "DROP AGGREGATE ag",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	e, s := newTestEngine(f, "CREATE TYPE ty (a int, b text)",
		"CREATE TABLE t (k int, c text, v blob, l list<int>, s set<text>, m map<text, double>, n int, u frozen<ty>, nu ty, tu tuple<int, text>, du duration, PRIMARY KEY (k, c))")
	f.Fuzz(func(t *testing.T, q string) {
		_, _ = grammar.Parse(q)
		sess := *s
		m, err := e.Query(&sess, q, &cql.QueryParams{Flags: cql.QueryPageSize, PageSize: 3}, nil)
		if err != nil && cqlErr(err) == nil {
			t.Fatalf("%q: error %v is not a *cql.Error", q, err)
		}
		_ = m
		if _, err := e.Prepare(&sess, q, nil); err != nil && cqlErr(err) == nil {
			t.Fatalf("%q: error %v is not a *cql.Error", q, err)
		}
	})
}
