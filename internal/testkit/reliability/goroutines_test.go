package reliability

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
)

// TestConnectCloseNoGoroutineLeft opens and closes connections (some after half a header,
// some after STARTUP) and a driver's session through the sidecar, and checks that the number
// of goroutines comes back to exactly what it was before: not one is left per connection.
// The event loops are started by the first plaintext connection and kept for the life of
// the process (one goroutine each), so a first connection starts them before the count.
func TestConnectCloseNoGoroutineLeft(t *testing.T) {
	const rounds = 600
	n := startNode(t, node.Config{})
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	base := sc.Stats().Connections
	// settle waits until the sidecar holds no connection of ours and the number of
	// goroutines is at most want (any number when want < 0) and has stopped changing.
	settle := func(what string, want int) int {
		deadline := time.Now().Add(testTimeout)
		g, same := -1, 0
		for same < 10 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			now := runtime.NumGoroutine()
			if sc.Stats().Connections > base || want >= 0 && now > want || now != g {
				g, same = now, 0
				continue
			}
			same++
		}
		if got := sc.Stats().Connections; got != base {
			t.Fatalf("%s: sidecar holds %d connections; want %d", what, got, base)
		}
		return runtime.NumGoroutine()
	}
	// The first connection starts the event loops, for good.
	dialReady(t, sc.addr).Close()
	g0 := settle("after the first connection", -1)
	for i := range rounds {
		c, err := net.DialTimeout("tcp", sc.addr, testTimeout)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		switch i % 3 {
		case 1:
			c.Write(startupFrame(0)[:5]) // half a header
		case 2:
			c.Write(startupFrame(0))
		}
		c.Close()
	}
	s := session(t, sc.addr)
	var v string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if g := settle("after the loop", g0); g > g0 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d after %d connections and a session, %d before: %d left\n%s", g, rounds, g0, g-g0, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("FIGURE connect/close: %d connections and a session opened and closed, goroutines %d -> %d", rounds, g0, runtime.NumGoroutine())
}
