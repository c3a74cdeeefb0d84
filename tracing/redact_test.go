package tracing

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestQueryTextRedacted records statements with literals and passwords in fast and full
// mode, with and without QueryLiterals, and checks the recorded text.
func TestQueryTextRedacted(t *testing.T) {
	const role = "CREATE ROLE r WITH PASSWORD = 'hunter2' AND LOGIN = true"
	long := "SELECT * FROM ks.t WHERE k IN (" + strings.Repeat("1, ", 40) + "1)"
	batch := cql.Batch{Type: cql.BatchLogged, Consistency: cql.One, Queries: []cql.BatchQuery{
		{Query: "INSERT INTO ks.t (k, v) VALUES (1, 'pii@example.com')"},
		{Query: "UPDATE ks.t SET m = {'password': 'hunter2'} WHERE k = 2"},
	}}
	tests := []struct {
		name     string
		opts     Options
		msg      cql.Message
		want     map[string]string // parameters that must be there
		absent   []string          // text no parameter may contain
		prepared string            // the text of a PREPARE before msg, with id testID
		fullOnly bool              // fast mode keeps only DefaultCaptureMax bytes of a frame
	}{
		{name: "literals redacted", msg: cql.Query{Query: "SELECT * FROM ks.t WHERE k = 'alice' AND n = 42"},
			want: map[string]string{"query": "SELECT * FROM ks.t WHERE k = ? AND n = ?"}, absent: []string{"alice", "42"}},
		{name: "password redacted", msg: cql.Query{Query: role},
			want: map[string]string{"query": "CREATE ROLE r WITH PASSWORD = ? AND LOGIN = ?"}, absent: []string{"hunter2"}},
		{name: "password redacted with literals kept", opts: Options{QueryLiterals: true}, msg: cql.Query{Query: role},
			want: map[string]string{"query": "CREATE ROLE r WITH PASSWORD = ? AND LOGIN = true"}, absent: []string{"hunter2"}},
		{name: "literals kept", opts: Options{QueryLiterals: true}, msg: cql.Query{Query: "SELECT * FROM ks.t WHERE k = 'alice'"},
			want: map[string]string{"query": "SELECT * FROM ks.t WHERE k = 'alice'"}},
		{name: "batch", msg: batch,
			want:   map[string]string{"query[0]": "INSERT INTO ks.t (k, v) VALUES (?, ?)", "query[1]": "UPDATE ks.t SET m = ? WHERE k = ?"},
			absent: []string{"pii@", "hunter2"}},
		{name: "batch with literals kept", opts: Options{QueryLiterals: true}, msg: batch,
			want:   map[string]string{"query[1]": "UPDATE ks.t SET m = {'password': ?} WHERE k = 2"},
			absent: []string{"hunter2"}},
		{name: "prepared text", prepared: "ALTER USER u WITH PASSWORD 'hunter2'", msg: executeMsg(),
			want: map[string]string{"query": "ALTER USER u WITH PASSWORD ?"}, absent: []string{"hunter2"}},
		{name: "truncated", opts: Options{MaxQueryLen: 40}, msg: cql.Query{Query: long},
			want: map[string]string{"query": "SELECT * FROM ks.t WHERE k IN (?, ?, ?, " + cql.TruncatedMark, "query_truncated": "true"}},
		{name: "default bound", msg: cql.Query{Query: "SELECT * FROM ks.t" + strings.Repeat(" -- a comment\n", 400)}, fullOnly: true,
			want: map[string]string{"query": "SELECT * FROM ks.t" + strings.Repeat(" -- a comment\n", 400)[:DefaultMaxQueryLen-18] + cql.TruncatedMark,
				"query_truncated": "true"}},
	}
	for _, mode := range []Config{{Enable: true, Fast: true}, {Enable: true}} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", mode.Mode(), tt.name), func(t *testing.T) {
				if tt.fullOnly && mode.Fast {
					t.Skip("fast mode keeps a truncated frame")
				}
				tr := New(tt.opts)
				defer mustClose(t, tr)
				c := newCaller(tr, testClient, testCoord)
				defer c.Close()
				if tt.prepared != "" {
					h, f := mustRequest(t, reqHeader(1, 0), cql.Prepare{Query: tt.prepared}, nil)
					c.OnRequest(h, f, nil)
					rh, rf := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.PreparedResult{ID: testID}, nil)
					c.OnResponse(rh, rf, nil)
				}
				mustConfig(t, tr, mode)
				h, f := mustRequest(t, reqHeader(7, 0), tt.msg, nil)
				c.OnRequest(h, f, nil)
				rh, rf := mustResponse(t, respHeader(7, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
				c.OnResponse(rh, rf, nil)
				c.ResponseSent(7)
				got := tr.SlowLog(1)
				if len(got) != 1 {
					t.Fatalf("SlowLog has %d sessions; want 1", len(got))
				}
				ps := got[0].Parameters
				for k, v := range tt.want {
					if ps[k] != v {
						t.Errorf("parameter %s = %q; want %q", k, ps[k], v)
					}
				}
				for _, s := range tt.absent {
					for k, v := range ps {
						if strings.Contains(v, s) {
							t.Errorf("parameter %s = %q contains %q", k, v, s)
						}
					}
				}
			})
		}
	}
}
