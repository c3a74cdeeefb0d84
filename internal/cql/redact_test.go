package cql

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalizeQuery(t *testing.T) {
	tests := []struct {
		name, in, want, keep string // keep: the result with keepLiterals set
	}{
		{"string", "SELECT * FROM ks.t WHERE k = 'secret'", "SELECT * FROM ks.t WHERE k = ?", "SELECT * FROM ks.t WHERE k = 'secret'"},
		{"escaped quote", "INSERT INTO t (a) VALUES ('it''s mine')", "INSERT INTO t (a) VALUES (?)", ""},
		{"dollar string", "INSERT INTO t (a) VALUES ($$it's 'mine'$$)", "INSERT INTO t (a) VALUES (?)", ""},
		{"numbers", "SELECT a FROM t WHERE k = 42 AND c > -1.5e-3 LIMIT 10", "SELECT a FROM t WHERE k = ? AND c > ? LIMIT ?", ""},
		{"blob", "SELECT * FROM t WHERE key = 0xCAFEbabe", "SELECT * FROM t WHERE key = ?", ""},
		{"uuid", "SELECT * FROM t WHERE id = deadbeef-0000-4000-8000-00000000cafe", "SELECT * FROM t WHERE id = ?", ""},
		{"uuid starting with digits", "DELETE FROM t WHERE id = 123e4567-e89b-12d3-a456-426614174000", "DELETE FROM t WHERE id = ?", ""},
		{"booleans and specials", "UPDATE t SET b = true, c = NaN, d = -Infinity WHERE k = 1", "UPDATE t SET b = ?, c = ?, d = -? WHERE k = ?", ""},
		{"duration", "INSERT INTO t (k, d) VALUES (1, 1h30m)", "INSERT INTO t (k, d) VALUES (?, ?)", ""},
		{"list set map", "UPDATE t SET l = [1, 2], s = {'a', 'b'}, m = {'k': [3]} WHERE k = 0", "UPDATE t SET l = ?, s = ?, m = ? WHERE k = ?", ""},
		{"udt literal keeps field names", "INSERT INTO t (k, u) VALUES (1, {street: 'x', nums: [1]})", "INSERT INTO t (k, u) VALUES (?, {street: ?, nums: ?})", ""},
		{"tuple and IN", "SELECT * FROM t WHERE k IN (1, 2, 3)", "SELECT * FROM t WHERE k IN (?, ?, ?)", ""},
		{"identifiers stay", `SELECT "Weird 'col'", x1 FROM "KS"."t""q" WHERE k = ?`, `SELECT "Weird 'col'", x1 FROM "KS"."t""q" WHERE k = ?`, ""},
		{"named markers and minus", "SELECT * FROM t WHERE k = :key AND c = a-1", "SELECT * FROM t WHERE k = :key AND c = a-?", ""},
		{"comments stay", "SELECT * FROM t -- 'not a literal'\nWHERE k = 1 /* 2 */", "SELECT * FROM t -- 'not a literal'\nWHERE k = ? /* 2 */", ""},
		{"unterminated string", "SELECT * FROM t WHERE k = 'secr", "SELECT * FROM t WHERE k = ?", "SELECT * FROM t WHERE k = 'secr"},
		{"unterminated dollar", "SELECT $$secr", "SELECT ?", ""},
		{"create role password", "CREATE ROLE r WITH PASSWORD = 'hunter2' AND LOGIN = true", "CREATE ROLE r WITH PASSWORD = ? AND LOGIN = ?",
			"CREATE ROLE r WITH PASSWORD = ? AND LOGIN = true"},
		{"create user", "CREATE USER 'bob' WITH PASSWORD 'hunter2' SUPERUSER", "CREATE USER ? WITH PASSWORD ? SUPERUSER", "CREATE USER ? WITH PASSWORD ? SUPERUSER"},
		{"alter role hashed", "alter role r with hashed password = '$2a$10$abc'", "alter role r with hashed password = ?", "alter role r with hashed password = ?"},
		{"alter user dollar", "ALTER USER u WITH PASSWORD $$hunter2$$", "ALTER USER u WITH PASSWORD ?", "ALTER USER u WITH PASSWORD ?"},
		{"password map", "CREATE ROLE r WITH OPTIONS = {'password': 'hunter2'}", "CREATE ROLE r WITH OPTIONS = ?", "CREATE ROLE r WITH OPTIONS = {?: ?}"},
		{"password key anywhere", "INSERT INTO creds (k, m) VALUES ('a', {'user': 'u', 'PASSWORD': 'hunter2'})", "INSERT INTO creds (k, m) VALUES (?, ?)",
			"INSERT INTO creds (k, m) VALUES ('a', {'user': 'u', 'PASSWORD': ?})"},
		{"second statement", "SELECT 'a' FROM t; CREATE ROLE r WITH PASSWORD = 'x'", "SELECT ? FROM t; CREATE ROLE r WITH PASSWORD = ?",
			"SELECT 'a' FROM t; CREATE ROLE r WITH PASSWORD = ?"},
		{"unbalanced brackets", "SELECT ] } [ { 'x'", "SELECT ] } [ { ?", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, trunc := NormalizeQuery(tt.in, false, 0)
			if got != tt.want || trunc {
				t.Errorf("NormalizeQuery(%q, false) = %q, %v; want %q, false", tt.in, got, trunc, tt.want)
			}
			want := tt.keep
			if want == "" {
				want = tt.in
			}
			if got, _ := NormalizeQuery(tt.in, true, 0); got != want {
				t.Errorf("NormalizeQuery(%q, true) = %q; want %q", tt.in, got, want)
			}
		})
	}
}

