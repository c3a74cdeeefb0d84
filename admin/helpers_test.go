package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
)

// fakeTracer is a Tracer with a config under a lock, some sessions, fixed stats and an
// optional check that every configuration it is given is consistent. It has no
// UpdateConfig, so the server's own lock is exercised.
type fakeTracer struct {
	mu       sync.Mutex
	cfg      tracing.Config
	sessions []tracing.Session // newest first
	stats    tracing.Stats
	check    func(tracing.Config) error
	bad      []error // failures of check
}

func newFakeTracer() *fakeTracer {
	return &fakeTracer{
		cfg: tracing.DefaultConfig(),
		sessions: []tracing.Session{
			{ID: "b0000000-0000-1000-8000-000000000002", DurationUS: 900000, Command: "EXECUTE", Mode: "fast",
				StartedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)},
			{ID: "a0000000-0000-1000-8000-000000000001", DurationUS: 600000, Command: "QUERY", Mode: "full",
				StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
				Events:    []tracing.Event{{Activity: tracing.EventSentToNode, Source: tracing.SourceSidecar, SourceElapsedUS: 12}}},
		},
		stats: tracing.Stats{Requests: 1000, Traced: 10, SlowSessions: 2,
			Dropped: map[string]uint64{"otel": 3, "log": 0}, Errors: map[string]uint64{"otel": 1}},
	}
}

func (f *fakeTracer) Config() tracing.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg
}

func (f *fakeTracer) SetConfig(c tracing.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.check != nil {
		if err := f.check(c); err != nil {
			f.bad = append(f.bad, err)
		}
	}
	f.cfg = c
	return nil
}

func (f *fakeTracer) SlowLog(limit int) []tracing.Session {
	f.mu.Lock()
	defer f.mu.Unlock()
	if limit <= 0 || limit > len(f.sessions) {
		limit = len(f.sessions)
	}
	return slices.Clone(f.sessions[:limit])
}

func (f *fakeTracer) Session(id string) (tracing.Session, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.ID == id {
			return s, true
		}
	}
	return tracing.Session{}, false
}

func (f *fakeTracer) Stats() tracing.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	st.Mode = f.cfg.Mode()
	return st
}

// fixture is a live server and what it serves.
type fixture struct {
	url  string // http://127.0.0.1:port
	tr   admin.Tracer
	logs *logs.Registry
	log  *syncBuffer // the admin logger's JSON lines
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mustServe starts a server for cfg on 127.0.0.1:0, with a fresh logger registry and a
// logger the test reads, and stops it when the test ends.
func mustServe(tb testing.TB, cfg admin.Config) *fixture {
	tb.Helper()
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	f := &fixture{tr: cfg.Tracer, logs: reg, log: &syncBuffer{}}
	if cfg.Logger == nil {
		l := zerolog.New(f.log)
		cfg.Logger = &l
	}
	cfg.Loggers = reg
	f.url = serve(tb, admin.New(cfg), cfg.TLSCert != "")
	return f
}

// serve runs s on a fresh 127.0.0.1:0 listener until the test ends and returns its URL.
func serve(tb testing.TB, s *admin.Server, tls bool) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve returned %v after cancel; want nil", err)
		}
	})
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String()
}

var client = &http.Client{Timeout: 10 * time.Second}

// request is one HTTP request of a test table.
type request struct {
	method, path string
	body         string            // sent form-encoded when not empty
	header       map[string]string // extra headers
}

func (r request) String() string {
	s := r.method + " " + r.path
	if r.body != "" {
		s += " body " + r.body
	}
	return s
}

// do sends r to base and returns the status and the body.
func do(tb testing.TB, c *http.Client, base string, r request) (int, string) {
	tb.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, base+r.path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%v: %v", r, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// state is everything a request could change, to check that a refused one changed nothing.
type state struct {
	cfg    tracing.Config
	levels map[string]string
}

func (f *fixture) state(tb testing.TB) state {
	tb.Helper()
	st := state{levels: map[string]string{}}
	if f.tr != nil {
		st.cfg = f.tr.Config()
	}
	for _, n := range f.logs.Names() {
		l, err := f.logs.Level(n)
		if err != nil {
			tb.Fatal(err)
		}
		st.levels[n] = l
	}
	return st
}

func (s state) equal(o state) bool {
	return s.cfg == o.cfg && reflect.DeepEqual(s.levels, o.levels)
}

// apiError decodes an error body and checks its shape.
func apiError(tb testing.TB, status int, body string) admin.Error {
	tb.Helper()
	var e admin.Error
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		tb.Fatalf("error body %q is not {\"message\",\"code\"}: %v", body, err)
	}
	if e.Code != status || e.Message == "" {
		tb.Errorf("error body %q: want code %d and a message", body, status)
	}
	return e
}

// errNotCorrelated is what the concurrency test's check reports.
var errNotCorrelated = errors.New("torn config")

// correlated checks that threshold encodes enable and fast: threshold = 1000*k + 10*enable
// + fast. Every POST of the concurrency test sends such a triple.
func correlated(c tracing.Config) error {
	want := int64(0)
	if c.Enable {
		want += 10
	}
	if c.Fast {
		want++
	}
	if c.ThresholdMicros%1000 != want {
		return fmt.Errorf("%w: %+v", errNotCorrelated, c)
	}
	return nil
}
