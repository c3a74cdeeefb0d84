package sidecar

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// connectLog records every connection gocql opens or tries, with the host it aimed at.
type connectLog struct {
	mu    sync.Mutex
	hosts []string
}

func (l *connectLog) ObserveConnect(c gocql.ObservedConnect) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hosts = append(l.hosts, hostAddr(c.Host))
}

func (l *connectLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hosts)
}

func hostAddr(h *gocql.HostInfo) string {
	return net.JoinHostPort(h.ConnectAddress().String(), strconv.Itoa(h.Port()))
}

// defaultGocqlBypass runs a gocql session with the driver's defaults (host lookup on, no
// HostFilter) against a two-node cluster, a sidecar beside each node:
//
//	node A 127.0.0.2 ← (peer shim) ← sidecar A 127.0.0.1   (the contact point)
//	node B 127.0.0.3 ←               sidecar B 127.0.0.3   (known from A's system.peers_v2)
//
// Every port differs. The driver learns node B from system.peers_v2 through sidecar A, which
// must rewrite B's native_port to sidecar B's. It returns an error naming every way the
// driver went past a sidecar: a connection to another address, a query served by another
// host, a connection or request a node served that its sidecar did not forward.
func defaultGocqlBypass(t *testing.T) error {
	t.Helper()
	nA := mustNode(t, node.Config{}, nodeAddr)
	nB := mustNode(t, node.Config{}, "127.0.0.3:0")
	lnB := listenApart(t, "127.0.0.3", nB.addr)
	pB := serveProxy(t, New(Config{NodeAddr: nB.addr}, nil), lnB, lnB.Addr().String())
	waitFor(t, "both nodes' engines", func() bool { return nA.srv.Engine() != nil && nB.srv.Engine() != nil })
	shim := mustPeerShim(t, "127.0.0.2:0", nA.addr, peerRow(mustAddrPort(nB.addr), nB.srv.Engine().HostID(), nA.srv.Engine().SchemaVersion))
	shimAddr := shim.ln.Addr().String()
	lnA := listenApart(t, "127.0.0.1", nA.addr, nB.addr, pB.addr, shimAddr)
	pA := serveProxy(t, New(Config{NodeAddr: shimAddr, PeerPort: int(mustAddrPort(pB.addr).Port())}, nil), lnA, lnA.Addr().String())
	sidecars := []string{pA.addr, pB.addr}

	var log connectLog
	cluster := drivertest.Cluster(sidecarOptions(pA, "none"))
	cluster.ConnectObserver = &log
	if cluster.HostFilter != nil || cluster.DisableInitialHostLookup {
		t.Fatal("drivertest.Cluster changed gocql's host discovery defaults")
	}

	var errs []error
	var used []string // the hosts that served the queries
	s, err := cluster.CreateSession()
	if err != nil {
		errs = append(errs, fmt.Errorf("CreateSession: %w", err))
	} else {
		// Only system tables: the two nodes do not share a schema.
		for i := range 100 {
			var rel string
			iter := s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Iter()
			iter.Scan(&rel)
			if err := iter.Close(); err != nil {
				errs = append(errs, fmt.Errorf("query %d: %w", i, err))
				break
			}
			if h := iter.Host(); h != nil {
				used = append(used, hostAddr(h))
			}
		}
		s.Close()
	}

	hosts := log.list()
	for _, h := range hosts {
		if !slices.Contains(sidecars, h) {
			errs = append(errs, fmt.Errorf("gocql connected to %s; want only the sidecars %v", h, sidecars))
			break
		}
	}
	for _, h := range used {
		if !slices.Contains(sidecars, h) {
			errs = append(errs, fmt.Errorf("a query was served by host %s; want only the sidecars %v", h, sidecars))
			break
		}
	}
	for _, sc := range sidecars {
		if !slices.Contains(hosts, sc) {
			errs = append(errs, fmt.Errorf("gocql never connected to the sidecar %s; connections: %v", sc, hosts))
		}
	}
	if len(used) == 0 {
		errs = append(errs, errors.New("no query was served"))
	}
	if err := bypassed(nA, pA); err != nil {
		errs = append(errs, fmt.Errorf("node A: %w", err))
	}
	if err := bypassed(nB, pB); err != nil {
		errs = append(errs, fmt.Errorf("node B: %w", err))
	}
	if pA.Stats().Rewritten == 0 {
		errs = append(errs, errors.New("no system.local/peers response was rewritten"))
	}
	return errors.Join(errs...)
}

func TestE2ENoBypassDefaultGocql(t *testing.T) {
	if err := defaultGocqlBypass(t); err != nil {
		t.Fatal(err)
	}
}

// TestE2ENoBypassCatchesBrokenRewrite is the mutation check: the broken build, with the
// system table rewrite switched off (`-tags tracecar_norewrite`, a constant of the pipeline,
// not a switch of the product), is built and its no-bypass test run: the driver learns the
// node's own address, and the test must fail, naming it.
func TestE2ENoBypassCatchesBrokenRewrite(t *testing.T) {
	if brokenRewrite {
		t.Skip("this is the broken build: the no-bypass tests fail in it")
	}
	bin := filepath.Join(t.TempDir(), "sidecar-norewrite.test")
	if out, err := exec.Command("go", "test", "-c", "-tags", "tracecar_norewrite", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the broken build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-test.run", "^TestE2ENoBypassDefaultGocql$", "-test.count", "1").CombinedOutput()
	if err == nil {
		t.Fatalf("the no-bypass check passed with the system table rewrite switched off; want it to fail:\n%s", out)
	}
	t.Logf("the no-bypass check fails as it should with the rewrite off:\n%s", out)
	if !strings.Contains(string(out), "gocql connected to 127.0.0.3:") {
		t.Errorf("the failure does not name the driver's connection to node B at 127.0.0.3:\n%s", out)
	}
}
