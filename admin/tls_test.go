package admin_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/testkit/tlstest"
)

func TestTLS(t *testing.T) {
	pki := tlstest.New(t)
	f := mustServe(t, admin.Config{TLSCert: pki.ServerCert, TLSKey: pki.ServerKey, Token: "t", Tracer: newFakeTracer()})
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool(t)}}}
	status, body := do(t, c, f.url, request{method: "GET", path: "/storage_service/slow_query", header: map[string]string{"Authorization": "Bearer t"}})
	if status != 200 {
		t.Fatalf("HTTPS GET: %d %s", status, body)
	}
	// Plain HTTP to the TLS port gets no API answer.
	resp, err := client.Get("http" + f.url[len("https"):] + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP on the TLS port got 200")
		}
	}
}

func TestTLSBadFiles(t *testing.T) {
	s := admin.New(admin.Config{TLSCert: "/nonexistent/cert.pem", TLSKey: "/nonexistent/key.pem"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(t.Context(), ln); err == nil {
		t.Fatal("Serve with missing TLS files succeeded")
	}
}
