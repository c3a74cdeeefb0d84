package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/tracing/statements"
)

// TestCtlStatementsHidesSystemAndSaysWhenOff: with statement statistics off, `ctl
// statements` says so and how to turn them on, and exits 1 instead of "0 statements merged"
// with 0 (issue 47, finding 4). With them on, gocql's own system queries (its control
// connection's system.local, system.peers, system_schema) are hidden from `ctl statements`
// and `ctl top` unless --include-system (finding 3).
func TestCtlStatementsHidesSystemAndSaysWhenOff(t *testing.T) {
	st := mustStack(t, stackConfig{})
	admin := strings.TrimPrefix(st.Admin, "http://")
	ctl := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"ctl", "--hosts", admin}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	code, out := ctl("statements")
	if code != exitRuntime || !strings.Contains(out, "statement statistics are off") || !strings.Contains(out, "/tracecar/statement_stats?enable=true") {
		t.Errorf("statistics off: exit %d\n%s\nwant 1, saying they are off and how to turn them on", code, out)
	}

	mustAdmin(t, st.Admin, "POST", "/tracecar/statement_stats?enable=true")
	s := mustSession(t, st.Sidecar) // its control connection reads system tables now
	defer s.Close()
	mustKeyValueTable(t, s, "ctl_app", "int")
	load := func(n int) {
		for i := range n {
			if err := s.Query("INSERT INTO ctl_app.kv (k, v) VALUES (?, ?)", i, i).Exec(); err != nil {
				t.Fatal(err)
			}
			if err := s.Query("SELECT * FROM system.local").Exec(); err != nil {
				t.Fatal(err)
			}
		}
	}
	load(20)
	hasSystem := func(out string) bool {
		for _, line := range strings.Split(out, "\n") {
			for _, w := range strings.Fields(line) {
				if ks, _, ok := strings.Cut(w, "."); ok && statements.IsSystemKeyspace(ks) {
					return true
				}
			}
		}
		return false
	}
	code, out = ctl("statements", "--limit", "1000")
	if code != exitOK || !strings.Contains(out, "INSERT INTO ctl_app.kv") || hasSystem(out) {
		t.Errorf("statements: exit %d\n%s\nwant the application's INSERT and no system query", code, out)
	}
	code, out = ctl("statements", "--limit", "1000", "--include-system")
	if code != exitOK || !strings.Contains(out, "INSERT INTO ctl_app.kv") || !hasSystem(out) {
		t.Errorf("statements --include-system: exit %d\n%s\nwant the system queries too", code, out)
	}

	// top, in plain lines: two refreshes, the second with the interval's deltas.
	for _, tc := range []struct {
		args   []string
		system bool
	}{{nil, false}, {[]string{"--include-system"}, true}} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 3 {
				load(10)
				time.Sleep(100 * time.Millisecond)
			}
		}()
		code, out = ctl(append([]string{"top", "--count", "2", "--interval", "300ms", "--limit", "1000"}, tc.args...)...)
		<-done
		if code != exitOK || !strings.Contains(out, "INSERT INTO ctl_app.kv") || hasSystem(out) != tc.system {
			t.Errorf("top %v: exit %d\n%s\nwant the application's INSERT, and system queries %v", tc.args, code, out, tc.system)
		}
	}
}