func TestNormalizeQueryTruncates(t *testing.T) {
	q := "SELECT * FROM t WHERE k = 'a long secret value' AND name = 'é'" + strings.Repeat(" AND c = 1", 100)
	got, trunc := NormalizeQuery(q, false, 40)
	if !trunc || !strings.HasSuffix(got, TruncatedMark) || len(got) > 40+len(TruncatedMark) {
		t.Fatalf("got %q, %v; want at most 40 bytes, then %q, truncated", got, trunc, TruncatedMark)
	}
	if want := "SELECT * FROM t WHERE k = ? AND name = ?"; got != want+TruncatedMark {
		t.Errorf("got %q; want %q", got, want+TruncatedMark)
	}
	// The cut falls inside the literal of the input: it is redacted all the same.
	huge := "SELECT * FROM t WHERE k = '" + strings.Repeat("secret", 10000) + "'"
	got, trunc = NormalizeQuery(huge, true, 64)
	if !trunc || len(got) > 64+len(TruncatedMark) || !utf8.ValidString(got) {
		t.Errorf("got %d bytes %q; want at most 64 and valid UTF-8", len(got), got)
	}
	got, trunc = NormalizeQuery(huge, false, 64)
	if !trunc || strings.Contains(got, "secret") {
		t.Errorf("got %q, %v; want the literal redacted and truncated", got, trunc)
	}
	// A multi-byte character is never cut in half.
	got, _ = NormalizeQuery(`SELECT "ééééé"`, false, 10)
	if !utf8.ValidString(got) {
		t.Errorf("got %q: not valid UTF-8", got)
	}
}

func BenchmarkNormalizeQuery(b *testing.B) {
	q := "INSERT INTO keyspace1.standard1 (key, \"C0\", \"C1\") VALUES (0x0102, 'some text', [1, 2, 3]) USING TTL 86400"
	b.ReportAllocs()
	for b.Loop() {
		NormalizeQuery(q, false, 4096)
	}
}

