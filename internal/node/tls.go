package node

import (
	"net"

	"github.com/tracecar/tracecar/internal/tlsconfig"
)

// wrapTLS returns nc over TLS when the server has a TLS configuration.
func (s *Server) wrapTLS(nc net.Conn) net.Conn {
	if s.cfg.TLS == nil {
		return nc
	}
	return tlsconfig.ServerConn(nc, s.cfg.TLS, s.logger())
}
