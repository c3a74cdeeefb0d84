package ctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// The client of every command: adminapi's, with the token, the CA of an HTTPS API and
// Timeout.

// client is the admin API client, with the token.
type client struct {
	api adminapi.Client
}

func newClient(token, cacert string) (*client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, fmt.Errorf("read --cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s holds no PEM certificate", cacert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &client{api: adminapi.Client{HTTP: &http.Client{Timeout: Timeout, Transport: tr}, Token: token}}, nil
}

// request sends one request, with params form-encoded in the body, and returns the body of
// a 2xx response; any other status is an error with the API's message.
func (c *client) request(ctx context.Context, method, u string, params url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return c.api.Do(ctx, method, u, params)
}
