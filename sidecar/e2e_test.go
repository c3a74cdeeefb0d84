package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
)

// nodeAddr is where the end-to-end tests run the node: another loopback address than the
// sidecar's 127.0.0.1, so that a driver that learnt the node's own address from an
// unrewritten system table would dial past the sidecar, and fail the no-bypass checks.
const nodeAddr = "127.0.0.2:0"

// runningNode is an embedded node serving on loopback.
type runningNode struct {
	srv     *node.Server
	addr    string
	accepts atomic.Int64 // connections the node accepted
	cancel  context.CancelFunc
	done    chan error
}

// mustNode starts an embedded node on addr (nodeAddr for a free port) and stops it when the
// test ends.
func mustNode(tb testing.TB, cfg node.Config, addr string) *runningNode {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &runningNode{srv: node.New(cfg), addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- n.srv.Serve(ctx, acceptCounter{ln, &n.accepts}) }()
	tb.Cleanup(n.stop)
	return n
}

// stop stops the node: its listener and every connection close. It is idempotent.
func (n *runningNode) stop() {
	n.cancel()
	if err, ok := <-n.done; ok {
		close(n.done)
		_ = err
	}
}

// acceptCounter counts the connections a listener accepts.
type acceptCounter struct {
	net.Listener
	n *atomic.Int64
}

func (l acceptCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// mustProxyApart serves a proxy for n, with the tracer tr (nil for none), on 127.0.0.1 with a
// port other than the node's.
func mustProxyApart(tb testing.TB, cfg Config, tr *tracing.Tracer, n *runningNode) *testProxy {
	tb.Helper()
	cfg.NodeAddr = n.addr
	ln := listenApart(tb, "127.0.0.1", n.addr)
	return serveProxy(tb, New(cfg, tr), ln, ln.Addr().String())
}

// listenApart listens on host with a port that none of the addresses in avoid has.
func listenApart(tb testing.TB, host string, avoid ...string) net.Listener {
	tb.Helper()
	for {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			tb.Fatal(err)
		}
		port := mustAddrPort(l.Addr().String()).Port()
		if !slices.ContainsFunc(avoid, func(a string) bool { return mustAddrPort(a).Port() == port }) {
			return l
		}
		defer l.Close() // held until another port is found
	}
}

// sidecarOptions are the driver options for a client of the proxy.
func sidecarOptions(tp *testProxy, comp string) drivertest.Options {
	ap := netip.MustParseAddrPort(tp.addr)
	return drivertest.Options{Host: ap.Addr().String(), Port: int(ap.Port()), Compression: comp}
}

// checkNoBypass fails unless every connection and request the node served came through the
// proxy.
func checkNoBypass(tb testing.TB, n *runningNode, tp *testProxy) {
	tb.Helper()
	if err := bypassed(n, tp); err != nil {
		tb.Error(err)
	}
}

// bypassed returns an error unless every connection and request the node served came through
// the proxy, and the proxy forwarded something.
func bypassed(n *runningNode, tp *testProxy) error {
	st := tp.Stats()
	var errs []error
	if proxied, served := st.TotalRequests(), n.srv.Requests(); served != proxied {
		errs = append(errs, fmt.Errorf("node served %d requests, the sidecar forwarded %d; want them equal (nothing bypasses the sidecar)", served, proxied))
	} else if proxied == 0 {
		errs = append(errs, errors.New("the sidecar forwarded no request"))
	}
	if accepted, nodeConns := st.Accepted, n.accepts.Load(); uint64(nodeConns) > accepted {
		errs = append(errs, fmt.Errorf("node accepted %d connections, the sidecar %d; want no more at the node (one per sidecar client)", nodeConns, accepted))
	}
	return errors.Join(errs...)
}

func TestE2EGocqlSuite(t *testing.T) {
	for _, comp := range []string{"none", "lz4", "snappy"} {
		t.Run(comp, func(t *testing.T) {
			n := mustNode(t, node.Config{}, nodeAddr)
			tp := mustProxyApart(t, Config{}, nil, n)
			drivertest.RunGocql(t, sidecarOptions(tp, comp))
			checkNoBypass(t, n, tp)
			if got := tp.Stats().Rewritten; got == 0 {
				t.Errorf("no system.local/peers response was rewritten; want the driver's topology queries rewritten")
			}
		})
	}
}

