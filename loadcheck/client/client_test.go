package client

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
)

// mustNode starts an embedded node on a loopback port and returns its address.
func mustNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := node.New(node.Config{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("node did not stop")
		}
	})
	return ln.Addr().String()
}

// TestClientsAgree: gocql and the wire client, each at its protocol (v4 negotiated, v5),
// do the same through the one interface against a real node: a row written alone and
// three in a batch are read back through pages of two rows, with values rewritten in
// place or given in other bytes between requests, a statement that cannot be prepared fails its every use, and a query of a
// key without rows reads none.
func TestClientsAgree(t *testing.T) {
	addr := mustNode(t)
	for _, c := range []struct {
		name string
		dial func(context.Context, Options, string) (Session, error)
		v    int
	}{
		{"gocql", func(ctx context.Context, o Options, a string) (Session, error) { return DialGocql(ctx, o, a) }, 0},
		{"wire", func(ctx context.Context, o Options, a string) (Session, error) { return DialWire(ctx, o, a) }, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			o := Options{CL: "ONE", ProtocolVersion: c.v, Timeout: 5 * time.Second, Connections: 1, Concurrency: 1,
				Compression: "none", PageSize: 2}
			s, err := c.dial(ctx, o, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ks := "agree_" + c.name
			for _, ddl := range []string{
				"CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
				"CREATE TABLE " + ks + ".t (k int, c int, v blob, PRIMARY KEY (k, c))",
			} {
				if err := s.Exec(ctx, ddl); err != nil {
					t.Fatalf("%s: %v", ddl, err)
				}
			}
			cl := s.Client(0, nil)
			ins, err := cl.Prepare(ctx, Stmt{Text: "INSERT INTO " + ks + ".t (k, c, v) VALUES (?, ?, ?)"})
			if err != nil {
				t.Fatal(err)
			}
			sel, err := cl.Prepare(ctx, Stmt{Text: "SELECT * FROM " + ks + ".t WHERE k = ?", CL: "QUORUM", Paged: true})
			if err != nil {
				t.Fatal(err)
			}
			k, ck, v := int4(7), int4(0), []byte("v")
			row := [][]byte{k, ck, v}
			if err := cl.Write(ctx, ins, row); err != nil {
				t.Fatal(err)
			}
			var batch [][]byte
			for i := int32(1); i <= 3; i++ {
				batch = append(batch, int4(7), int4(i), []byte{byte(i)})
			}
			if err := cl.Batch(ctx, cql.BatchUnlogged, ins, batch, 3, false); err != nil {
				t.Fatal(err)
			}
			if n, err := cl.Query(ctx, sel, [][]byte{k}); err != nil || n != 4 {
				t.Errorf("key 7 read %d rows (%v); want 4, over two pages", n, err)
			}
			binary.BigEndian.PutUint32(k, 8) // the same values, rewritten in place
			if n, err := cl.Query(ctx, sel, [][]byte{k}); err != nil || n != 0 {
				t.Errorf("key 8 read %d rows (%v); want none", n, err)
			}
			if err := cl.Write(ctx, ins, row); err != nil {
				t.Fatal(err)
			}
			if n, err := cl.Query(ctx, sel, [][]byte{k}); err != nil || n != 1 {
				t.Errorf("key 8 read %d rows (%v) after its write; want 1", n, err)
			}
			if n, err := cl.Query(ctx, sel, [][]byte{int4(7)}); err != nil || n != 4 {
				t.Errorf("key 7 in new bytes read %d rows (%v); want 4", n, err)
			}
			bad, err := cl.Prepare(ctx, Stmt{Text: "SELECT * FROM " + ks + ".nosuch WHERE k = ?"})
			if err == nil {
				if _, err = cl.Query(ctx, bad, [][]byte{k}); err == nil {
					t.Error("a query of a table that does not exist succeeded")
				}
			}
		})
	}
}

func int4(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
