package sidecar

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/internal/testkit/tlstest"
)

// tlsStack is a TLS node and a sidecar that speaks TLS on both sides, with mutual TLS
// toward its clients and a client certificate toward the node.
type tlsStack struct {
	pki   *tlstest.PKI
	node  *runningNode
	proxy *testProxy
	log   *syncBuffer
}

func mustTLSStack(tb testing.TB) *tlsStack {
	tb.Helper()
	pki := tlstest.New(tb)
	n := mustNode(tb, node.Config{TLS: pki.ServerConfig(tb, true)}, "127.0.0.1:0")
	logBuf := &syncBuffer{}
	l := zerolog.New(logBuf)
	nodeTLS := pki.ClientConfig(tb, true)
	nodeTLS.ServerName = "" // the proxy checks the certificate against the node's address
	tp := mustProxy(tb, Config{NodeAddr: n.addr, TLS: pki.ServerConfig(tb, true), NodeTLS: nodeTLS, Logger: &l})
	return &tlsStack{pki: pki, node: n, proxy: tp, log: logBuf}
}

func (st *tlsStack) options(withCert bool) drivertest.Options {
	o := sidecarOptions(st.proxy, "lz4")
	o.TLSCA = st.pki.CA
	if withCert {
		o.TLSCert, o.TLSKey = st.pki.ClientCert, st.pki.ClientKey
	}
	return o
}

// TestTLSGocqlSuite runs the gocql suite over mutual TLS to the sidecar, which speaks
// mutual TLS to the node.
func TestTLSGocqlSuite(t *testing.T) {
	st := mustTLSStack(t)
	drivertest.RunGocql(t, st.options(true))
	checkNoBypass(t, st.node, st.proxy)
}

// TestTLSPythonDriver is the acceptance test: the Python driver connects over TLS (its
// ssl_context, with a client certificate) through the sidecar to a TLS node, and runs its
// suite of queries, at v5: segments over TLS, on the goroutine path.
func TestTLSPythonDriver(t *testing.T) {
	st := mustTLSStack(t)
	o := st.options(true)
	o.Protocol = 5
	drivertest.RunPython(t, o)
	checkNoBypass(t, st.node, st.proxy)
}

// TestTLSRefusals checks the clients that must not get through a TLS port: a plaintext
// one, one without a client certificate, and one whose certificate another CA signed. Each
// has its connection closed, and a log line says why.
func TestTLSRefusals(t *testing.T) {
	st := mustTLSStack(t)
	startup := frame(cql.V4, 0, 1, cql.OpOptions, nil)

	t.Run("plaintext", func(t *testing.T) {
		c := mustDial(t, st.proxy.addr)
		c.send(startup)
		c.expectClosed()
		waitFor(t, "a log line saying the client does not speak TLS", func() bool {
			return strings.Contains(st.log.String(), "the client does not speak TLS")
		})
	})
	for _, tt := range []struct {
		name    string
		cert    func() *tls.Certificate
		wantLog string
	}{
		{"no client certificate", func() *tls.Certificate { return &tls.Certificate{} }, "the client presented no certificate"},
		{"certificate of another CA", func() *tls.Certificate {
			c, err := tls.LoadX509KeyPair(st.pki.OtherCert, st.pki.OtherKey)
			if err != nil {
				t.Fatal(err)
			}
			return &c
		}, "not signed by --tls-client-ca"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(st.log.String(), "TLS handshake failed")
			cfg := st.pki.ClientConfig(t, false)
			cert := tt.cert()
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
			c, err := tls.Dial("tcp", st.proxy.addr, cfg)
			if err == nil {
				// TLS 1.3 reports a refused client certificate on the first read.
				defer c.Close()
				c.SetDeadline(time.Now().Add(testTimeout))
				c.Write(startup)
				var b [1]byte
				_, err = c.Read(b[:])
			}
			if err == nil {
				t.Fatal("the sidecar answered a client it should refuse")
			}
			waitFor(t, "a log line about the refused handshake", func() bool {
				log := st.log.String()
				if strings.Count(log, "TLS handshake failed") <= before {
					return false
				}
				lines := strings.Split(log[:strings.LastIndex(log, "TLS handshake failed")], "\n")
				last := lines[len(lines)-1] + log[strings.LastIndex(log, "TLS handshake failed"):]
				last, _, _ = strings.Cut(last, "\n")
				return strings.Contains(last, tt.wantLog)
			})
		})
	}
	if got := st.node.srv.Requests(); got != 0 {
		t.Errorf("the node served %d requests; want none from refused clients", got)
	}
}

// TestTLSNodeRefusesPlaintextSidecar checks the other side: a sidecar that speaks
// plaintext to a TLS node gets its client an error, not a hang, and the node logs why.
func TestTLSNodeRefusesPlaintextSidecar(t *testing.T) {
	pki := tlstest.New(t)
	logBuf := &syncBuffer{}
	l := zerolog.New(logBuf)
	n := mustNode(t, node.Config{TLS: pki.ServerConfig(t, false), Logger: &l}, "127.0.0.1:0")
	tp := mustProxy(t, Config{NodeAddr: n.addr})
	c := mustDial(t, tp.addr)
	c.send(frame(cql.V4, 0, 1, cql.OpOptions, nil))
	// The node closes the connection: the sidecar answers with an error frame or closes;
	// either way no SUPPORTED.
	if h, body, err := c.tryRecv(); err == nil && h.Opcode != cql.OpError {
		t.Fatalf("a plaintext sidecar got %v %q from a TLS node; want an error", h.Opcode, body)
	}
	waitFor(t, "the node's log line", func() bool {
		return strings.Contains(logBuf.String(), "the client does not speak TLS")
	})
}

// TestNodeTLSServerName checks that the node's certificate is verified: a NodeTLS that
// names another server fails the handshake, and the client gets an error frame.
func TestNodeTLSServerName(t *testing.T) {
	pki := tlstest.New(t)
	n := mustNode(t, node.Config{TLS: pki.ServerConfig(t, false)}, "127.0.0.1:0")
	cfg := pki.ClientConfig(t, false)
	cfg.ServerName = "not-the-node.example"
	tp := mustProxy(t, Config{NodeAddr: n.addr, NodeTLS: cfg})
	c := mustDial(t, tp.addr)
	c.send(frame(cql.V4, 0, 1, cql.OpOptions, nil))
	h, body := c.recv()
	if h.Opcode != cql.OpError || !strings.Contains(string(body), "certificate") {
		t.Fatalf("got %v %q; want an error frame about the node's certificate", h.Opcode, body)
	}
}
