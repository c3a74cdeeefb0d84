package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/audit"
)

// memSink keeps the records it is given.
type memSink struct {
	mu   sync.Mutex
	recs []audit.Record
	fail error
}

func (m *memSink) Name() string { return "mem" }
func (m *memSink) Write(_ context.Context, recs []audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.recs = append(m.recs, recs...)
	return nil
}
func (m *memSink) Sync(context.Context) error  { return nil }
func (m *memSink) Close(context.Context) error { return nil }

func (m *memSink) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *memSink) records() []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Record(nil), m.recs...)
}

// mustAudit returns an audit log writing to a memSink, closed when the test ends: Close
// writes what is queued, so records() after flush holds every record added.
func mustAudit(tb testing.TB, p audit.Policy, sinks ...audit.Sink) *audit.Log {
	tb.Helper()
	l := audit.Open(audit.Config{Policy: p, Retry: 5 * time.Millisecond, Sinks: sinks, Node: "127.0.0.1:9042"})
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l.Close(ctx)
	})
	return l
}

// waitRecords waits until sink holds n records and returns them.
func waitRecords(tb testing.TB, m *memSink, n int) []audit.Record {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs := m.records()
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d audit records within 10s; want %d: %+v", len(recs), n, recs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func auditStatus(tb testing.TB, body string) audit.Status {
	tb.Helper()
	var st audit.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		tb.Fatalf("audit body %q: %v", body, err)
	}
	return st
}

// TestAuditEndpoint: GET shows the settings and the sinks; POST changes what it names and
// answers the new state; a later POST changes only what it names.
func TestAuditEndpoint(t *testing.T) {
	m := &memSink{}
	l := mustAudit(t, audit.Block, m)
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Audit: l})
	status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/audit"})
	st := auditStatus(t, body)
	if status != 200 || st.Enabled || st.Policy != "block" || len(st.Sinks) != 1 || st.Sinks[0].Name != "mem" || st.Sinks[0].State != "ok" {
		t.Fatalf("GET: %d %s", status, body)
	}
	for _, key := range []string{`"enable":false`, `"categories":[]`, `"keyspaces":[]`, `"tables":[]`, `"exclude_users":[]`,
		`"policy":"block"`, `"records":{`, `"dropped":0`, `"sinks":[{"name":"mem","state":"ok"`} {
		if !strings.Contains(body, key) {
			t.Errorf("GET body %s lacks %s", body, key)
		}
	}
	status, body = do(t, client, f.url, request{method: "POST",
		path: "/tracecar/audit?enable=true&categories=dml,QUERY,Admin&keyspaces=shop,%22Big%22&tables=shop.carts&exclude_users=cassandra,bob"})
	st = auditStatus(t, body)
	want := audit.View{Enabled: true, Categories: []string{"DML", "QUERY", "ADMIN"}, Keyspaces: []string{"Big", "shop"},
		Tables: []string{"shop.carts"}, ExcludeUsers: []string{"bob", "cassandra"}}
	if status != 200 || fmt.Sprint(st.View) != fmt.Sprint(want) {
		t.Fatalf("POST: %d %+v; want %+v", status, st.View, want)
	}
	if !l.Wants(audit.DML, "shop", "carts", "alice") || l.Wants(audit.DML, "shop", "carts", "bob") ||
		l.Wants(audit.DML, "shop", "other", "alice") || l.Wants(audit.AUTH, "", "", "alice") {
		t.Errorf("the settings are not in force: %+v", l.Settings().View())
	}
	// Only what is named changes; * clears a list.
	status, body = do(t, client, f.url, request{method: "POST", path: "/tracecar/audit", body: "tables=*&exclude_users=*"})
	st = auditStatus(t, body)
	want.Tables, want.ExcludeUsers = []string{}, []string{}
	if status != 200 || fmt.Sprint(st.View) != fmt.Sprint(want) {
		t.Fatalf("POST tables=*: %d %+v; want %+v", status, st.View, want)
	}
}

