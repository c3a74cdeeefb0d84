package tracing

import (
	"encoding/json"
	"os"
	"testing"
)

// TestTextCases reads the statements of statements' testdata/cqltext_cases.json: the
// operation, keyspace and table that a span is given, from the text or from its
// normalized form, are the ones statement statistics find, and db.query.text is the
// statement key.
func TestTextCases(t *testing.T) {
	b, err := os.ReadFile("statements/testdata/cqltext_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Text, Op, Keyspace, Table, Key string
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			for _, q := range []string{tc.Text, tc.Key} {
				if op, ks, table := parseTarget(q); op != tc.Op || ks != tc.Keyspace || table != tc.Table {
					t.Errorf("parseTarget(%q) = %q, %q, %q; want %q, %q, %q", q, op, ks, table, tc.Op, tc.Keyspace, tc.Table)
				}
			}
			if got := redactLiterals(tc.Text); got != tc.Key {
				t.Errorf("db.query.text %q; want %q", got, tc.Key)
			}
			sc := describe(&Session{Command: "QUERY", Parameters: map[string]string{"query": tc.Key}})
			if sc.namespace != tc.Keyspace || sc.collection != tc.Table {
				t.Errorf("db.namespace %q, db.collection.name %q; want %q, %q", sc.namespace, sc.collection, tc.Keyspace, tc.Table)
			}
		})
	}
}
