package main

import (
	"crypto/tls"
	"io"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/tlsconfig"
)

// What SIGHUP re-reads in a running sidecar, without a restart (README: Upgrade without
// dropping a connection): the log destination (--log-file, reopened after a rotation, in
// --log-format) and the CQL listener's TLS files (--tls-cert, --tls-key, --tls-client-ca),
// for the connections accepted after it. Every other flag takes a new process: --takeover.

// liveSettings are the settings SIGHUP re-reads.
type liveSettings struct {
	logs   logFlags
	stderr io.Writer
	tls    *serverTLSFlags
	// serverTLS is the CQL listener's configuration in force, nil for plaintext.
	serverTLS atomic.Pointer[tls.Config]
}

// reloadableTLS returns a configuration for the CQL listener that hands each new
// connection the configuration in force, which reload replaces; nil stays nil.
func (l *liveSettings) reloadableTLS(cfg *tls.Config) (*tls.Config, error) {
	if cfg == nil {
		return nil, nil
	}
	l.serverTLS.Store(cfg)
	return &tls.Config{
		MinVersion: cfg.MinVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &l.serverTLS.Load().Certificates[0], nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return l.serverTLS.Load(), nil },
	}, nil
}

// reload re-reads the live settings; each one that fails keeps what it had, and says so.
func (l *liveSettings) reload(reg *logs.Registry) {
	log := reg.Logger(logs.Sidecar)
	if err := reg.Reopen(logs.Config{Format: *l.logs.format, Writer: l.stderr, File: *l.logs.file}); err != nil {
		log.Error().Err(err).Msg("SIGHUP: the log destination stays as it was")
	} else {
		log.Info().Str("log_file", *l.logs.file).Str("log_format", *l.logs.format).Msg("SIGHUP: log destination reopened")
	}
	if l.serverTLS.Load() == nil {
		return
	}
	cfg, err := tlsconfig.Server(l.tls.cert, l.tls.key, l.tls.clientCA)
	if err != nil {
		log.Error().Err(err).Msg("SIGHUP: the TLS certificate stays as it was")
		return
	}
	l.serverTLS.Store(cfg)
	log.Info().Str("tls_cert", l.tls.cert).Msg("SIGHUP: TLS certificate re-read: new connections get it")
}
