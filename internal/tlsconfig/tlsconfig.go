// Package tlsconfig builds the TLS configurations of tracecar's CQL connections from PEM
// files named on the command line: a server's (the sidecar's or the node's listener), and
// a client's (the sidecar's, the sinks' and the load checker's connections to a node or a
// sidecar). Its functions are safe for concurrent use.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Server returns the configuration of a TLS listener with the key pair in certFile and
// keyFile. With clientCAFile set, clients must present a certificate signed by one of its
// CAs (mutual TLS). The flag names in errors are tracecar's: --tls-cert, --tls-key and
// --tls-client-ca.
func Server(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientFiles are the PEM files and the name a TLS client uses. Every field is optional.
type ClientFiles struct {
	// CA is the CA bundle that signs the server's certificate; empty means the system's
	// roots.
	CA string
	// Cert and Key are a client certificate for servers that require one (mutual TLS);
	// both or neither.
	Cert, Key string
	// ServerName is the name checked in the server's certificate; empty means the host
	// that is dialled (the caller sets it).
	ServerName string
}

// Client returns a client configuration for f. prefix is the flag prefix that errors name,
// such as "--node-tls" or "--tls".
func Client(f ClientFiles, prefix string) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: f.ServerName, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s-ca: %w", prefix, err)
		}
		cfg.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("%s-cert and %s-key go together", prefix, prefix)
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%s-cert %s, %s-key %s: %w", prefix, f.Cert, prefix, f.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}