// cqlEscape quotes s as a CQL string literal.
func cqlEscape(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// FuzzRedact checks that NormalizeQuery never panics, honours its length bound, and that a
// string literal's content never reaches the result: the result does not depend on it at all.
func FuzzRedact(f *testing.F) {
	f.Add("SELECT * FROM t WHERE k =", "hunter2", " AND c = 1")
	f.Add("CREATE ROLE r WITH PASSWORD =", "s3cr3t'x", "")
	f.Add("INSERT INTO t (k, m) VALUES (1, {", "v", ": 2})")
	f.Add("UPDATE t SET l = [", "a$$b", ", 'c'] WHERE k = 0x01")
	f.Add(`SELECT "q" FROM t WHERE k IN (`, "x--y", ") /* c */")
	f.Fuzz(func(t *testing.T, prefix, secret, suffix string) {
		for _, q := range []string{prefix, secret, suffix, prefix + secret + suffix} {
			for _, keep := range []bool{false, true} {
				got, trunc := NormalizeQuery(q, keep, 16)
				if len(got) > 16+len(TruncatedMark) || trunc != strings.HasSuffix(got, TruncatedMark) && len(got) > 16 {
					t.Fatalf("NormalizeQuery(%q, %v, 16) = %q, %v: over the bound", q, keep, got, trunc)
				}
			}
		}
		// Nothing in the prefix may open a comment, a quote or a $$ string, so the literal
		// below is one.
		clean := strings.Map(func(r rune) rune {
			if strings.ContainsRune(`'"$-/`, r) {
				return ' '
			}
			return r
		}, prefix)
		base := clean + " " + cqlEscape("x") + " " + suffix
		withSecret := clean + " " + cqlEscape(secret) + " " + suffix
		want, _ := NormalizeQuery(base, false, 0)
		if got, _ := NormalizeQuery(withSecret, false, 0); got != want {
			t.Fatalf("the result depends on a literal's content:\n%q gives %q\n%q gives %q", withSecret, got, base, want)
		}
		// A password is redacted even when literals are kept.
		base = clean + " PASSWORD = " + cqlEscape("x") + " " + suffix
		withSecret = clean + " PASSWORD = " + cqlEscape(secret) + " " + suffix
		want, _ = NormalizeQuery(base, true, 0)
		if got, _ := NormalizeQuery(withSecret, true, 0); got != want {
			t.Fatalf("a password reaches the result:\n%q gives %q\n%q gives %q", withSecret, got, base, want)
		}
	})
}

func TestCarriesSecret(t *testing.T) {
	for q, want := range map[string]bool{
		"CREATE ROLE carol WITH PASSWORD = 'hunter2' AND LOGIN = true": true,
		"create role carol with login = true":                          true, // every string of a role statement is redacted
		"ALTER USER bob WITH PASSWORD 'x'":                             true,
		"ALTER ROLE bob WITH PASSWORD = ?":                             true,
		"/* c */ alter  role bob with password = :pw":                  true,
		"CREATE USER IF NOT EXISTS u WITH PASSWORD 'p' NOSUPERUSER":    true,
		"INSERT INTO ks.t (k, m) VALUES (1, {'password': 'x'})":        true,
		"INSERT INTO ks.t (k, m) VALUES (1, {'Password': ?})":          true,
		"UPDATE ks.t SET password = ? WHERE k = 1":                     true,
		"SELECT * FROM ks.t; CREATE ROLE r WITH PASSWORD = 'p'":        true,
		"SELECT * FROM ks.t WHERE k = ?":                               false,
		"INSERT INTO ks.t (k, password) VALUES (?, ?)":                 false, // a column so named holds data, like any other (docs/tracing.md)
		"SELECT password FROM ks.t":                                    false,
		"DROP ROLE carol":                                              false,
		"LIST ROLES":                                                   false,
		"":                                                             false,
	} {
		if got := CarriesSecret(q); got != want {
			t.Errorf("CarriesSecret(%q) = %v, want %v", q, got, want)
		}
		if got := CarriesSecret([]byte(q)); got != want {
			t.Errorf("CarriesSecret([]byte(%q)) = %v, want %v", q, got, want)
		}
	}
}
