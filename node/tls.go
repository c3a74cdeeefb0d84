package node

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/rs/zerolog"
)

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// tlsConn is a client connection over TLS whose first Read performs the handshake, in the
// connection's own goroutine, and logs why it failed. A connection is read by one goroutine
// only, so handshook needs no lock.
type tlsConn struct {
	*tls.Conn
	log       *zerolog.Logger
	handshook bool
}

func (c *tlsConn) Read(b []byte) (int, error) {
	if !c.handshook {
		c.handshook = true
		ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
		err := c.HandshakeContext(ctx)
		cancel()
		if err != nil {
			why := "the client's TLS handshake was refused"
			var rh tls.RecordHeaderError
			if errors.As(err, &rh) {
				why = "the client does not speak TLS (a plaintext client on a TLS port?)"
			}
			c.log.Warn().Str("client", c.RemoteAddr().String()).Str("error", err.Error()).
				Msg("TLS handshake failed, closing the connection: " + why)
			c.Conn.Close()
			return 0, err
		}
	}
	return c.Conn.Read(b)
}

// wrapTLS returns nc over TLS when the server has a TLS configuration.
func (s *Server) wrapTLS(nc net.Conn) net.Conn {
	if s.cfg.TLS == nil {
		return nc
	}
	return &tlsConn{Conn: tls.Server(nc, s.cfg.TLS), log: s.logger()}
}
