package clustertest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// Sidecar is a proxy in front of one node, with the tracer and metrics it reports to.
type Sidecar struct {
	Addr    netip.AddrPort
	Proxy   *sidecar.Proxy
	Tracer  *tracing.Tracer
	Metrics *metrics.Metrics
}

// StartSidecars starts one sidecar per node of c, sidecar i on 127.0.0.<i>:S, until the test
// ends. cfg is the template of every sidecar's configuration; NodeAddr is filled in.
func StartSidecars(tb testing.TB, c *node.Cluster, cfg sidecar.Config) []*Sidecar {
	tb.Helper()
	return StartSidecarsOn(tb, c, ListenSamePort(tb, c.Len()), cfg)
}

// StartSidecarsOn is StartSidecars with sidecar i serving lns[i].
func StartSidecarsOn(tb testing.TB, c *node.Cluster, lns []net.Listener, cfg sidecar.Config) []*Sidecar {
	tb.Helper()
	out := make([]*Sidecar, c.Len())
	for i, ln := range lns {
		m := metrics.New()
		tr := tracing.New(tracing.Options{})
		sc := cfg
		sc.NodeAddr = c.Addr(i).String()
		sc.Metrics = m
		p := sidecar.New(sc, tr)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Serve(ctx, ln) }()
		tb.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("sidecar %d: %v", i+1, err)
			}
			tr.Close(context.Background())
		})
		out[i] = &Sidecar{Addr: netip.MustParseAddrPort(ln.Addr().String()), Proxy: p, Tracer: tr, Metrics: m}
	}
	return out
}

// String names the sidecar by its address.
func (s *Sidecar) String() string { return fmt.Sprint(s.Addr) }
