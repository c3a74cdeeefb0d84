package sidecar

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// holdingNode is a fake node that answers every request at once, but holds a QUERY whose
// text contains "held" until release is closed.
func holdingNode(tb testing.TB) (*fakeNode, chan struct{}) {
	n := mustFakeNode(tb)
	release := make(chan struct{})
	n.handle = func(fc *fakeConn, h cql.Header, body []byte) {
		if h.Opcode == cql.OpQuery && bytes.Contains(body, []byte("held")) {
			go func() {
				<-release
				fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, voidBody()))
			}()
			return
		}
		fc.send(frame(cql.ResponseBit|h.Version, 0, h.Stream, cql.OpResult, voidBody()))
	}
	return n, release
}

// saslPlain is an AUTH_RESPONSE body carrying user and password.
func saslPlain(user, pass string) []byte {
	tok := "\x00" + user + "\x00" + pass
	return append([]byte{0, 0, 0, byte(len(tok))}, tok...)
}

// TestQueriesShowsARequestHeldByTheNode holds a request at the node and reads it from
// Queries, with what each source of its statement tells, then answers it: it is gone.
func TestQueriesShowsARequestHeldByTheNode(t *testing.T) {
	const held = "SELECT v FROM shop.orders WHERE id = 'held' AND n = 42"
	const shown = "SELECT v FROM shop.orders WHERE id = ? AND n = ?"
	tests := []struct {
		name    string
		tracing tracing.Config // with a tracer
		noTr    bool           // no tracer at all
		stats   bool
		metrics bool
		want    Query // Client, Elapsed and Stream are checked apart
	}{
		{name: "fast mode", tracing: tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e9},
			want: Query{User: "alice", Opcode: cql.OpQuery, Statement: shown, Keyspace: "shop", Table: "orders",
				Consistency: "ONE", From: FromTracing, TraceMode: tracing.ModeFast}},
		{name: "full mode with statistics", tracing: tracing.Config{Enable: true, ThresholdMicros: 1e9}, stats: true,
			want: Query{User: "alice", Opcode: cql.OpQuery, Statement: shown, Keyspace: "shop", Table: "orders",
				Consistency: "ONE", From: FromTracing, TraceMode: tracing.ModeFull}},
		{name: "statistics only", tracing: tracing.DefaultConfig(), stats: true,
			want: Query{User: "alice", Opcode: cql.OpQuery, Statement: shown, Keyspace: "shop", Table: "orders", From: FromStatements}},
		{name: "tracing off, metrics", tracing: tracing.DefaultConfig(), metrics: true,
			want: Query{User: "alice", Opcode: cql.OpQuery}},
		{name: "nothing kept", noTr: true, want: Query{Opcode: cql.OpQuery}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, release := holdingNode(t)
			cfg := Config{NodeAddr: n.addr()}
			if tt.stats {
				st := statements.New(statements.Options{})
				st.SetEnabled(true)
				cfg.Statements = st
			}
			if tt.metrics {
				cfg.Metrics = metrics.New()
			}
			var tr *tracing.Tracer
			if !tt.noTr {
				tr = tracing.New(tracing.Options{})
				t.Cleanup(func() { tr.Close(t.Context()) })
				if err := tr.SetConfig(tt.tracing); err != nil {
					t.Fatal(err)
				}
			}
			tp := mustProxyWith(t, New(cfg, tr), nil)
			c := mustDial(t, tp.addr)
			c.send(frame(cql.V4, 0, 1, cql.OpAuthResponse, saslPlain("alice", "pw")))
			c.recv()
			c.send(frame(cql.V4, 0, 7, cql.OpQuery, queryBody(held)))

			var got []Query
			waitFor(t, "the held request in Queries", func() bool {
				got = tp.Queries(0, 0)
				return len(got) == 1
			})
			q := got[0]
			if q.Client.String() != c.c.LocalAddr().String() || q.Stream != 7 {
				t.Errorf("client %s stream %d; want %s and 7", q.Client, q.Stream, c.c.LocalAddr())
			}
			if tt.noTr && q.Elapsed != -1 || !tt.noTr && q.Elapsed < 0 {
				t.Errorf("elapsed %v", q.Elapsed)
			}
			q.Client, q.Stream, q.Elapsed = tt.want.Client, 0, 0
			if q != tt.want {
				t.Errorf("Queries:\n got %+v\nwant %+v", q, tt.want)
			}
			if !tt.noTr {
				time.Sleep(20 * time.Millisecond)
				if later := tp.Queries(0, 0); len(later) != 1 || later[0].Elapsed < 20*time.Millisecond {
					t.Errorf("20 ms later: %+v; want its elapsed time to have grown past 20ms", later)
				}
				if long := tp.Queries(time.Hour, 0); len(long) != 0 {
					t.Errorf("min 1h: %+v; want none", long)
				}
			}
			close(release)
			if h, _ := c.recv(); h.Stream != 7 {
				t.Fatalf("response on stream %d; want 7", h.Stream)
			}
			if after := tp.Queries(0, 0); len(after) != 0 {
				t.Errorf("after the answer: %+v; want none", after)
			}
		})
	}
}

// TestQueriesUnderLoad reads Queries over and over while clients keep requests in flight
// through a node that answers at once, in fast mode with statement statistics: under the
// race detector this is the proof that the reader and the data path share the stream
// tables safely. It also checks the order (longest first), the limit, and that what it
// lists is still in flight when it reads the request's record.
func TestQueriesUnderLoad(t *testing.T) {
	n := mustFakeNode(t)
	st := statements.New(statements.Options{})
	st.SetEnabled(true)
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(t.Context()) })
	if err := tr.SetConfig(tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e9}); err != nil {
		t.Fatal(err)
	}
	tp := mustProxyWith(t, New(Config{NodeAddr: n.addr(), Statements: st, Metrics: metrics.New()}, tr), nil)

	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		c := mustDial(t, tp.addr)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				var frames [][]byte
				for s := range 16 {
					frames = append(frames, frame(cql.V4, 0, int16(s), cql.OpQuery, queryBody(fmt.Sprintf("SELECT v FROM ks.t%d WHERE k = %d", w, i))))
				}
				c.send(frames...)
				for range frames {
					c.recv()
				}
			}
		})
	}
	seen := 0
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) || seen == 0 {
		qs := tp.Queries(0, 8)
		if len(qs) > 8 {
			t.Fatalf("limit 8: got %d", len(qs))
		}
		for i, q := range qs {
			if i > 0 && q.Elapsed > qs[i-1].Elapsed {
				t.Fatalf("not longest first: %v after %v", q.Elapsed, qs[i-1].Elapsed)
			}
			// Every request is traced: one listed was still in flight when its record was
			// read, so it has its statement (one answered in between is left out).
			if q.From != FromTracing || q.Keyspace != "ks" || q.TraceMode != tracing.ModeFast {
				t.Fatalf("a request in flight read as %+v", q)
			}
		}
		seen += len(qs)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d requests seen in flight", seen)
}
