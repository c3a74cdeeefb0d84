// Package tlstest makes a throwaway PKI for tests: a CA, a server certificate for
// 127.0.0.1 and localhost, and a client certificate, all ECDSA P-256, written as PEM files.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// PKI is the paths of the PEM files that New wrote.
type PKI struct {
	Dir                   string
	CA                    string // the CA certificate
	ServerCert, ServerKey string // for 127.0.0.1 and localhost, signed by CA
	ClientCert, ClientKey string // a client certificate signed by CA
	// OtherCert and OtherKey are a client certificate signed by another CA.
	OtherCert, OtherKey string
}

// New writes a fresh PKI into a temporary directory of tb.
func New(tb testing.TB) *PKI {
	tb.Helper()
	dir := tb.TempDir()
	p := &PKI{Dir: dir}
	caCert, caKey := mustCA(tb, "tracecar test CA")
	p.CA = writeCert(tb, dir, "ca.pem", caCert.Raw)
	p.ServerCert, p.ServerKey = mustLeaf(tb, dir, "server", caCert, caKey, true)
	p.ClientCert, p.ClientKey = mustLeaf(tb, dir, "client", caCert, caKey, false)
	otherCA, otherKey := mustCA(tb, "another CA")
	p.OtherCert, p.OtherKey = mustLeaf(tb, dir, "other", otherCA, otherKey, false)
	return p
}

// ServerConfig returns a server configuration with the server certificate; with mTLS set,
// clients must present a certificate signed by the CA.
func (p *PKI) ServerConfig(tb testing.TB, mTLS bool) *tls.Config {
	tb.Helper()
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if mTLS {
		cfg.ClientCAs = p.Pool(tb)
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// ClientConfig returns a client configuration that trusts the CA, with the client
// certificate when withCert is set.
func (p *PKI) ClientConfig(tb testing.TB, withCert bool) *tls.Config {
	tb.Helper()
	cfg := &tls.Config{RootCAs: p.Pool(tb), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// Pool returns a pool holding the CA.
func (p *PKI) Pool(tb testing.TB) *x509.CertPool {
	tb.Helper()
	b, err := os.ReadFile(p.CA)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return pool
}

var serial atomic.Int64

func template(cn string) *x509.Certificate {

	return &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func mustKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func mustCA(tb testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key := mustKey(tb)
	t := template(cn)
	t.IsCA = true
	t.BasicConstraintsValid = true
	t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, t, t, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return cert, key
}

func mustLeaf(tb testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, server bool) (certFile, keyFile string) {
	tb.Helper()
	key := mustKey(tb)
	t := template("tracecar test " + name)
	t.KeyUsage = x509.KeyUsageDigitalSignature
	if server {
		t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		t.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		t.DNSNames = []string{"localhost"}
	} else {
		t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile = writeCert(tb, dir, name+".pem", der)
	keyFile = filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile
}

func writeCert(tb testing.TB, dir, name string, der []byte) string {
	tb.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		tb.Fatal(err)
	}
	return f
}
