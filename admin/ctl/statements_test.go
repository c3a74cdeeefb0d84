package ctl_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/admin/ctl"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing/statements"
)

// mustStatementsSidecar serves an admin API with real statement statistics.
func mustStatementsSidecar(tb testing.TB) (string, *statements.Stats) {
	tb.Helper()
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	st := statements.New(statements.Options{})
	st.SetEnabled(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := admin.New(admin.Config{Loggers: reg, Statements: st})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	tb.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), st
}

// calls runs n QUERYs of q through st, each taking us microseconds, answered with an error
// of code errCode when it is not 0.
func calls(st *statements.Stats, q string, n int, us int64, errCode int32) {
	b := cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.LocalQuorum}}.AppendBody(nil, cql.V4)
	res := cql.VoidResult{}.AppendBody(nil, cql.V4)
	op := cql.OpResult
	if errCode != 0 {
		op, res = cql.OpError, cql.Error{Code: errCode, Message: "x"}.AppendBody(nil, cql.V4)
	}
	for i := 0; i < n; i++ {
		tk := st.Request(cql.NewFrame(cql.Header{Version: cql.V4, Opcode: cql.OpQuery}, b), 1_000_000)
		st.Response(tk, cql.NewFrame(cql.Header{Version: cql.V4 | cql.ResponseBit, Opcode: op}, res), 1_000_000+us*1000)
	}
}

// TestStatementsMergesHosts reads two sidecars with known statistics: the merged calls,
// errors and times add up, and p50 and p99 come from the merged histogram. Averaging the
// hosts' own p99s (100 µs and 10 ms) would give about 5 ms; the merged p99 is 10 ms.
func TestStatementsMergesHosts(t *testing.T) {
	a, sa := mustStatementsSidecar(t)
	b, sb := mustStatementsSidecar(t)
	const x, y, z = "SELECT v FROM ks.x WHERE k = ?", "SELECT v FROM ks.y", "SELECT v FROM ks.z"
	calls(sa, "SELECT v FROM ks.x WHERE k = 1", 90, 100, 0)
	calls(sa, y, 5, 1000, 0)
	calls(sb, "SELECT v FROM ks.x WHERE k = 2", 9, 10000, 0)
	calls(sb, "SELECT v FROM ks.x WHERE k = 3", 1, 10000, cql.ErrCodeReadTimeout)
	calls(sb, z, 3, 50, 0)

	var buf strings.Builder
	err := ctl.Run(context.Background(), ctl.Config{Hosts: []string{"http://" + a, "http://" + b},
		Command: ctl.Command{Name: ctl.Statements, Sort: "calls", JSON: true}}, &buf)
	out := buf.String()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got []adminapi.Statement
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(got) != 3 || got[0].Statement != x || got[1].Statement != y || got[2].Statement != z {
		t.Fatalf("merged: %s", out)
	}
	m := got[0]
	if m.Calls != 100 || m.Errors["read_timeout"] != 1 || m.Consistency["LOCAL_QUORUM"] != 100 ||
		m.TotalTimeUS != 90*100+10*10000 || m.MaxUS != 10000 {
		t.Errorf("merged x: %+v", m)
	}
	if m.P50US < 94 || m.P50US > 106 || m.P99US < 9375 || m.P99US > 10000 {
		t.Errorf("merged x: p50 %d µs p99 %d µs; want about 100 and 10000", m.P50US, m.P99US)
	}
	if got[1].Calls != 5 || got[2].Calls != 3 {
		t.Errorf("y %d calls, z %d calls; want 5 and 3", got[1].Calls, got[2].Calls)
	}

	buf.Reset()
	err = ctl.Run(context.Background(), ctl.Config{Hosts: []string{"http://" + a, "http://" + b},
		Command: ctl.Command{Name: ctl.Statements, Sort: "errors", Limit: 1}}, &buf)
	out = buf.String()
	if err != nil || !strings.Contains(out, x) || strings.Contains(out, y) || !strings.Contains(out, "1 statements merged from 2 hosts") {
		t.Errorf("table: %v\n%s", err, out)
	}
	// A host that cannot be read fails the run, and the others are still merged.
	buf.Reset()
	err = ctl.Run(context.Background(), ctl.Config{Hosts: []string{"http://" + a, "http://" + deadAddr(t)},
		Command: ctl.Command{Name: ctl.Statements}}, &buf)
	out = buf.String()
	if !errors.Is(err, ctl.ErrHostFailed) || !strings.Contains(out, "error") || !strings.Contains(out, "merged from 1 hosts") {
		t.Errorf("dead host: %v\n%s", err, out)
	}
	if err := ctl.Run(context.Background(), ctl.Config{Hosts: []string{"http://" + a},
		Command: ctl.Command{Name: ctl.Statements, Sort: "slow"}}, io.Discard); err == nil || !strings.Contains(err.Error(), "sort") {
		t.Errorf("bad sort: %v", err)
	}
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