func TestE2EPythonDriverSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	for _, comp := range []string{"none", "lz4", "snappy"} {
		t.Run(comp, func(t *testing.T) {
			n := mustNode(t, node.Config{}, nodeAddr)
			tp := mustProxyApart(t, Config{}, nil, n)
			o := sidecarOptions(tp, comp)
			o.Keyspace = "py_" + comp
			o.Protocol = 5 // at its defaults the driver reaches v5 through the sidecar
			drivertest.RunPython(t, o)
			checkNoBypass(t, n, tp)
		})
	}
}

func TestE2ENodeJSDriverSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	n := mustNode(t, node.Config{}, nodeAddr)
	tp := mustProxyApart(t, Config{}, nil, n)
	drivertest.RunNodeJS(t, sidecarOptions(tp, "none"))
	checkNoBypass(t, n, tp)
}

func TestE2EAuthPassesThrough(t *testing.T) {
	n := mustNode(t, node.Config{Auth: "cassandra:cassandra"}, nodeAddr)
	tp := mustProxyApart(t, Config{}, nil, n)
	tests := []struct {
		name       string
		user, pass string
		wantErr    string
	}{
		{"right password", "cassandra", "cassandra", ""},
		{"wrong password", "cassandra", "nope", "incorrect"},
		{"no authenticator", "", "", "authenticator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := sidecarOptions(tp, "none")
			o.User, o.Pass = tt.user, tt.pass
			cluster := drivertest.Cluster(o)
			cluster.ConnectTimeout = 5 * time.Second
			s, err := cluster.CreateSession()
			if tt.wantErr != "" {
				if err == nil {
					s.Close()
					t.Fatalf("CreateSession succeeded; want an error mentioning %q", tt.wantErr)
				}
				if !strings.Contains(strings.ToLower(err.Error()), tt.wantErr) {
					t.Errorf("CreateSession: %v; want an error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateSession: %v", err)
			}
			defer s.Close()
			var rel string
			if err := s.Query("SELECT release_version FROM system.local").Scan(&rel); err != nil || rel == "" {
				t.Errorf("query after auth: %q, %v; want a release version", rel, err)
			}
		})
	}
	checkNoBypass(t, n, tp)
}

func TestE2ENodeRestart(t *testing.T) {
	n := mustNode(t, node.Config{}, nodeAddr)
	tp := mustProxyApart(t, Config{}, nil, n)
	o := sidecarOptions(tp, "none")

	setup := func(s *gocql.Session) {
		t.Helper()
		for _, stmt := range []string{
			"CREATE KEYSPACE IF NOT EXISTS restart WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
			"CREATE TABLE IF NOT EXISTS restart.kv (k int PRIMARY KEY, v text)",
		} {
			if err := s.Query(stmt).Exec(); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	cluster := drivertest.Cluster(o)
	cluster.Timeout = 5 * time.Second
	cluster.NumConns = 2
	s, err := cluster.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	setup(s)

	// Load from several workers, until the node is gone and each has seen an error.
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Query("INSERT INTO restart.kv (k, v) VALUES (?, ?)", w*1_000_000+i, "x").Exec(); err != nil {
					failed.Add(1)
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	waitFor(t, "200 inserts before the node dies", func() bool { return ok.Load() >= 200 })
	n.stop() // the node dies mid-load
	waitFor(t, "errors after the node died", func() bool { return failed.Load() >= 8 })
	close(stop)
	wg.Wait() // every worker returned: errors, not hangs
	s.Close()
	if got := tp.Stats().NodeFailures; got == 0 {
		t.Errorf("Stats().NodeFailures = 0; want the lost node connections counted")
	}

	// A new node on the same address: new sessions work through the same sidecar.
	n2 := mustNode(t, node.Config{}, n.addr)
	var s2 *gocql.Session
	deadline := time.Now().Add(testTimeout)
	for {
		s2, err = cluster.CreateSession()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("CreateSession after the node came back: %v", err)
	}
	defer s2.Close()
	setup(s2)
	for i := range 100 {
		if err := s2.Query("INSERT INTO restart.kv (k, v) VALUES (?, ?)", i, "y").Exec(); err != nil {
			t.Fatalf("insert after restart: %v", err)
		}
	}
	var v string
	if err := s2.Query("SELECT v FROM restart.kv WHERE k = ?", 42).Scan(&v); err != nil || v != "y" {
		t.Errorf("select after restart: %q, %v; want \"y\"", v, err)
	}
	if n2.srv.Requests() == 0 {
		t.Errorf("the new node served no request")
	}
}

// waitFor polls cond until it holds, and fails tb if it does not within testTimeout.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %v for %s", testTimeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
