package statements

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// textCase is one statement of testdata/cqltext_cases.json, which tracing's tests read
// too: what each reader of CQL text must find in it.
type textCase struct {
	Name     string   `json:"name"`
	Text     string   `json:"text"`
	Op       string   `json:"op"`       // tracing's db.operation.name
	Keyspace string   `json:"keyspace"` // Target's, and tracing's db.namespace
	Table    string   `json:"table"`    // Target's, and tracing's db.collection.name
	Key      string   `json:"key"`      // the statement key: cql.NormalizeQuery without literals
	Redacted string   `json:"redacted"` // cql.NormalizeQuery keeping literals: passwords only
	Anti     []string `json:"anti"`     // the anti-patterns one unpaged SERIAL QUERY of Text counts
}

func mustTextCases(tb testing.TB) []textCase {
	tb.Helper()
	b, err := os.ReadFile("testdata/cqltext_cases.json")
	if err != nil {
		tb.Fatal(err)
	}
	var cases []textCase
	if err := json.Unmarshal(b, &cases); err != nil {
		tb.Fatal(err)
	}
	return cases
}

// TestTextCases: the target, the statement key, the redacted text and the anti-patterns of
// a statement all come from cqltext's reading of it, and agree: an entry, made from the
// key, has the shape of the text it was made from.
func TestTextCases(t *testing.T) {
	for _, tc := range mustTextCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			if ks, table := Target(tc.Text); ks != tc.Keyspace || table != tc.Table {
				t.Errorf("Target = %q, %q; want %q, %q", ks, table, tc.Keyspace, tc.Table)
			}
			if got, _ := cql.NormalizeQuery(tc.Text, false, 0); got != tc.Key {
				t.Errorf("key %q; want %q", got, tc.Key)
			}
			if got, _ := cql.NormalizeQuery(tc.Text, true, 0); got != tc.Redacted {
				t.Errorf("redacted %q; want %q", got, tc.Redacted)
			}
			if got, want := classify(tc.Key), classify(tc.Text); got != want {
				t.Errorf("the key's shape %+v; the text's %+v", got, want)
			}

			s, c := newStats(t, 10)
			q := cql.Query{Query: tc.Text, Params: cql.QueryParams{Consistency: cql.Serial}}
			call(s, c, cql.OpQuery, body(q), cql.OpResult, body(cql.VoidResult{}), 1)
			st := find(t, s.List("calls", 0, false), tc.Key, false)
			if st.Keyspace != tc.Keyspace || st.Table != tc.Table {
				t.Errorf("entry's keyspace and table %q, %q; want %q, %q", st.Keyspace, st.Table, tc.Keyspace, tc.Table)
			}
			var anti []string
			for _, kind := range AntiPatternKinds {
				if s.AntiPatterns(kind, tc.Keyspace, tc.Table) != 0 {
					anti = append(anti, kind)
				}
			}
			slices.Sort(anti)
			if !slices.Equal(anti, tc.Anti) {
				t.Errorf("anti-patterns %q; want %q", anti, tc.Anti)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		q    string
		want shape
	}{
		{"SELECT * FROM ks.t WHERE v > 1 ALLOW FILTERING", shape{verb: verbSelect, keyspace: "ks", table: "t", allowFiltering: true, selectStar: true, fullScan: true}},
		{"SELECT * FROM ks.t WHERE v IN (SELECT) allow\nfiltering", shape{verb: verbSelect, keyspace: "ks", table: "t", allowFiltering: true, selectStar: true, fullScan: true}},
		{`SELECT "allow" filtering FROM t`, shape{verb: verbSelect, table: "t", fullScan: true}},
		{"SELECT count(*) FROM ks.t", shape{verb: verbSelect, keyspace: "ks", table: "t", fullScan: true}},
		{"SELECT v FROM ks.t WHERE k = ? /* no WHERE */", shape{verb: verbSelect, keyspace: "ks", table: "t"}},
		{"SELECT v FROM ks.t WHERE k IN (SELECT x FROM y)", shape{verb: verbSelect, keyspace: "ks", table: "t"}},
		{"SELECT * FROM t WHERE c = 'ALLOW FILTERING'", shape{verb: verbSelect, table: "t", selectStar: true}},
		{"UPDATE t SET v = 1 WHERE k = 1 IF v = 0", shape{verb: verbUpdate, table: "t", lwt: true}},
		{`UPDATE t SET "IF" = 1 WHERE k = 1`, shape{verb: verbUpdate, table: "t"}},
		{"SELECT v FROM t WHERE k = 1 -- IF", shape{verb: verbSelect, table: "t"}},
		{"DELETE FROM system_schema.tables WHERE k = 1", shape{verb: verbDelete, keyspace: "system_schema", table: "tables", system: true}},
		{"DELETE v FROM ks.t", shape{verb: verbDelete, keyspace: "ks", table: "t"}},
		{"INSERT INTO t(k) VALUES (1)", shape{verb: verbInsert, table: "t"}},
		{"BEGIN UNLOGGED BATCH UPDATE ks.t SET v = 1 WHERE k = 1 IF v = 0; APPLY BATCH", shape{verb: verbBatch, lwt: true}},
		{"TRUNCATE table", shape{table: "table"}},
		{"TRUNCATE ks.t", shape{keyspace: "ks", table: "t"}},
		{"USE system", shape{keyspace: "system", system: true}},
		{"SELECT * FROM", shape{verb: verbSelect, selectStar: true}},
		{"SELECT * FROM ks.", shape{verb: verbSelect, keyspace: "ks", selectStar: true}},
		{"", shape{}},
		// ScyllaDB's extensions, as its drivers and tools send them.
		{"SELECT * FROM system.local WHERE key='local' USING TIMEOUT 5000ms", shape{verb: verbSelect, keyspace: "system", table: "local", selectStar: true, system: true, usingTimeout: true}},
		{"SELECT v FROM ks.t WHERE k = ? BYPASS CACHE", shape{verb: verbSelect, keyspace: "ks", table: "t", bypassCache: true}},
		{"SELECT v FROM ks.t ALLOW FILTERING BYPASS CACHE USING TIMEOUT 1s", shape{verb: verbSelect, keyspace: "ks", table: "t", allowFiltering: true, fullScan: true, bypassCache: true, usingTimeout: true}},
		{"INSERT INTO ks.t (k) VALUES (1) USING TTL 5 AND TIMEOUT 1s", shape{verb: verbInsert, keyspace: "ks", table: "t", usingTimeout: true}},
		{"UPDATE ks.t USING TIMEOUT 10ms SET v = 1 WHERE k = 1", shape{verb: verbUpdate, keyspace: "ks", table: "t", usingTimeout: true}},
		{"DELETE FROM ks.t USING TIMEOUT 1s WHERE k = 1", shape{verb: verbDelete, keyspace: "ks", table: "t", usingTimeout: true}},
		{"BEGIN BATCH USING TIMEOUT 1s INSERT INTO ks.t (k) VALUES (1) APPLY BATCH", shape{verb: verbBatch, usingTimeout: true}},
		{"SELECT timeout FROM ks.t WHERE k = 1", shape{verb: verbSelect, keyspace: "ks", table: "t"}},
	}
	for _, tt := range tests {
		if got := classify(tt.q); got != tt.want {
			t.Errorf("classify(%q) = %+v; want %+v", tt.q, got, tt.want)
		}
	}
}
