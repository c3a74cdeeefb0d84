package pipeline

import (
	"fmt"
	"sync"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestInspectExecuteProbesOnce: the first EXECUTE of an unknown id is probed (its
// skip_metadata flag cleared); once the id is known not to read a system table, its
// EXECUTEs are forwarded as sent, without allocating.
func TestInspectExecuteProbesOnce(t *testing.T) {
	c := fuzzConn(0)
	f := executeFrame(1)
	h, _ := cql.ParseHeader(f)
	flagsAt := cql.HeaderSize + 2 + len("0123456789abcdef") + 2
	kind, _, id := c.inspectFrame(h, f)
	if kind != kindProbe || id != "0123456789abcdef" {
		t.Fatalf("first EXECUTE: kind %#x, probe %q; want a probe of the id", kind, id)
	}
	if f[flagsAt]&cql.QuerySkipMetadata != 0 {
		t.Fatalf("probe left skip_metadata set")
	}
	// The node answers with rows of a user table: the id is not probed again.
	rows := cql.RowsResult{Metadata: cql.RowsMetadata{Columns: []cql.ColumnSpec{{Keyspace: "ks", Table: "t", Name: "v", Type: cql.Simple(cql.TypeInt)}}, ColumnCount: 1}}
	c.probeResult(rows, Inflight{kind: kind, probe: id})
	f = executeFrame(2)
	if kind, _, _ := c.inspectFrame(h, f); kind != kindNone {
		t.Fatalf("EXECUTE of a checked id: kind %#x, want none", kind)
	}
	if f[flagsAt]&cql.QuerySkipMetadata == 0 {
		t.Fatalf("EXECUTE of a checked id lost its skip_metadata flag")
	}
	if n := testing.AllocsPerRun(100, func() { c.inspectFrame(h, f) }); n != 0 {
		t.Errorf("inspect of a checked EXECUTE allocates %.1f times; want 0", n)
	}
}

// TestStatementTableNames: a table reference follows CQL's rule for a name's case, as
// cqltext reads it; a quoted name must be written exactly, and an unterminated one names
// nothing.
func TestStatementTableNames(t *testing.T) {
	tests := []struct {
		q    string
		want rewriteKind
	}{
		{"SELECT * FROM SYSTEM.LOCAL", kindLocal},
		{`SELECT * FROM "system"."peers_v2"`, kindPeersV2},
		{`SELECT * FROM "System".local`, kindNone},
		{`SELECT * FROM system."Local"`, kindNone},
		{`SELECT * FROM system."local`, kindNone},
		{`SELECT * FROM system."lo""cal"`, kindNone},
		{"SELECT deadbeef-0000-4000-8000-00000000cafe FROM system.peers", kindPeers},
		{"SELECT a FROM system.local_x", kindNone},
		{"SELECT a FROM system -- .local\n.peers", kindPeers},
		{"SELECT f(a, (b)) AS \"FROM\" FROM system.local", kindLocal},
		{"SELECT * FROM system.'local'", kindNone},
	}
	for _, tt := range tests {
		if got := statementTable([]byte(tt.q), false); got != tt.want {
			t.Errorf("statementTable(%q) = %#x; want %#x", tt.q, got, tt.want)
		}
	}
}

// TestCheckedStmts checks the set of ids known to read no system table: every id added is
// found, whether merged into the lock-free map yet or not, one never added is not, and the
// set reports full at maxCheckedStmts and takes no more; with concurrent readers (run it
// under -race).
func TestCheckedStmts(t *testing.T) {
	var s checkedStmts
	id := func(i int) string { return fmt.Sprintf("id-%06d", i) }
	var readers sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s.has([]byte(id(i % 1000)))
			}
		}()
	}
	for i := range maxCheckedStmts + 10 {
		s.add(id(i))
		if i < 3000 || i%997 == 0 {
			for _, j := range []int{i, i / 2, 0} {
				if found, _ := s.has([]byte(id(j))); !found {
					t.Fatalf("after %d adds, id %d not found", i+1, j)
				}
			}
			if found, _ := s.has([]byte(id(i + 1))); found {
				t.Fatalf("after %d adds, id %d, never added, found", i+1, i+1)
			}
		}
	}
	close(stop)
	readers.Wait()
	if found, full := s.has([]byte("never")); found || !full {
		t.Errorf("has(never) = %v, %v at the cap; want false, true", found, full)
	}
	if found, _ := s.has([]byte(id(maxCheckedStmts + 5))); found {
		t.Errorf("an id added beyond the cap was kept")
	}
	if got := s.n.Load(); got != maxCheckedStmts {
		t.Errorf("%d ids kept; want %d", got, maxCheckedStmts)
	}
}
