//go:build linux

package sidecar

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// loopProcsChild, set in the environment, makes TestEventLoopOwnP the child process that
// starts the loops and prints GOMAXPROCS before and after.
const loopProcsChild = "TRACECAR_TEST_LOOP_PROCS_CHILD"

// TestEventLoopOwnP checks the README's claim that each event loop keeps its own P, so
// that GOMAXPROCS grows by one per loop: the rest of the process keeps as many Ps as it had.
// The loops start once per process, so each case runs in a child process of the test
// binary, with GOMAXPROCS and TRACECAR_EVENT_LOOPS set.
func TestEventLoopOwnP(t *testing.T) {
	if os.Getenv(loopProcsChild) == "serve" {
		serveChild(t)
		return
	}
	if os.Getenv(loopProcsChild) != "" {
		before := runtime.GOMAXPROCS(0)
		if _, err := processLoops.pick(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("procs before=%d loops=%d after=%d\n", before, len(processLoops.loops), runtime.GOMAXPROCS(0))
		return
	}
	for _, tt := range []struct {
		name       string
		gomaxprocs string
		loops      string // TRACECAR_EVENT_LOOPS
		want       string
	}{
		{"default, 1 P", "1", "", "procs before=1 loops=1 after=2"},
		{"default, 7 Ps", "7", "", "procs before=7 loops=3 after=10"},
		{"3 loops, 2 Ps", "2", "3", "procs before=2 loops=3 after=5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEventLoopOwnP$", "-test.count=1")
			cmd.Env = append(os.Environ(), loopProcsChild+"=1", "GOMAXPROCS="+tt.gomaxprocs, "TRACECAR_EVENT_LOOPS="+tt.loops)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var got string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "procs ") {
					got = l
				}
			}
			if got != tt.want {
				t.Errorf("GOMAXPROCS=%s TRACECAR_EVENT_LOOPS=%q: %q; want %q\n%s", tt.gomaxprocs, tt.loops, got, tt.want, out)
			}
		})
	}
}

// TestServeStartsLoops: Serve starts the event loops before it accepts, so that their fixed
// cost is the sidecar's at startup and not its first connection's (nor counted in what
// connections cost, bench/idle.sh); with the loop turned off it starts none. No client
// connects. Each case is a child process, as the loops start once per process.
func TestServeStartsLoops(t *testing.T) {
	for _, tt := range []struct {
		name, loop, want string
	}{
		{"loop", "", "procs before=2 after=3"},
		{"loop off", "off", "procs before=2 after=2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEventLoopOwnP$", "-test.count=1")
			cmd.Env = append(os.Environ(), loopProcsChild+"=serve", "GOMAXPROCS=2", "TRACECAR_EVENT_LOOPS=", "TRACECAR_EVENT_LOOP="+tt.loop)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.want+"\n") {
				t.Errorf("%s; want %q", out, tt.want)
			}
		})
	}
}

// serveChild serves on a listener that no client connects to, and prints GOMAXPROCS before
// and once it changed (or a second passed).
func serveChild(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(Config{NodeAddr: "127.0.0.1:1"}, nil).Serve(ctx, ln) }()
	deadline := time.Now().Add(time.Second)
	for runtime.GOMAXPROCS(0) == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Printf("procs before=%d after=%d\n", before, runtime.GOMAXPROCS(0))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
