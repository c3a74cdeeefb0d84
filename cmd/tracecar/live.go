package main

import (
	"crypto/tls"
	"flag"
	"io"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/tlsconfig"
)

// What SIGHUP re-reads in a running sidecar, without a restart (README: Upgrade without
// dropping a connection): --config's file, for the settings that can change live (the log
// format and file, the CQL listener's TLS files); the log destination, reopened (after a
// rotation); and the TLS files, for the connections accepted after it. A changed setting
// of any other flag is logged: it takes a new process, --takeover.

// liveFlags are the flags whose change in --config's file SIGHUP applies.
var liveFlags = map[string]bool{"log-format": true, "log-file": true, "tls-cert": true, "tls-key": true, "tls-client-ca": true}

// liveSettings are the settings SIGHUP re-reads.
type liveSettings struct {
	logs   logFlags
	stderr io.Writer
	tls    *serverTLSFlags
	fs     *flag.FlagSet
	config *configFile
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
	prevFormat, prevFile := *l.logs.format, *l.logs.file
	l.rereadConfig(log)
	if err := reg.Reopen(logs.Config{Format: *l.logs.format, Writer: l.stderr, File: *l.logs.file}); err != nil {
		log.Error().Err(err).Msg("SIGHUP: the log destination stays as it was")
		l.fs.Set("log-format", prevFormat)
		l.fs.Set("log-file", prevFile)
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

// rereadConfig applies the changes of --config's file to the live flags, and logs those
// of the others.
func (l *liveSettings) rereadConfig(log *zerolog.Logger) {
	if l.config == nil || l.config.path == "" {
		return
	}
	settings, err := readConfig(l.config.path)
	if err != nil {
		log.Error().Err(err).Msg("SIGHUP: the settings stay as they were")
		return
	}
	for _, kv := range settings {
		name, value := kv[0], kv[1]
		f := l.fs.Lookup(name)
		switch {
		case l.config.cmdline[name]:
			continue // the command line wins
		case f == nil:
			log.Warn().Str("file", l.config.path).Msg("SIGHUP: no flag --" + name)
		case f.Value.String() == value:
		case liveFlags[name]:
			if err := l.fs.Set(name, value); err != nil {
				log.Error().Err(err).Msg("SIGHUP: --" + name + " stays as it was")
			}
		default:
			log.Warn().Str("file", l.config.path).Str("value", value).
				Msg("SIGHUP: --" + name + " changed: it takes effect in a new process (tracecar sidecar --takeover)")
		}
	}
}
