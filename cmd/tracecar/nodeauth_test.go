package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/tracing"
)

// mustAuthNode starts a node that requires USER:PASS, as `tracecar node --auth` does.
func mustAuthNode(tb testing.TB, auth string) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := node.New(node.Config{Auth: auth})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

func authSession(tb testing.TB, addr, user, pass string) *gocql.Session {
	tb.Helper()
	host, port, _ := strings.Cut(addr, ":")
	c := gocql.NewCluster(host)
	c.Port = atoi(tb, port)
	c.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: pass}
	c.DisableInitialHostLookup = true
	s, err := c.CreateSession()
	if err != nil {
		tb.Fatalf("gocql to %s: %v", addr, err)
	}
	tb.Cleanup(s.Close)
	return s
}

// TestNodeAuthSinks runs sampled mode and the CQL sink against a node that requires a
// login: with --node-username and --node-password the sessions carry the node's own events
// and the sink's rows are readable on the node; without them, neither happens.
func TestNodeAuthSinks(t *testing.T) {
	for _, tt := range []struct {
		name       string
		user, pass string
		want       bool
	}{
		{name: "with credentials", user: "cassandra", pass: "s3cret", want: true},
		{name: "without credentials", want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodeAddr := mustAuthNode(t, "cassandra:s3cret")
			st := mustStack(t, stackConfig{Node: nodeAddr, CQLSink: true, NodeUsername: tt.user, NodePassword: tt.pass})
			if err := st.tracer.SetConfig(tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 600}); err != nil {
				t.Fatal(err)
			}
			client := authSession(t, st.Sidecar, "cassandra", "s3cret")
			const n = 5
			for i := 0; i < n; i++ {
				var rv string
				if err := client.Query("SELECT release_version FROM system.local WHERE key = 'local'").Scan(&rv); err != nil {
					t.Fatal(err)
				}
			}
			// Node events are merged before a session is recorded, so wait for the sessions.
			var ours []tracing.Session
			deadline := time.Now().Add(60 * time.Second)
			for len(ours) < n && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				ours = ours[:0]
				for _, s := range st.tracer.SlowLog(0) {
					if strings.HasPrefix(s.Parameters["query"], "SELECT release_version") && s.Command != "PREPARE" {
						ours = append(ours, s)
					}
				}
			}
			if len(ours) < n {
				t.Fatalf("%d sampled sessions recorded; want %d", len(ours), n)
			}
			withNode := 0
			for _, s := range ours {
				for _, e := range s.Events {
					if e.Source == tracing.SourceNode {
						withNode++
						break
					}
				}
			}
			if got := withNode == len(ours); got != tt.want {
				t.Errorf("%d of %d sampled sessions carry node events; want all: %v", withNode, len(ours), tt.want)
			}

			direct := authSession(t, nodeAddr, "cassandra", "s3cret")
			rows := 0
			deadline = time.Now().Add(30 * time.Second)
			for {
				rows = 0
				iter := direct.Query("SELECT session_id FROM tracecar_traces.sessions").Iter()
				var id gocql.UUID
				for iter.Scan(&id) {
					rows++
				}
				iter.Close() // the keyspace does not exist until the sink's first write
				if rows >= n || !tt.want && time.Now().Add(25*time.Second).After(deadline) || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if got := rows >= n; got != tt.want {
				t.Errorf("tracecar_traces.sessions has %d rows on the node; want at least %d: %v", rows, n, tt.want)
			}
		})
	}
}
