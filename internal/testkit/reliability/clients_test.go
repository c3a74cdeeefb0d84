package reliability

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// TestClientThatNeverReads: a client pipelines requests whose responses are large and never
// reads them. The sidecar buffers a bounded amount toward it (its write buffer and the
// kernel's), stops reading it, and the heap stays bounded while a driver is served.
func TestClientThatNeverReads(t *testing.T) {
	n := startNode(t, node.Config{})
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(t.Context()) })
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, tr)
	s := session(t, sc.addr)
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS rel WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS rel.big (k int PRIMARY KEY, v blob)")
	blob := make([]byte, 64<<10)
	for k := range 16 {
		mustExec(t, s, "INSERT INTO rel.big (k, v) VALUES (?, ?)", k, blob)
	}

	probe := startProber(s)
	mem := watchMemory()
	c := dialReady(t, sc.addr)
	defer c.Close()
	// Each response is 1 MiB; each request is 4 KiB (the query padded with spaces), so that
	// the requests themselves are more than the kernel's buffers can absorb.
	const requests = 50000
	pad := make([]byte, 4<<10)
	for i := range pad {
		pad[i] = ' '
	}
	var sent atomic.Int64
	written := make(chan struct{})
	go func() {
		defer close(written)
		c.SetWriteDeadline(time.Now().Add(3 * time.Second))
		for i := range requests {
			q := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: int16(i % 32768)}, cql.Query{Query: "SELECT * FROM rel.big" + string(pad), Params: cql.QueryParams{Consistency: cql.One}})
			if _, err := c.Write(q); err != nil {
				return // the sidecar stopped reading us: backpressure
			}
			sent.Add(1)
		}
	}()
	<-written
	// Give the pipeline time to fill everything it can.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	mem.finish(t, "client that never reads", heapBound)
	probe.finish(t)
	st := sc.Stats()
	t.Logf("FIGURE never-reading client: wrote %d requests of 4 KiB (%s) of %d before the sidecar stopped reading it (each asks for a 1 MiB response); sidecar forwarded %s toward clients in all",
		sent.Load(), mib(uint64(sent.Load())*4<<10), requests, mib(st.BytesToClients))
	if sent.Load() == requests {
		t.Errorf("the sidecar read all %d requests of a client that reads nothing: no backpressure", requests)
	}
}

// TestIdleConnections holds 2,000 idle connections through the sidecar (2,000 more to the
// node behind it) and checks the heap per connection and that a driver is served.
func TestIdleConnections(t *testing.T) {
	const conns = 2000
	n := startNode(t, node.Config{})
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	s := session(t, sc.addr)
	mem := watchMemory()
	held := make([]net.Conn, conns)
	g0 := runtime.NumGoroutine()
	parallel(50, func(w int) {
		for i := w; i < conns; i += 50 {
			held[i] = dialReady(t, sc.addr)
		}
	})
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	probe := startProber(s)
	time.Sleep(200 * time.Millisecond)
	probe.finish(t)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	perConn := (ms.HeapInuse - mem.before.HeapInuse) / conns
	t.Logf("FIGURE idle connections: %d held (sidecar Connections=%d), %d goroutines for them, heap per connection %.0f KiB (sidecar and node side together)",
		conns, sc.Stats().Connections, runtime.NumGoroutine()-g0, float64(perConn)/1024)
	// The stated bound: 128 KiB of heap per connection, sidecar and node side together
	// (16 KiB readers and writers on each side, and their state).
	mem.finish(t, "2,000 idle connections", conns*128<<10)
	if got := sc.Stats().Connections; got < conns {
		t.Errorf("sidecar holds %d connections, want at least %d", got, conns)
	}
}

// TestConnectCloseLoop opens and closes connections in a tight loop, some after a partial
// frame, and checks that nothing is left behind and a driver is served throughout.
func TestConnectCloseLoop(t *testing.T) {
	const rounds = 2000
	n := startNode(t, node.Config{})
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	g0 := runtime.NumGoroutine()
	base := sc.Stats().Connections
	s := session(t, sc.addr)
	probe := startProber(s)
	mem := watchMemory()
	parallel(8, func(w int) {
		for i := w; i < rounds; i += 8 {
			c, err := net.DialTimeout("tcp", sc.addr, testTimeout)
			if err != nil {
				t.Errorf("dial %d: %v", i, err)
				return
			}
			switch i % 3 {
			case 1:
				c.Write(startupFrame(0)[:5]) // half a header
			case 2:
				c.Write(startupFrame(0))
			}
			c.Close()
		}
	})
	probe.finish(t)
	s.Close()
	deadline := time.Now().Add(testTimeout)
	for sc.Stats().Connections > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for runtime.NumGoroutine() > g0+10 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	mem.finish(t, "2,000 connect/close", heapBound)
	st := sc.Stats()
	t.Logf("FIGURE connect/close loop: %d connections opened and closed, %d left open (base %d), goroutines %d -> %d",
		rounds, st.Connections, base, g0, runtime.NumGoroutine())
	if st.Connections != base {
		t.Errorf("sidecar holds %d connections after the loop, want %d", st.Connections, base)
	}
	if g := runtime.NumGoroutine(); g > g0+10 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d after the loop, %d before: connections leak\n%s", g, g0, buf[:runtime.Stack(buf, true)])
	}
}
