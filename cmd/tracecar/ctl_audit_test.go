package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/audit"
)

// auditMem is an audit sink that keeps its records.
type auditMem struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *auditMem) Name() string { return "mem" }
func (m *auditMem) Write(_ context.Context, recs []audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, recs...)
	return nil
}
func (m *auditMem) Sync(context.Context) error  { return nil }
func (m *auditMem) Close(context.Context) error { return nil }
func (m *auditMem) records() []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Record(nil), m.recs...)
}

// mustAuditAdmin serves an admin API with an audit log on 127.0.0.1:0 until the test ends.
func mustAuditAdmin(tb testing.TB) (string, *audit.Log, *auditMem) {
	tb.Helper()
	m := &auditMem{}
	l := audit.Open(audit.Config{Sinks: []audit.Sink{m}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := admin.New(admin.Config{Audit: l})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		l.Close(context.Background())
	})
	return ln.Addr().String(), l, m
}

// TestCtlAudit: `tracecar ctl audit` changes every live host, reports the dead one (exit 1),
// and each host records the change as ADMIN; with no flags it reads; bad values are usage
// errors that reach no host.
func TestCtlAudit(t *testing.T) {
	a, la, ma := mustAuditAdmin(t)
	b, lb, _ := mustAuditAdmin(t)
	dead := ctlDeadAddr(t)
	code, out, errOut := runCtlArgs("--hosts", a+","+dead+","+b, "audit", "--enable", "--categories", "dml,QUERY,ADMIN",
		"--tables", "shop.carts", "--exclude-users", "cassandra")
	if code != 1 {
		t.Fatalf("exit %d; want 1 (a host is down)\n%s\n%s", code, out, errOut)
	}
	for _, h := range []struct {
		addr string
		l    *audit.Log
	}{{a, la}, {b, lb}} {
		if v := h.l.Settings().View(); !v.Enabled || strings.Join(v.Categories, ",") != "DML,QUERY,ADMIN" ||
			strings.Join(v.Tables, ",") != "shop.carts" || strings.Join(v.ExcludeUsers, ",") != "cassandra" {
			t.Errorf("%s settings %+v", h.addr, v)
		}
		if r := ctlRow(out, h.addr); !strings.Contains(r, " ok ") ||
			!strings.Contains(r, "on categories=DML,QUERY,ADMIN keyspaces=* tables=shop.carts exclude_users=cassandra policy=block") ||
			!strings.Contains(r, "mem=ok") {
			t.Errorf("row of %s = %q", h.addr, r)
		}
	}
	if r := ctlRow(out, dead); !strings.Contains(r, " error ") {
		t.Errorf("row of the dead host = %q", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ma.records()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if recs := ma.records(); len(recs) != 1 || recs[0].Category != "ADMIN" || !strings.HasPrefix(recs[0].Operation, "POST /tracecar/audit?") ||
		!strings.HasPrefix(recs[0].Source, "127.0.0.1:") {
		t.Errorf("records of the change: %+v", recs)
	}
	code, out, _ = runCtlArgs("--hosts", a, "audit")
	if r := ctlRow(out, a); code != 0 || !strings.Contains(r, "on categories=DML,QUERY,ADMIN") {
		t.Errorf("read: exit %d, row %q", code, r)
	}
	code, out, _ = runCtlArgs("--hosts", a, "status")
	if r := ctlRow(out, a); code != 0 || !strings.Contains(r, "audit=on categories=DML,QUERY,ADMIN") {
		t.Errorf("status: exit %d, row %q; want the audit's line", code, r)
	}
	code, out, _ = runCtlArgs("--hosts", a, "audit", "--disable")
	if r := ctlRow(out, a); code != 0 || !strings.Contains(r, " off ") || la.Enabled() {
		t.Errorf("disable: exit %d, row %q", code, r)
	}
	before := la.Settings().View()
	for _, bad := range []struct {
		args  []string
		inErr string
	}{
		{[]string{"audit", "--categories", "DML,WRITES"}, `--categories "DML,WRITES": want category names`},
		{[]string{"audit", "--tables", "carts"}, `--tables "carts": want keyspace.table`},
		{[]string{"audit", "--exclude-users", ","}, `--exclude-users`},
		{[]string{"audit", "--enable", "--disable"}, "contradict"},
		{[]string{"audit", "on"}, "only flags"},
	} {
		code, out, errOut := runCtlArgs(append([]string{"--hosts", a}, bad.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, bad.inErr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", bad.args, code, out, errOut, bad.inErr)
		}
	}
	if after := la.Settings().View(); strings.Join(after.Categories, ",") != strings.Join(before.Categories, ",") {
		t.Errorf("a usage error changed the host: %+v", after)
	}
}
