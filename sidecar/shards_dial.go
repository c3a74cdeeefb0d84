package sidecar

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/sidecar/handover"
)

// The transport's part of shard-awareness: the node connection of a client connection
// accepted on the shard-aware port, dialled from a local port of the residue its shard
// needs (shards.go has the rest).

// dialShard opens the node connection of a client connection accepted on the shard-aware
// port from source port clientPort: on the node's shard-aware port, from a local port of
// the same residue, or an ordinary one when that cannot be done (fallback).
func (p *Proxy) dialShard(ctx context.Context, c *conn) (net.Conn, error) {
	in, err := p.nodeShardingCached(ctx)
	if err != nil {
		reason := fallbackMalformed
		var pe errProbe
		switch {
		case errors.Is(err, sharding.ErrNotScylla):
			reason = fallbackNotScylla
		case errors.As(err, &pe):
			reason = fallbackProbe
		}
		return p.fallback(ctx, c, reason, err)
	}
	port := in.AwarePort
	if p.env.nodeTLS != nil {
		port = in.AwarePortSSL
	}
	if port == 0 {
		return p.fallback(ctx, c, fallbackNoPort, errors.New("the node's SUPPORTED names no shard-aware port"))
	}
	host, _, err := net.SplitHostPort(p.env.cfg.NodeAddr)
	if err != nil {
		return p.fallback(ctx, c, fallbackNoPort, err)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	want := int(c.pipe.ClientAddr.Port()) % in.NrShards
	nc, err := p.dialFromResidue(ctx, addr, in.NrShards, want)
	if errors.Is(err, errPortsExhausted) {
		return p.fallback(ctx, c, fallbackPorts, err)
	}
	if err != nil {
		return nil, err
	}
	if p.env.nodeTLS != nil {
		if nc, err = p.env.dialTLS(ctx, nc); err != nil {
			return nil, err
		}
	}
	p.shards.paired.Add(1)
	return nc, nil
}

// fallback counts and logs why a shard-aware connection gets an ordinary node connection,
// and dials one.
func (p *Proxy) fallback(ctx context.Context, c *conn, reason int, err error) (net.Conn, error) {
	p.shards.fallbacks[reason].Add(1)
	e := c.pipe.Debug()
	if !p.shards.warned[reason].Swap(true) {
		e = c.pipe.Warn()
	}
	if e != nil {
		e.Err(err).Str("reason", FallbackReasons[reason]).Msg("shard-aware connection: an ordinary node connection instead, on whatever shard the node gives")
	}
	return p.env.dial(ctx)
}

var errPortsExhausted = errors.New("no free local port for the shard")

// maxPortTries bounds the local ports tried for one shard-aware node connection.
const maxPortTries = 64

// dialFromResidue dials addr from a local port q with q % n == r, taken from the local port
// range from a random start, trying the next one of that residue when a port is in use.
func (p *Proxy) dialFromResidue(ctx context.Context, addr string, n, r int) (net.Conn, error) {
	lo, hi := p.localPorts()
	if hi-lo+1 < n {
		return nil, errPortsExhausted
	}
	q := residuePort(lo+rand.IntN(hi-lo+1), lo, hi, n, r)
	for range maxPortTries {
		d := net.Dialer{Timeout: p.env.cfg.DialTimeout, LocalAddr: &net.TCPAddr{Port: q}}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return nc, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil, err
		}
		q = residuePort(q+n, lo, hi, n, r)
	}
	return nil, errPortsExhausted
}

// residuePort returns the first port from q on with q % n == r, or past hi the first in
// [lo, hi]: the order dialFromResidue tries a shard's ports in. The range must hold at
// least n ports.
func residuePort(q, lo, hi, n, r int) int {
	q += ((r-q%n)%n + n) % n
	if q > hi {
		q = lo + ((r-lo%n)%n+n)%n
	}
	return q
}

// localPorts returns the local port range, as the kernel gives ephemeral ports
// (/proc/sys/net/ipv4/ip_local_port_range), or Linux's default when it cannot be read.
func (p *Proxy) localPorts() (lo, hi int) {
	if f := p.shards.portRange; f != nil {
		return f()
	}
	return systemPortRange()
}

var systemPortRange = sync.OnceValues(func() (int, int) {
	lo, hi := 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l < 1 || h > 65535 || l > h {
		return lo, hi
	}
	return l, h
})

// adoptShard sets up the shard of a connection an old process handed over: its node
// connection came with it, and so its shard. (newConn advertised the ordinary port for one
// that came on the shard-aware port.)
func (c *conn) adoptShard(m handover.State) {
	if s := m.Shard; s != nil {
		c.pipe.Shard().Restore(sharding.Info{Shard: s.Shard, NrShards: s.NrShards, IgnoreMSB: s.IgnoreMSB})
	}
}

// advertisedLocal is the local address a connection advertises when the proxy advertises
// each connection's own: for one that came on the shard-aware port, the ordinary port,
// where drivers' other connections go.
func (p *Proxy) advertisedLocal(nc net.Conn, aware bool) netip.AddrPort {
	local := addrPort(nc.LocalAddr())
	if port := uint16(p.shards.ordinaryPort.Load()); aware && port != 0 {
		return netip.AddrPortFrom(local.Addr(), port)
	}
	return local
}
