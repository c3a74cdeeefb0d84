package sidecar

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/tracecar/tracecar/internal/tlsconfig"
)

// TLS on the CQL path is a net.Conn wrapper on each side, independent of the other: a
// client connection accepted with Config.TLS set is a server-side *tls.Conn, and a node
// connection dialled with Config.NodeTLS set is a client-side one. The rest of the proxy
// sees plain net.Conns, reading and writing cleartext frames.

// acceptTLS wraps an accepted client connection in TLS when the proxy serves TLS. The
// handshake runs on the connection's first read, in its own goroutine, never in the accept
// loop; when it fails (a plaintext client, no or a bad client certificate) the reason is
// logged and the connection closes.
func (p *connEnv) acceptTLS(nc net.Conn) net.Conn {
	if p.cfg.TLS == nil {
		return nc
	}
	setNoDelay(nc)
	return tlsconfig.ServerConn(nc, p.cfg.TLS, p.sh.Log)
}

// nodeTLSConfig returns cfg with ServerName set to the node address's host when it is
// empty, so that the node's certificate is checked against the address dialled.
func nodeTLSConfig(cfg *tls.Config, nodeAddr string) *tls.Config {
	if cfg == nil || cfg.ServerName != "" || cfg.InsecureSkipVerify {
		return cfg
	}
	host, _, err := net.SplitHostPort(nodeAddr)
	if err != nil {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.ServerName = host
	return cfg
}

// dialTLS performs the TLS handshake with the node over nc, which it closes on failure.
func (p *connEnv) dialTLS(ctx context.Context, nc net.Conn) (net.Conn, error) {
	setNoDelay(nc)
	tc := tls.Client(nc, p.nodeTLS)
	ctx, cancel := context.WithTimeout(ctx, tlsconfig.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake with the node: %w", err)
	}
	return tc, nil
}
