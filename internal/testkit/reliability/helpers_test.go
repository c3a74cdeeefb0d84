package reliability

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// testTimeout bounds every wait, so that a bug fails a test instead of hanging it. Nothing
// is asserted about time.
const testTimeout = 30 * time.Second

// heapBound is the acceptance bound on the Go heap of the sidecar and the node together
// (they share this process): each of them alone must stay under it.
const heapBound = 256 << 20

// testNode is an embedded node that can be stopped and started again on the same address,
// keeping its data, as a node process restarted on the same disk would.
type testNode struct {
	srv    *node.Server
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func startNode(tb testing.TB, cfg node.Config) *testNode {
	tb.Helper()
	return startNodeOn(tb, cfg, "127.0.0.1:0")
}

// startNodeOn starts a node listening on addr, such as "127.0.0.2:0".
func startNodeOn(tb testing.TB, cfg node.Config, addr string) *testNode {
	tb.Helper()
	n := &testNode{srv: node.New(cfg), addr: addr}
	n.start(tb)
	tb.Cleanup(n.stop)
	return n
}

// start serves the node on its address, retrying while the old listener's port is busy.
func (n *testNode) start(tb testing.TB) {
	tb.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(20 * time.Millisecond) {
		if ln, err = net.Listen("tcp", n.addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		tb.Fatalf("listen for the node on %s: %v", n.addr, err)
	}
	n.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan error, 1)
	go func() { n.done <- n.srv.Serve(ctx, ln) }()
}

// stop closes the node's listener and every connection, as a killed process would.
func (n *testNode) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	<-n.done
	n.cancel = nil
}

// testSidecar is a sidecar.Proxy serving on 127.0.0.1:0.
type testSidecar struct {
	*sidecar.Proxy
	addr string
}

func startSidecar(tb testing.TB, cfg sidecar.Config, tr *tracing.Tracer) *testSidecar {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.DrainTimeout = time.Second
	p := sidecar.New(cfg, tr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("sidecar Serve: %v", err)
		}
	})
	return &testSidecar{Proxy: p, addr: ln.Addr().String()}
}

// session opens a gocql session to addr that fails fast and reconnects fast.
func session(tb testing.TB, addr string) *gocql.Session {
	tb.Helper()
	return sessionWith(tb, addr, nil)
}

// sessionWith is session with the cluster configuration changed by edit, when not nil.
func sessionWith(tb testing.TB, addr string, edit func(*gocql.ClusterConfig)) *gocql.Session {
	tb.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	c := drivertest.Cluster(drivertest.Options{Host: host, Port: p})
	c.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 0}
	c.ReconnectInterval = 200 * time.Millisecond
	c.NumConns = 2
	if edit != nil {
		edit(c)
	}
	s, err := c.CreateSession()
	if err != nil {
		tb.Fatalf("gocql connect to %s: %v", addr, err)
	}
	tb.Cleanup(s.Close)
	return s
}

// mustExec runs a statement and fails the test on error.
func mustExec(tb testing.TB, s *gocql.Session, stmt string, values ...any) {
	tb.Helper()
	if err := s.Query(stmt, values...).Exec(); err != nil {
		tb.Fatalf("%s: %v", stmt, err)
	}
}

// prober keeps a driver busy with reads while an attack runs, and counts what happened.
type prober struct {
	ok, failed atomic.Int64
	firstErr   atomic.Pointer[error]
	stop       chan struct{}
	done       chan struct{}
}

func startProber(s *gocql.Session) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			var v string
			if err := s.Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
				p.failed.Add(1)
				p.firstErr.CompareAndSwap(nil, &err)
			} else {
				p.ok.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return p
}

// finish stops the prober and fails the test unless every request succeeded, and some ran.
func (p *prober) finish(tb testing.TB) {
	tb.Helper()
	close(p.stop)
	<-p.done
	if e := p.firstErr.Load(); e != nil {
		tb.Errorf("a driver's requests failed during the attack: %d of %d, first: %v", p.failed.Load(), p.failed.Load()+p.ok.Load(), *e)
	}
	if p.ok.Load() == 0 {
		tb.Errorf("no driver request completed during the attack")
	}
}

// memWatch samples the Go heap until stopped and keeps the peaks.
type memWatch struct {
	before             runtime.MemStats
	peakInuse, peakSys atomic.Uint64
	stop, done         chan struct{}
}

func watchMemory() *memWatch {
	m := &memWatch{stop: make(chan struct{}), done: make(chan struct{})}
	runtime.GC()
	runtime.ReadMemStats(&m.before)
	go func() {
		defer close(m.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > m.peakInuse.Load() {
				m.peakInuse.Store(ms.HeapInuse)
			}
			if ms.HeapSys > m.peakSys.Load() {
				m.peakSys.Store(ms.HeapSys)
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// finish stops sampling, logs the figures and fails the test when the peak heap in use
// reached bound.
func (m *memWatch) finish(tb testing.TB, what string, bound uint64) {
	tb.Helper()
	close(m.stop)
	<-m.done
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	tb.Logf("FIGURE %s: heap in use %s before, peak %s, %s after GC; heap_sys %s before, peak %s; RSS %s (VmHWM %s, race detector included)",
		what, mib(m.before.HeapInuse), mib(m.peakInuse.Load()), mib(after.HeapInuse), mib(m.before.HeapSys), mib(m.peakSys.Load()),
		procStatus("VmRSS"), procStatus("VmHWM"))
	if peak := m.peakInuse.Load(); peak >= bound {
		tb.Errorf("%s: peak heap in use %s, want under %s", what, mib(peak), mib(bound))
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// procStatus returns a field of /proc/self/status, or "n/a".
func procStatus(field string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "n/a"
}

// startupFrame is a STARTUP of protocol v4 on stream.
func startupFrame(stream int16) []byte {
	return cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: stream}, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
}

// dialReady opens a raw connection to addr and completes STARTUP.
func dialReady(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(testTimeout))
	if _, err := c.Write(startupFrame(0)); err != nil {
		tb.Fatal(err)
	}
	h, _, _, err := cql.ReadFrame(c, nil)
	if err != nil || h.Opcode != cql.OpReady {
		tb.Fatalf("STARTUP: got %s, %v; want READY", h.Opcode, err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// parallel runs f(i) for i in [0,n) on n goroutines and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}
