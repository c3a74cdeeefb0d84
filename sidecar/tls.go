package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// TLS on the CQL path is a net.Conn wrapper on each side, independent of the other: a
// client connection accepted with Config.TLS set is a server-side *tls.Conn, and a node
// connection dialled with Config.NodeTLS set is a client-side one. The rest of the proxy
// sees plain net.Conns, reading and writing cleartext frames.

// tlsHandshakeTimeout bounds a TLS handshake on either side, so that a client that opens a
// connection and sends nothing holds it no longer than that.
const tlsHandshakeTimeout = 10 * time.Second

// acceptTLS wraps an accepted client connection in TLS when the proxy serves TLS. The
// handshake runs on the connection's first read, in its own goroutine, never in the accept
// loop; when it fails (a plaintext client, no or a bad client certificate) the reason is
// logged and the connection closes.
func (p *Proxy) acceptTLS(nc net.Conn) net.Conn {
	if p.cfg.TLS == nil {
		return nc
	}
	setNoDelay(nc)
	return &tlsServerConn{Conn: tls.Server(nc, p.cfg.TLS), log: p.log}
}

// tlsServerConn is a client connection over TLS that logs why its handshake failed. Its
// first Read performs the handshake; the proxy reads a client connection from one
// goroutine only, so handshook needs no lock.
type tlsServerConn struct {
	*tls.Conn
	log       *zerolog.Logger
	handshook bool
}

func (c *tlsServerConn) Read(b []byte) (int, error) {
	if !c.handshook {
		c.handshook = true
		ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
		err := c.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.log.Warn().Str("client", c.RemoteAddr().String()).Str("error", err.Error()).
				Msg("TLS handshake failed, closing the connection: " + handshakeHint(err))
			c.Conn.Close()
			return 0, err
		}
	}
	return c.Conn.Read(b)
}

// handshakeHint says in words what a failed server-side handshake most likely means.
func handshakeHint(err error) string {
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &rh):
		return "the client does not speak TLS (a plaintext client on a TLS port?)"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "the client sent no TLS handshake in time"
	}
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		return "the client certificate is not signed by --tls-client-ca"
	}
	if strings.Contains(err.Error(), "didn't provide a certificate") {
		return "the client presented no certificate, and --tls-client-ca requires one"
	}
	return "the client's TLS handshake was refused"
}

// dialTLS performs the TLS handshake with the node over nc, which it closes on failure.
func (p *Proxy) dialTLS(ctx context.Context, nc net.Conn) (net.Conn, error) {
	setNoDelay(nc)
	tc := tls.Client(nc, p.nodeTLS)
	ctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake with the node: %w", err)
	}
	return tc, nil
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
