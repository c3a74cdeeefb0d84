package clustertest_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/sidecar"
)

// watchPolicy is gocql's token-aware policy, recording the hosts the driver adds and marks
// up or down.
type watchPolicy struct {
	gocql.HostSelectionPolicy
	mu     sync.Mutex
	hosts  map[netip.AddrPort]bool // added hosts, and whether up
	change chan struct{}           // signalled on every change
}

func newWatchPolicy() *watchPolicy {
	return &watchPolicy{
		HostSelectionPolicy: gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy()),
		hosts:               map[netip.AddrPort]bool{},
		change:              make(chan struct{}, 1),
	}
}

func hostAddr(h *gocql.HostInfo) netip.AddrPort {
	a, _ := netip.AddrFromSlice(h.ConnectAddress())
	return netip.AddrPortFrom(a.Unmap(), uint16(h.Port()))
}

// set records host h as up or down; with onlyNew, only if it is new.
func (w *watchPolicy) set(h *gocql.HostInfo, up, onlyNew bool) {
	w.mu.Lock()
	if _, known := w.hosts[hostAddr(h)]; !known || !onlyNew {
		w.hosts[hostAddr(h)] = up
	}
	w.mu.Unlock()
	select {
	case w.change <- struct{}{}:
	default:
	}
}

// AddHost records a host found in system.peers; gocql adds a host back before it has
// connected to it again, and calls HostUp once it has.
func (w *watchPolicy) AddHost(h *gocql.HostInfo) {
	w.set(h, true, true)
	w.HostSelectionPolicy.AddHost(h)
}

func (w *watchPolicy) HostUp(h *gocql.HostInfo) {
	w.set(h, true, false)
	w.HostSelectionPolicy.HostUp(h)
}

func (w *watchPolicy) HostDown(h *gocql.HostInfo) {
	w.set(h, false, false)
	w.HostSelectionPolicy.HostDown(h)
}

func (w *watchPolicy) snapshot() map[netip.AddrPort]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[netip.AddrPort]bool{}
	for k, v := range w.hosts {
		out[k] = v
	}
	return out
}

// waitFor waits up to 30 s for the driver to see host as up (or down).
func (w *watchPolicy) waitFor(tb testing.TB, host netip.AddrPort, up bool) {
	tb.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if got, ok := w.snapshot()[host]; ok && got == up {
			return
		}
		select {
		case <-w.change:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("gocql never marked %s %s; hosts: %v", host, map[bool]string{true: "up", false: "down"}[up], w.snapshot())
		}
	}
}

// totalRequests returns the requests each sidecar and each node counted.
func totalRequests(c *node.Cluster, scs []*clustertest.Sidecar) (sidecars, nodes []uint64) {
	for i, sc := range scs {
		sidecars = append(sidecars, sc.Proxy.Stats().TotalRequests())
		nodes = append(nodes, c.Node(i).Requests())
	}
	return sidecars, nodes
}

