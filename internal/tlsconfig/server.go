package tlsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// HandshakeTimeout bounds a client's TLS handshake on a server connection.
const HandshakeTimeout = 10 * time.Second

// ServerConn returns nc over TLS with cfg. Its first Read performs the handshake, in the
// reading goroutine, never in an accept loop; when the handshake fails (a plaintext client,
// no or a bad client certificate) the reason is logged in words on log and the connection
// closes. A connection is read by one goroutine only, as the node and the sidecar do.
func ServerConn(nc net.Conn, cfg *tls.Config, log *zerolog.Logger) net.Conn {
	return &serverConn{Conn: tls.Server(nc, cfg), log: log}
}

type serverConn struct {
	*tls.Conn
	log       *zerolog.Logger
	handshook bool
}

func (c *serverConn) Read(b []byte) (int, error) {
	if !c.handshook {
		c.handshook = true
		ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
		err := c.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.log.Warn().Str("client", c.RemoteAddr().String()).Str("error", err.Error()).
				Msg("TLS handshake failed, closing the connection: " + HandshakeHint(err))
			c.Conn.Close()
			return 0, err
		}
	}
	return c.Conn.Read(b)
}

// HandshakeHint says in words what a failed server-side handshake most likely means.
func HandshakeHint(err error) string {
	var rh tls.RecordHeaderError
	var ne net.Error
	switch {
	case errors.As(err, &rh):
		return "the client does not speak TLS (a plaintext client on a TLS port?)"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
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