// TestAuditBadInput: each bad request is a 400 naming the parameter and what it accepts,
// and changes nothing, not even the good parameters beside the bad one.
func TestAuditBadInput(t *testing.T) {
	l := mustAudit(t, audit.Block, &memSink{})
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Audit: l})
	do(t, client, f.url, request{method: "POST", path: "/tracecar/audit?enable=true&categories=DDL"})
	before := l.Settings().View()
	for _, tt := range []struct {
		path, want string
	}{
		{"?enable=true&categoriez=DML", `unknown parameter "categoriez": allowed are enable, categories, keyspaces, tables, exclude_users`},
		{"?categories=DML,WRITES", `bad categories "DML,WRITES": want category names, comma-separated, of AUTH, DDL, DCL, DML, QUERY, ADMIN`},
		{"?categories=DML,", `bad categories`},
		{"?categories=DML&tables=carts", `bad tables "carts": want keyspace.table names`},
		{"?categories=DML&tables=shop.", `bad tables "shop.": want keyspace.table names`},
		{"?keyspaces=a%20b&enable=false", `bad keyspaces "a b": want keyspace names`},
		{"?enable=maybe", `bad enable "maybe": want true, false, 1 or 0`},
		{"?enable=true&enable=false", `parameter enable given more than once`},
		{"?keyspaces=", `parameter keyspaces has an empty value`},
		{"", `no parameter: give any of enable, categories, keyspaces, tables, exclude_users`},
	} {
		status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/audit" + tt.path})
		e := apiError(t, status, body)
		if status != 400 || !strings.Contains(e.Message, tt.want) {
			t.Errorf("POST %s: %d %q; want 400 with %q", tt.path, status, e.Message, tt.want)
		}
		if after := l.Settings().View(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("POST %s changed the settings: %+v; want %+v", tt.path, after, before)
		}
	}
	status, body := do(t, client, f.url, request{method: "GET", path: "/tracecar/audit?enable=true"})
	if status != 400 || !strings.Contains(body, "this endpoint takes none") {
		t.Errorf("GET with a parameter: %d %s; want 400", status, body)
	}
}

// TestAuditWithoutSink: enabling an audit log that writes nowhere is refused.
func TestAuditWithoutSink(t *testing.T) {
	l := mustAudit(t, audit.Block)
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Audit: l})
	status, body := do(t, client, f.url, request{method: "POST", path: "/tracecar/audit?enable=true"})
	if e := apiError(t, status, body); status != 409 || !strings.Contains(e.Message, "--audit-dir") {
		t.Errorf("enable without a sink: %d %q; want 409 naming --audit-dir", status, e.Message)
	}
	if l.Enabled() {
		t.Error("enabled without a sink")
	}
}

// TestAdminChangesAudited: every change made through the API, the audit's own included,
// is an ADMIN record with the route, its parameters, the caller's address and whether a
// token was used; a refused change is one with its error; a change of the audit itself is
// recorded whatever the categories (turning it off, dropping ADMIN, turning it on), and
// nothing else is recorded while the audit is off or ADMIN is not among its categories.
func TestAdminChangesAudited(t *testing.T) {
	for _, token := range []string{"", "s3cret"} {
		t.Run("token="+token, func(t *testing.T) {
			m := &memSink{}
			l := mustAudit(t, audit.Block, m)
			f := mustServe(t, admin.Config{Token: token, Tracer: newFakeTracer(), Audit: l})
			auth := map[string]string{}
			user := admin.AuditUserAnonymous
			if token != "" {
				auth["Authorization"] = "Bearer " + token
				user = admin.AuditUserToken
			}
			type step struct {
				req    request
				status int
				op     string // the record's operation; "" none
				noAuth bool   // sent without the token
			}
			steps := []step{
				{request{method: "POST", path: "/tracecar/audit?enable=true&categories=ADMIN"}, 200, "POST /tracecar/audit?categories=ADMIN&enable=true", false},
				{request{method: "POST", path: "/storage_service/slow_query?enable=true&threshold=1000"}, 200, "POST /storage_service/slow_query?enable=true&threshold=1000", false},
				{request{method: "POST", path: "/storage_service/trace_probability", body: "probability=0.5"}, 200, "POST /storage_service/trace_probability?probability=0.5", false},
				{request{method: "POST", path: "/system/logger/admin?level=debug"}, 200, "POST /system/logger/admin?level=debug", false},
				{request{method: "GET", path: "/storage_service/slow_query"}, 200, "", false},
				{request{method: "POST", path: "/storage_service/trace_probability?probability=2"}, 400, "POST /storage_service/trace_probability?probability=2", false},
				{request{method: "POST", path: "/nope?x=1"}, 404, "", false},
			}
			if token != "" { // a change refused for want of the token is recorded, as anonymous
				steps = append(steps, step{request{method: "POST", path: "/storage_service/slow_query?enable=false"}, 401, "POST /storage_service/slow_query?enable=false", true})
			}
			steps = append(steps,
				// Dropping ADMIN from the categories is recorded, and hides what follows.
				step{request{method: "POST", path: "/tracecar/audit?categories=DML"}, 200, "POST /tracecar/audit?categories=DML", false},
				step{request{method: "POST", path: "/storage_service/slow_query?enable=true"}, 200, "", false},
				step{request{method: "POST", path: "/tracecar/audit?enable=false"}, 200, "POST /tracecar/audit?enable=false", false},
				step{request{method: "POST", path: "/storage_service/slow_query?enable=false"}, 200, "", false},
				// Turning it back on is recorded even without ADMIN among the categories.
				step{request{method: "POST", path: "/tracecar/audit?enable=true"}, 200, "POST /tracecar/audit?enable=true", false},
				step{request{method: "POST", path: "/storage_service/slow_query?enable=true"}, 200, "", false})
			var want []step
			for _, s := range steps {
				if !s.noAuth {
					s.req.header = auth
				}
				if status, body := do(t, client, f.url, s.req); status != s.status {
					t.Fatalf("%v: %d %s; want %d", s.req, status, body, s.status)
				}
				if s.op != "" {
					want = append(want, s)
				}
			}
			recs := waitRecords(t, m, len(want))
			time.Sleep(50 * time.Millisecond) // nothing more comes
			if recs = m.records(); len(recs) != len(want) {
				t.Fatalf("%d records; want %d: %+v", len(recs), len(want), recs)
			}
			for i, r := range recs {
				w, u := want[i], user
				if w.noAuth {
					u = admin.AuditUserAnonymous
				}
				if r.Operation != w.op || r.Category != "ADMIN" || r.Username != u || !strings.HasPrefix(r.Source, "127.0.0.1:") ||
					r.Node != "127.0.0.1:9042" || r.EventTime.IsZero() {
					t.Errorf("record %d: %+v; want operation %q by %s from 127.0.0.1", i, r, w.op, u)
				}
				if failed := w.status >= 400; r.Error != failed || (failed && r.ErrorCode != int32(w.status)) {
					t.Errorf("record %d: error %v code %d; want error=%v (%d)", i, r.Error, r.ErrorCode, failed, w.status)
				}
			}
		})
	}
}