// requireNoBypass waits up to 20 s for every node to have counted exactly the requests its
// sidecar forwarded (except those in skip, which only must not exceed it): a request a node
// saw that its sidecar did not forward came around the sidecars.
func requireNoBypass(tb testing.TB, c *node.Cluster, scs []*clustertest.Sidecar, skip ...int) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, n := totalRequests(c, scs)
		ok := true
		for i := range s {
			exact := true
			for _, k := range skip {
				exact = exact && k != i
			}
			if n[i] > s[i] || exact && n[i] != s[i] {
				ok = false
			}
		}
		if ok {
			tb.Logf("requests seen by sidecars %v, by nodes %v", s, n)
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("requests seen by sidecars %v, by nodes %v: a node saw requests its sidecar did not forward", s, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func executes(scs []*clustertest.Sidecar) []uint64 {
	out := make([]uint64, len(scs))
	for i, sc := range scs {
		out[i] = sc.Proxy.Stats().Requests[cql.OpExecute]
	}
	return out
}

func sidecarSet(scs []*clustertest.Sidecar) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, sc := range scs {
		out[sc.Addr] = true
	}
	return out
}

func mustSession(tb testing.TB, contact *clustertest.Sidecar, policy gocql.HostSelectionPolicy) *gocql.Session {
	tb.Helper()
	cc := gocql.NewCluster(contact.Addr.Addr().String())
	cc.Port = int(contact.Addr.Port())
	cc.Timeout = 10 * time.Second
	cc.ConnectTimeout = 10 * time.Second
	cc.PoolConfig.HostSelectionPolicy = policy
	cc.Consistency = gocql.One
	s, err := cc.CreateSession()
	if err != nil {
		tb.Fatalf("gocql through sidecar %s: %v", contact.Addr, err)
	}
	return s
}

// ops runs n writes and reads of distinct keys from offset on 8 workers, and returns the
// errors.
func ops(s *gocql.Session, offset, n int) []error {
	var mu sync.Mutex
	var errs []error
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				k := fmt.Sprintf("key-%d", offset+i)
				err := s.Query("INSERT INTO cl.kv (k, v) VALUES (?, ?)", k, i).Exec()
				if err == nil {
					var v int
					err = s.Query("SELECT v FROM cl.kv WHERE k = ?", k).Scan(&v)
					if err == nil && v != i {
						err = fmt.Errorf("key %s: read %d; wrote %d", k, v, i)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

func setupSchema(tb testing.TB, s *gocql.Session) {
	tb.Helper()
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS cl WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS cl.kv (k text PRIMARY KEY, v int)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// TestGocqlTokenAwareThroughSidecars connects gocql, with its token-aware policy, to one of
// three sidecars in front of a three-node cluster: it must discover the three sidecars and
// never a node, spread requests over all three, and every node must have counted exactly
// the requests its sidecar forwarded.
func TestGocqlTokenAwareThroughSidecars(t *testing.T) {
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{})
	scs := clustertest.StartSidecars(t, c, sidecar.Config{})
	w := newWatchPolicy()
	s := mustSession(t, scs[1], w)
	setupSchema(t, s)
	if errs := ops(s, 0, 600); len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
	hosts := w.snapshot()
	if len(hosts) != 3 {
		t.Errorf("gocql found hosts %v; want the 3 sidecars", hosts)
	}
	for h := range hosts {
		if !sidecarSet(scs)[h] {
			t.Errorf("gocql found host %s, which is not a sidecar (sidecars %v, nodes on port %d)", h, scs, c.Addr(0).Port())
		}
	}
	ex := executes(scs)
	for i, n := range ex {
		// Token-aware routing of 1,200 requests over keys spread on an even ring.
		if n < 100 {
			t.Errorf("sidecar %d forwarded %d EXECUTEs (all: %v); want a share of 1,200", i+1, n, ex)
		}
	}
	s.Close()
	requireNoBypass(t, c, scs)
}

// TestGocqlNodeStoppedMidLoad stops a node under load: its sidecar fails the requests in
// flight at once (no timeouts), gocql marks that sidecar down when the STATUS_CHANGE event,
// rewritten to the sidecar's address, arrives and carries on with the others without
// errors, and it comes back to it when the node is started again.
func TestGocqlNodeStoppedMidLoad(t *testing.T) {
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{})
	scs := clustertest.StartSidecars(t, c, sidecar.Config{})
	w := newWatchPolicy()
	s := mustSession(t, scs[0], w)
	defer s.Close()
	setupSchema(t, s)
	if errs := ops(s, 0, 300); len(errs) > 0 {
		t.Fatalf("%d errors before the stop, first: %v", len(errs), errs[0])
	}

	// Load in the background while node 2 stops.
	stop := make(chan struct{})
	var bgErrs []error
	bgDone := make(chan struct{})
	go func() {
		defer close(bgDone)
		for off := 100000; ; off += 200 {
			select {
			case <-stop:
				return
			default:
			}
			bgErrs = append(bgErrs, ops(s, off, 200)...)
		}
	}()
	time.Sleep(200 * time.Millisecond) // let the load run; not an assertion
	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, scs[1].Addr, false)
	close(stop)
	<-bgDone
	for _, err := range bgErrs {
		if errors.Is(err, gocql.ErrTimeoutNoResponse) || strings.Contains(err.Error(), "timeout") {
			t.Errorf("a request timed out instead of failing fast: %v", err)
		}
	}
	t.Logf("%d requests failed while node 2 stopped, e.g. %v", len(bgErrs), first(bgErrs))
	if f := scs[1].Proxy.Stats().NodeFailures; f == 0 {
		t.Errorf("sidecar 2 counted no client connection failed for its node")
	}

	// Node 2 down: every request still succeeds, on the other two.
	before := executes(scs)
	if errs := ops(s, 200000, 300); len(errs) > 0 {
		t.Fatalf("with node 2 down and marked down, %d errors, first: %v", len(errs), errs[0])
	}
	mid := executes(scs)
	if mid[0] == before[0] || mid[2] == before[2] {
		t.Errorf("EXECUTEs per sidecar went from %v to %v; want sidecars 1 and 3 to take the load", before, mid)
	}

	// Node 2 back: gocql returns to its sidecar. On the UP event (rewritten to the
	// sidecar's address) gocql v1.7 waits 10 s before it reconnects, as it takes 4.1 for a
	// version older than 2.2, so the load runs until sidecar 2 gets requests again.
	if err := c.Start(1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for off := 300000; executes(scs)[1] == mid[1]; off += 100 {
		if time.Now().After(deadline) {
			t.Fatalf("45 s after node 2 came back, gocql sends it nothing (EXECUTEs per sidecar %v; hosts %v)", executes(scs), w.snapshot())
		}
		if errs := ops(s, off, 100); len(errs) > 0 {
			t.Fatalf("after node 2 came back, %d errors, first: %v", len(errs), errs[0])
		}
	}
	if errs := ops(s, 400000, 300); len(errs) > 0 {
		t.Fatalf("after gocql returned to node 2, %d errors, first: %v", len(errs), errs[0])
	}
	if got := w.snapshot()[scs[1].Addr]; !got {
		t.Errorf("gocql sends requests to sidecar 2 but has it down")
	}
	s.Close()
	requireNoBypass(t, c, scs, 1)
}

func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
