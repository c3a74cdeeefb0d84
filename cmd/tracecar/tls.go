package main

import (
	"crypto/tls"
	"flag"
	"net"

	"github.com/tracecar/tracecar/internal/tlsconfig"
)

// serverTLSFlags are the flags of a CQL listener's TLS: --tls-cert, --tls-key and, for
// mutual TLS, --tls-client-ca.
type serverTLSFlags struct {
	cert, key, clientCA string
}

func addServerTLSFlags(fs *flag.FlagSet) *serverTLSFlags {
	f := &serverTLSFlags{}
	fs.StringVar(&f.cert, "tls-cert", "", "PEM certificate: clients must speak TLS to the CQL port")
	fs.StringVar(&f.key, "tls-key", "", "PEM key for --tls-cert")
	fs.StringVar(&f.clientCA, "tls-client-ca", "", "PEM CA bundle: clients must present a certificate it signed (mutual TLS)")
	return f
}

// config returns nil for plaintext, or the listener's TLS configuration.
func (f *serverTLSFlags) config() (*tls.Config, error) {
	if f.cert == "" && f.key == "" {
		if f.clientCA != "" {
			return nil, usageErrorf("--tls-client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if f.cert == "" || f.key == "" {
		return nil, usageErrorf("--tls-cert and --tls-key go together")
	}
	return tlsconfig.Server(f.cert, f.key, f.clientCA)
}

// nodeTLSFlags are the flags of the TLS toward the node: --node-tls turns it on (with the
// system's roots), and any other --node-tls-* flag implies it.
type nodeTLSFlags struct {
	on    bool
	files tlsconfig.ClientFiles
}

func addNodeTLSFlags(fs *flag.FlagSet) *nodeTLSFlags {
	f := &nodeTLSFlags{}
	fs.BoolVar(&f.on, "node-tls", false, "speak TLS to the node (the sidecar's connections, the CQL sink and the node-event fetch)")
	fs.StringVar(&f.files.CA, "node-tls-ca", "", "PEM CA bundle that signs the node's certificate (default: the system's roots)")
	fs.StringVar(&f.files.Cert, "node-tls-cert", "", "PEM client certificate for a node that requires one")
	fs.StringVar(&f.files.Key, "node-tls-key", "", "PEM key for --node-tls-cert")
	fs.StringVar(&f.files.ServerName, "node-tls-server-name", "", "name checked in the node's certificate (default: the --node host)")
	return f
}

// config returns nil for plaintext, or the client configuration toward the node, whose
// ServerName is the node's host unless --node-tls-server-name names another.
func (f *nodeTLSFlags) config(nodeAddr string) (*tls.Config, error) {
	if !f.on && f.files == (tlsconfig.ClientFiles{}) {
		return nil, nil
	}
	if (f.files.Cert == "") != (f.files.Key == "") {
		return nil, usageErrorf("--node-tls-cert and --node-tls-key go together")
	}
	cfg, err := tlsconfig.Client(f.files, "--node-tls")
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(nodeAddr); err == nil {
			cfg.ServerName = host
		}
	}
	return cfg, nil
}
