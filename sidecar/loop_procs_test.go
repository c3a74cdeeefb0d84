//go:build linux

package sidecar

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// loopProcsChild, set in the environment, makes TestEventLoopOwnP the child process that
// starts the loops and prints GOMAXPROCS before and after.
const loopProcsChild = "TRACECAR_TEST_LOOP_PROCS_CHILD"

// TestEventLoopOwnP checks the README's claim that each event loop keeps its own P, so
// that GOMAXPROCS grows by one per loop: the rest of the process keeps as many Ps as it had.
// The loops start once per process, so each case runs in a child process of the test
// binary, with GOMAXPROCS and TRACECAR_EVENT_LOOPS set.
func TestEventLoopOwnP(t *testing.T) {
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