// TestAuditFailingSinkNotReady: a failing sink makes /readyz 503, saying which and why, and
// shows in the status and /metrics; once it works, /readyz is 200 again and the record that
// waited is written.
func TestAuditFailingSinkNotReady(t *testing.T) {
	m := &memSink{}
	l := mustAudit(t, audit.Block, m)
	f := mustServe(t, admin.Config{Tracer: newFakeTracer(), Audit: l, Collectors: []prometheus.Collector{l.Collector()}})
	do(t, client, f.url, request{method: "POST", path: "/tracecar/audit?enable=true&categories=ADMIN"})
	waitRecords(t, m, 1)
	m.setFail(fmt.Errorf("syslog gone"))
	do(t, client, f.url, request{method: "POST", path: "/storage_service/slow_query?enable=true"})
	deadline := time.Now().Add(10 * time.Second)
	for l.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	status, body := do(t, client, f.url, request{method: "GET", path: "/readyz"})
	if e := apiError(t, status, body); status != 503 || !strings.Contains(e.Message, "audit sink mem failing") || !strings.Contains(e.Message, "syslog gone") {
		t.Errorf("/readyz with a failing sink: %d %q; want 503 naming the sink and why", status, e.Message)
	}
	_, body = do(t, client, f.url, request{method: "GET", path: "/tracecar/status"})
	var st admin.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Audit == nil || st.Audit.Sinks[0].State != "failing" ||
		!strings.Contains(st.Audit.Error, "syslog gone") {
		t.Errorf("status with a failing sink: %s", body)
	}
	_, body = do(t, client, f.url, request{method: "GET", path: "/metrics"})
	for _, want := range []string{`tracecar_audit_sink_up{sink="mem"} 0`, `tracecar_audit_records_total{category="ADMIN"} 2`, "tracecar_audit_enabled 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	m.setFail(nil)
	recs := waitRecords(t, m, 2)
	if recs[1].Operation != "POST /storage_service/slow_query?enable=true" {
		t.Errorf("the record that waited: %+v", recs[1])
	}
	deadline = time.Now().Add(10 * time.Second)
	for l.Err() != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if status, body := do(t, client, f.url, request{method: "GET", path: "/readyz"}); status != 200 {
		t.Errorf("/readyz once the sink works: %d %s", status, body)
	}
}
