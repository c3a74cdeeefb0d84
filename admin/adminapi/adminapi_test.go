package adminapi_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
)

// mustServer runs the real admin API with a token, over a real tracer, and
// returns its base URL.
func mustServer(tb testing.TB, token string) string {
	tb.Helper()
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	tr := tracing.New(tracing.Options{})
	tb.Cleanup(func() { tr.Close(context.Background()) })
	srv := admin.New(admin.Config{Token: token, Tracer: tr, Loggers: reg})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

func TestClientAgainstTheAdminAPI(t *testing.T) {
	base := mustServer(t, "s3cret")
	ctx := context.Background()
	c := adminapi.Client{Token: "s3cret"}

	want := adminapi.SlowQuery{Enable: true, Fast: true, Threshold: 250000, TTL: 3600}
	if _, err := c.Do(ctx, http.MethodPost, base+adminapi.PathSlowQuery, want.Form()); err != nil {
		t.Fatal(err)
	}
	body, err := c.Do(ctx, http.MethodGet, base+adminapi.PathSlowQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := adminapi.ParseSlowQuery(body); err != nil || got != want {
		t.Errorf("slow_query = %+v, %v; want %+v", got, err, want)
	}

	if _, err := c.Do(ctx, http.MethodPost, base+adminapi.PathProbability, url.Values{"probability": {"0.125"}}); err != nil {
		t.Fatal(err)
	}
	body, _ = c.Do(ctx, http.MethodGet, base+adminapi.PathProbability, nil)
	if p, err := adminapi.ParseProbability(body); err != nil || p != "0.125" {
		t.Errorf("probability = %q, %v; want 0.125", p, err)
	}

	if _, err := c.Do(ctx, http.MethodPost, base+adminapi.PathLoggers+"/sidecar", url.Values{"level": {"debug"}}); err != nil {
		t.Fatal(err)
	}
	body, _ = c.Do(ctx, http.MethodGet, base+adminapi.PathLoggers+"/sidecar", nil)
	if l, err := adminapi.ParseLevel(body); err != nil || l != "debug" {
		t.Errorf("level = %q, %v; want debug", l, err)
	}
	body, _ = c.Do(ctx, http.MethodGet, base+adminapi.PathLoggers, nil)
	if names, err := adminapi.ParseLoggers(body); err != nil || !slices.Contains(names, "sidecar") {
		t.Errorf("loggers = %v, %v; want sidecar among them", names, err)
	}
	body, _ = c.Do(ctx, http.MethodGet, base+adminapi.PathLoggingLevel, nil)
	if kv, err := adminapi.ParseLoggingLevels(body); err != nil || !slices.Contains(kv, adminapi.LoggerLevel{Key: "sidecar", Value: "debug"}) {
		t.Errorf("logging levels = %v, %v; want sidecar=debug", kv, err)
	}
	body, _ = c.Do(ctx, http.MethodGet, base+adminapi.PathStatus, nil)
	if st, err := adminapi.ParseStatus(body); err != nil || st.Mode != "fast" {
		t.Errorf("status = %+v, %v; want mode fast", st, err)
	}

	// Errors carry the status and the API's own message.
	_, err = c.Do(ctx, http.MethodPost, base+adminapi.PathProbability, url.Values{"probability": {"2"}})
	var ae *adminapi.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Message == "" {
		t.Errorf("bad probability: error %v; want an *Error with status 400 and a message", err)
	}
	_, err = (&adminapi.Client{}).Do(ctx, http.MethodGet, base+adminapi.PathSlowQuery, nil)
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("no token: error %v; want an *Error with status 401", err)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := adminapi.ParseSlowQuery([]byte(`{"enable":true}`)); err == nil {
		t.Error("ParseSlowQuery accepted a body without fast, threshold and ttl")
	}
	for _, b := range []string{`"x"`, `1.5`, `-0.1`} {
		if _, err := adminapi.ParseProbability([]byte(b)); err == nil {
			t.Errorf("ParseProbability(%s) accepted it", b)
		}
	}
	if _, err := adminapi.ParseLevel([]byte(`42`)); err == nil {
		t.Error("ParseLevel accepted a number")
	}
}

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{"": "", "h:1": "http://h:1", "https://h:1/": "https://h:1", "http://h:1": "http://h:1"} {
		if got := adminapi.BaseURL(in); got != want {
			t.Errorf("BaseURL(%q) = %q; want %q", in, got, want)
		}
	}
}
