package main

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/node"
)

// holdRelay relays TCP connections to a node, and holds everything clients send while it
// is armed, until release: a node that is slow on demand.
type holdRelay struct {
	addr string
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

// hold arms the relay: what clients send from now on waits for release.
func (r *holdRelay) hold() {
	r.mu.Lock()
	r.gate = make(chan struct{})
	r.mu.Unlock()
}

// release forwards what was held, and what comes next.
func (r *holdRelay) release() {
	r.mu.Lock()
	if r.gate != nil {
		close(r.gate)
		r.gate = nil
	}
	r.mu.Unlock()
}

func (r *holdRelay) wait() {
	r.mu.Lock()
	g := r.gate
	r.mu.Unlock()
	if g != nil {
		<-g
	}
}

// mustHoldRelay starts a holdRelay to target until the test ends.
func mustHoldRelay(tb testing.TB, target string) *holdRelay {
	tb.Helper()
	r := &holdRelay{}
	r.addr = mustRelay(tb, target, r.wait)
	tb.Cleanup(r.release) // first: the relay's own cleanup waits for its goroutines
	return r
}

// TestQueriesHeldByASlowNode is the acceptance test of GET /tracecar/queries: gocql sends a
// prepared SELECT through the sidecar to a node behind a relay that holds it; the endpoint
// lists it with its elapsed time growing, with what each mode can tell of it, and lists
// nothing once the answer is back.
func TestQueriesHeldByASlowNode(t *testing.T) {
	srv := node.New(node.Config{})
	nln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithCancel(context.Background())
	ndone := make(chan error, 1)
	go func() { ndone <- srv.Serve(nctx, nln) }()
	defer func() { ncancel(); <-ndone }()
	relay := mustHoldRelay(t, nln.Addr().String())
	st := mustStack(t, stackConfig{Node: relay.addr})
	var posts atomic.Int64
	c := newAdminClient(st.Admin, &posts)
	defer c.close()

	s := mustSession(t, st.Sidecar)
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE shop WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE shop.orders (id int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const text = "SELECT v FROM shop.orders WHERE id = ?"
	tests := []struct {
		name      string
		setup     []string
		wantText  string
		wantCL    string
		wantFrom  string
		wantTrace string
	}{
		{"fast mode", []string{"/storage_service/slow_query?enable=true&fast=true&threshold=10000000"},
			text, "LOCAL_ONE", "tracing", "fast"},
		{"statement statistics", []string{"/storage_service/slow_query?enable=false", "/tracecar/statement_stats?enable=true"},
			text, "", "statement_stats", ""},
		{"tracing and statistics off", []string{"/tracecar/statement_stats?enable=false"}, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range tt.setup {
				if err := c.post(p); err != nil {
					t.Fatal(err)
				}
			}
			get := func() error {
				var v string
				err := s.Query(text, 42).Consistency(gocql.LocalOne).Scan(&v)
				if err == gocql.ErrNotFound {
					err = nil
				}
				return err
			}
			if err := get(); err != nil { // prepared now, so that the held request is its EXECUTE
				t.Fatal(err)
			}
			relay.hold()
			done := make(chan error, 1)
			go func() { done <- get() }()
			var held admin.Query
			deadline := time.Now().Add(20 * time.Second)
			for held.Opcode == "" {
				var qs []admin.Query
				if err := c.get("/tracecar/queries", &qs); err != nil {
					t.Fatal(err)
				}
				for _, q := range qs {
					if q.Opcode == "EXECUTE" {
						held = q
					}
				}
				if time.Now().After(deadline) {
					relay.release()
					t.Fatalf("the held EXECUTE is not in /tracecar/queries: %+v", qs)
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			var later []admin.Query
			if err := c.get("/tracecar/queries?min_elapsed=50ms", &later); err != nil {
				t.Fatal(err)
			}
			relay.release()
			if err := <-done; err != nil {
				t.Fatalf("the held query: %v", err)
			}
			if held.Statement != tt.wantText || held.Consistency != tt.wantCL || held.StatementFrom != tt.wantFrom || held.TraceMode != tt.wantTrace {
				t.Errorf("held request %+v; want statement %q consistency %q from %q trace mode %q",
					held, tt.wantText, tt.wantCL, tt.wantFrom, tt.wantTrace)
			}
			if tt.wantText != "" && (held.Keyspace != "shop" || held.Table != "orders") {
				t.Errorf("held request target %q.%q; want shop.orders", held.Keyspace, held.Table)
			}
			if held.ElapsedUS < 0 || held.StartedAt == nil || held.Client == "" {
				t.Errorf("held request %+v: want its elapsed time, start and client", held)
			}
			if len(later) != 1 || later[0].Stream != held.Stream || later[0].ElapsedUS < 50000 || later[0].ElapsedUS < held.ElapsedUS {
				t.Errorf("50 ms later, min_elapsed=50ms: %+v; want the same request, elapsed ≥ 50 ms and grown from %d µs", later, held.ElapsedUS)
			}
			var after []admin.Query
			for i := 0; ; i++ {
				if err := c.get("/tracecar/queries", &after); err != nil {
					t.Fatal(err)
				}
				if len(after) == 0 {
					break
				}
				if i == 200 {
					t.Fatalf("after the answer, /tracecar/queries still lists %+v", after)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
