// Package clustertest starts an embedded cluster on loopback for the tests that drive real
// drivers through it: node i listens on 127.0.0.<i>:P, and the sidecar beside it (started by
// this package's own tests, so that no helper outside the tests imports the data path) on
// 127.0.0.<i>:S, the convention that lets a sidecar map a peer node to the sidecar beside it
// with nothing but --peer-port.
package clustertest

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/tracecar/tracecar/internal/node"
)

// ListenSamePort returns n listeners on 127.0.0.1 … 127.0.0.n that share one free port. All
// of 127.0.0.0/8 is loopback on Linux.
func ListenSamePort(tb testing.TB, n int) []net.Listener {
	tb.Helper()
	ips := make([]netip.Addr, n)
	for i := range ips {
		ips[i] = IP(i + 1)
	}
	return ListenOn(tb, ips)
}

// ListenOn returns a listener on each of ips, all on one free port.
func ListenOn(tb testing.TB, ips []netip.Addr) []net.Listener {
	tb.Helper()
	var last error
	for attempt := 0; attempt < 50; attempt++ {
		lns, err := listenSamePort(ips)
		if err == nil {
			tb.Cleanup(func() {
				for _, ln := range lns {
					ln.Close()
				}
			})
			return lns
		}
		last = err
	}
	tb.Fatalf("no port free on all of %v: %v", ips, last)
	return nil
}

func listenSamePort(ips []netip.Addr) ([]net.Listener, error) {
	first, err := net.Listen("tcp", netip.AddrPortFrom(ips[0], 0).String())
	if err != nil {
		return nil, err
	}
	lns := []net.Listener{first}
	port := first.Addr().(*net.TCPAddr).Port
	for _, ip := range ips[1:] {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// IP returns 127.0.0.i, the address of node i (from 1).
func IP(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}) }

// StartCluster starts n nodes on 127.0.0.1 … 127.0.0.n, one port, until the test ends. With
// cfg.Shards and no cfg.ShardAware, each node also gets a shard-aware port of its own.
func StartCluster(tb testing.TB, n int, cfg node.ClusterConfig) *node.Cluster {
	tb.Helper()
	lns := ListenSamePort(tb, n)
	if cfg.Shards > 0 && cfg.ShardAware == nil {
		// Each node's shard-aware port, on its IP, on a port of its own.
		for _, ln := range lns {
			ap := netip.MustParseAddrPort(ln.Addr().String())
			aln, err := net.Listen("tcp", netip.AddrPortFrom(ap.Addr(), 0).String())
			if err != nil {
				tb.Fatal(err)
			}
			cfg.ShardAware = append(cfg.ShardAware, aln)
		}
	}
	c, err := node.NewCluster(cfg, lns)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("cluster: %v", err)
		}
	})
	return c
}
