package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
)

// slowLogSessions are sessions as the ring holds them, newest first: application queries
// of two keyspaces, users and clients, and the drivers' own system queries.
func slowLogSessions() []tracing.Session {
	at := func(s int) time.Time { return time.Date(2026, 12, 6, 15, 0, s, 0, time.UTC) }
	q := func(id string, s int, d int64, query, user, client string) tracing.Session {
		return tracing.Session{ID: id, StartedAt: at(s), DurationUS: d, Client: client, Username: user, Command: "QUERY",
			Parameters: map[string]string{"query": query}}
	}
	return []tracing.Session{
		q("s6", 6, 50, "SELECT * FROM system_schema.tables", "", "10.0.0.1:5000"),
		q("s5", 5, 7000, "SELECT v FROM shop.orders WHERE k = ?", "alice", "10.0.0.1:5000"),
		q("s4", 4, 120000, "INSERT INTO shop.carts (k, v) VALUES (?, ?)", "bob", "10.0.1.9:6000"),
		q("s3", 3, 300, "SELECT * FROM system.local WHERE key = ?", "", "10.0.0.1:5000"),
		q("s2", 2, 90000, "SELECT v FROM audit.events WHERE k = ?", "alice", "192.168.1.5:7000"),
		q("s1", 1, 10, "SELECT peer FROM system.peers", "", "192.168.1.5:7000"),
	}
}

// TestSlowLogQuery: GET /tracecar/slow_log filters, sorts and limits on the server, says
// how many records matched and whether the limit cut them, and refuses what it does not
// know: an unknown or repeated parameter is a 400 that names it (finding 1 and 3 of issue
// 47, which answered 200 and ignored them).
func TestSlowLogQuery(t *testing.T) {
	tr := newFakeTracer()
	tr.sessions = slowLogSessions()
	f := mustServe(t, admin.Config{Tracer: tr})
	tests := []struct {
		path      string
		status    int
		ids       string // the sessions answered, in order
		matched   string
		truncated string
		message   string // in a 400
	}{
		{path: "", ids: "s6 s5 s4 s3 s2 s1", matched: "6", truncated: "false"},
		{path: "?limit=2", ids: "s6 s5", matched: "6", truncated: "true"},
		{path: "?sort=duration", ids: "s4 s2 s5 s3 s6 s1", matched: "6", truncated: "false"},
		{path: "?sort=duration&limit=1", ids: "s4", matched: "6", truncated: "true"},
		{path: "?sort=time", ids: "s6 s5 s4 s3 s2 s1", matched: "6"},
		{path: "?min_duration=7000", ids: "s5 s4 s2", matched: "3"},
		{path: "?min_duration=100ms", ids: "s4", matched: "1"},
		{path: "?include_system=false", ids: "s5 s4 s2", matched: "3"},
		{path: "?include_system=true", ids: "s6 s5 s4 s3 s2 s1", matched: "6"},
		{path: "?keyspace=shop", ids: "s5 s4"},
		{path: "?table=orders", ids: "s5"},
		{path: "?table=shop.carts", ids: "s4"},
		{path: "?table=audit.carts", ids: ""},
		{path: "?user=alice&sort=duration", ids: "s2 s5"},
		{path: "?client=10.0.0.1", ids: "s6 s5 s3"},
		{path: "?client=10.0.0.0/16&include_system=false", ids: "s5 s4"},
		{path: "?since=2026-12-06T15:00:03Z&until=2026-12-06T15:00:05Z", ids: "s5 s4 s3"},
		{path: "?sort=size", status: 400, message: "bad sort"},
		{path: "?bogus=1", status: 400, message: `unknown parameter "bogus"`},
		{path: "?limit=1&limit=2", status: 400, message: "parameter limit given more than once"},
		{path: "?min_duration=-5", status: 400, message: "bad min_duration"},
		{path: "?min_duration=fast", status: 400, message: "bad min_duration"},
		{path: "?client=10.0.0", status: 400, message: "bad client"},
		{path: "?since=yesterday", status: 400, message: "bad since"},
		{path: "?include_system=no", status: 400, message: "bad include_system"},
		{path: "?limit=0", status: 400, message: "bad limit"},
		{path: "?trace_id=xyz", status: 400, message: "bad trace_id"},
		{path: "?keyspace=", status: 400, message: "parameter keyspace has an empty value"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			req, _ := http.NewRequest("GET", f.url+"/tracecar/slow_log"+tt.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			want := max(tt.status, 200)
			if resp.StatusCode != want {
				t.Fatalf("status %d; want %d", resp.StatusCode, want)
			}
			if want != 200 {
				var e struct {
					Message string `json:"message"`
					Code    int    `json:"code"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Code != want || !strings.Contains(e.Message, tt.message) {
					t.Errorf("error %+v (%v); want a message with %q", e, err, tt.message)
				}
				return
			}
			var got []tracing.Session
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			if strings.Join(ids, " ") != tt.ids {
				t.Errorf("sessions %q; want %q", strings.Join(ids, " "), tt.ids)
			}
			if m := resp.Header.Get(admin.HeaderMatched); m != tt.matched && tt.matched != "" {
				t.Errorf("%s %q; want %q", admin.HeaderMatched, m, tt.matched)
			}
			if m := resp.Header.Get(admin.HeaderTruncated); m != tt.truncated && tt.truncated != "" {
				t.Errorf("%s %q; want %q", admin.HeaderTruncated, m, tt.truncated)
			}
		})
	}
}
