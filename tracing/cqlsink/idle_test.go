package cqlsink

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
)

// TestConnectorClosesIdleSession checks that a session nobody asks for is closed, and with
// it gocql's heartbeats (an OPTIONS every 5 s per connection, for as long as it is open,
// which woke a sidecar and its node for ever once node events had been fetched), and that
// the next use connects again.
func TestConnectorClosesIdleSession(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := node.New(node.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	c := &Connector{Addr: ln.Addr().String(), IdleClose: 100 * time.Millisecond}
	defer c.Close()
	ev := LazyNodeEvents(c)
	id := [16]byte{1}
	if _, err := ev.Finished(ctx, [][16]byte{id}); err != nil {
		t.Fatal(err)
	}
	if n := heartbeats(); n == 0 {
		t.Fatal("no gocql heartbeat goroutine while the session is open: the check below could not fail")
	}
	waitUntil(t, "the idle session closed", func() bool { return c.closes.Load() == 1 })
	waitUntil(t, "no gocql heartbeat goroutine", func() bool { return heartbeats() == 0 })
	if _, err := ev.Finished(ctx, [][16]byte{id}); err != nil {
		t.Fatalf("after the idle close: %v; want a new session", err)
	}
	if n := heartbeats(); n == 0 {
		t.Fatal("no gocql heartbeat goroutine: the session did not connect again")
	}
}

// heartbeats counts the goroutines that send gocql's heartbeats.
func heartbeats() int {
	buf := make([]byte, 4<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return strings.Count(stacks, "gocql.(*Conn).heartBeat(") + strings.Count(stacks, "gocql.(*controlConn).heartBeat(")
}

// waitUntil waits for cond, for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
