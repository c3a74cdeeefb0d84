package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/node"
)

// call sends one request with an optional Authorization header and returns the status and
// body.
func call(tb testing.TB, method, url, auth string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// routeURL makes a URL for r on base: a prefix route gets a real logger name or an id,
// and a POST the parameters that would make it succeed.
func routeURL(base string, r admin.Route) string {
	path := r.Path
	if strings.HasSuffix(path, "/") {
		if strings.HasPrefix(path, "/system/logger/") {
			path += logs.Sidecar
		} else {
			path += "00000000-0000-1000-8000-000000000000"
		}
	}
	if r.Method == http.MethodPost {
		switch {
		case strings.HasPrefix(path, "/system/logger"):
			path += "?level=trace"
		case path == "/storage_service/slow_query":
			path += "?enable=true"
		case path == "/storage_service/trace_probability":
			path += "?probability=1"
		}
	}
	return base + path
}

// unusualMethods are sent to every path besides the methods the servers list, so that a
// method served outside the route table, or a path that answers any method, is seen too.
var unusualMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodTrace, "PROPFIND", "FOO",
}

// TestOneTokenEverySurface starts the embedded stack with an admin token and calls every
// path of the sidecar's admin API and of the embedded node's API, as the servers' own route
// tables list them, with every method they list and the unusual ones: without the token, or
// with a wrong one, each is a 401 (but GET and HEAD /healthz); with the token, a listed
// route is served and any other method is a 405, so that the list holds everything served.
// The token never shows in the logs.
func TestOneTokenEverySurface(t *testing.T) {
	const token = "s3cret-token-value"
	var logBuf lockedBuffer
	reg, err := logs.New(logs.Config{Writer: &logBuf, Level: "trace", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	st, err := startStack(context.Background(), stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 100, AdminToken: token}, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	if st.nodeAPI == nil {
		t.Fatal("the embedded stack has no node API")
	}
	surfaces := []struct {
		name   string
		base   string
		routes []admin.Route
	}{
		{"admin API", st.Admin, st.api.Routes()},
		{"node API", st.NodeAPI, st.nodeAPI.Routes()},
	}
	for _, s := range surfaces {
		if len(s.routes) < 5 {
			t.Fatalf("%s lists %d routes: %v", s.name, len(s.routes), s.routes)
		}
		listed := map[admin.Route]bool{}
		methods := append([]string(nil), unusualMethods...)
		// An unknown path is refused before routing, so that it reveals nothing either.
		paths := []string{"/no/such/path"}
		for _, r := range s.routes {
			listed[r] = true
			if !slices.Contains(methods, r.Method) {
				methods = append(methods, r.Method)
			}
			if !slices.Contains(paths, r.Path) {
				paths = append(paths, r.Path)
			}
		}
		for _, path := range paths {
			for _, m := range methods {
				url := routeURL(s.base, admin.Route{Method: m, Path: path})
				for _, auth := range []string{"", "Bearer wrong", "Basic " + token, "Bearer " + token + "x"} {
					code, body := call(t, m, url, auth)
					want := http.StatusUnauthorized
					if path == "/healthz" && (m == http.MethodGet || m == http.MethodHead) {
						want = http.StatusOK
					}
					if code != want {
						t.Errorf("%s: %s %s with Authorization %q: %d %s; want %d", s.name, m, url, auth, code, body, want)
					}
				}
				if path == "/no/such/path" {
					continue
				}
				code, body := call(t, m, url, "Bearer "+token)
				served := listed[admin.Route{Method: m, Path: path}] ||
					m == http.MethodHead && listed[admin.Route{Method: http.MethodGet, Path: path}]
				switch {
				case served && (code == http.StatusUnauthorized || strings.Contains(body, "no endpoint") || code == http.StatusMethodNotAllowed):
					t.Errorf("%s: %s %s with the token: %d %s; want it served", s.name, m, url, code, body)
				case !served && code != http.StatusMethodNotAllowed:
					t.Errorf("%s: %s %s with the token: %d %s; want 405, as Routes does not list it", s.name, m, url, code, body)
				}
			}
		}
	}
	if strings.Contains(logBuf.String(), token) {
		t.Errorf("the token appears in the logs:\n%s", logBuf.String())
	}
	if !strings.Contains(logBuf.String(), "missing or wrong token") {
		t.Errorf("no refusal logged:\n%s", logBuf.String())
	}
}

// TestNodeAPISlowQueryNotApplied checks that the node API refuses a slow_query change that
// it cannot apply, rather than answering 200, and that its state does not change.
func TestNodeAPISlowQueryNotApplied(t *testing.T) {
	st := mustStack(t, stackConfig{})
	code, body := call(t, http.MethodPost, st.NodeAPI+"/storage_service/slow_query?enable=true&threshold=0", "")
	if code != http.StatusNotImplemented || !strings.Contains(body, "sidecar") {
		t.Errorf("POST slow_query on the node API: %d %s; want 501 with a message pointing at the sidecar", code, body)
	}
	code, body = call(t, http.MethodGet, st.NodeAPI+"/storage_service/slow_query", "")
	if code != http.StatusOK || !strings.Contains(body, `"enable":false`) {
		t.Errorf("GET slow_query on the node API: %d %s; want enable false", code, body)
	}
	for _, p := range []string{"/tracecar/slow_log", "/tracecar/sessions/x"} {
		if code, body := call(t, http.MethodGet, st.NodeAPI+p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s on the node API: %d %s; want 404", p, code, body)
		}
	}
	// trace_probability is applied: the node itself reports it.
	if code, body := call(t, http.MethodPost, st.NodeAPI+"/storage_service/trace_probability?probability=0.5", ""); code != http.StatusOK {
		t.Fatalf("POST trace_probability: %d %s", code, body)
	}
	if code, body := call(t, http.MethodGet, st.NodeAPI+"/storage_service/trace_probability", ""); code != http.StatusOK || strings.TrimSpace(body) != "0.5" {
		t.Errorf("GET trace_probability: %d %s; want 0.5", code, body)
	}
}

// fakeAddrListener reports a non-loopback address, without binding one, and fails its
// first Accept, so that a server that starts returns at once.
type fakeAddrListener struct{}

var errFakeAccept = errors.New("fake listener: no connections")

func (fakeAddrListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 10001} }
func (fakeAddrListener) Accept() (net.Conn, error) { return nil, errFakeAccept }
func (fakeAddrListener) Close() error              { return nil }

// TestNodeAPILoopbackRule checks that the node API, like the admin API, refuses to serve a
// non-loopback address without a token, and serves it with one or with insecure.
func TestNodeAPILoopbackRule(t *testing.T) {
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := node.New(node.Config{})
	for _, tt := range []struct {
		name     string
		token    string
		insecure bool
		open     bool
	}{
		{"no token", "", false, false},
		{"token", "t", false, true},
		{"insecure", "", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := newNodeAPI(srv, reg, admin.Config{Token: tt.token, Insecure: tt.insecure}).Serve(context.Background(), fakeAddrListener{})
			if errors.Is(err, admin.ErrOpen) == tt.open || tt.open && !errors.Is(err, errFakeAccept) {
				t.Errorf("Serve on a non-loopback address: %v; want open %v", err, tt.open)
			}
		})
	}
}

// TestTokenNeverPrinted sets the token in the environment and makes each command print
// its usage: the token is not in it.
func TestTokenNeverPrinted(t *testing.T) {
	const token = "env-token-value-42"
	t.Setenv("TRACECAR_ADMIN_TOKEN", token)
	for _, args := range [][]string{
		{"sidecar", "--bogus"}, {"node", "--bogus"}, {"loadcheck", "--bogus"}, {"ctl", "--bogus"},
		{"sidecar", "-h"}, {"node", "-h"}, {"loadcheck", "-h"},
	} {
		var stdout, stderr bytes.Buffer
		run(context.Background(), args, &stdout, &stderr)
		if strings.Contains(stdout.String()+stderr.String(), token) {
			t.Errorf("tracecar %s prints the token:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		}
		if !strings.Contains(stderr.String(), "TRACECAR_ADMIN_TOKEN") && args[1] == "-h" {
			t.Errorf("tracecar %s does not mention TRACECAR_ADMIN_TOKEN:\n%s", strings.Join(args, " "), stderr.String())
		}
	}
}

// TestQueryLiteralsWarning checks the startup warning of --trace-query-literals, and its
// absence by default.
func TestQueryLiteralsWarning(t *testing.T) {
	for _, tt := range []struct {
		args []string
		warn bool
	}{{nil, false}, {[]string{"--trace-query-literals"}, true}} {
		var stderr lockedBuffer
		args := append([]string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, tt.args...)
		startCommand(t, args, &stderr, `CQL on (\S+)`)
		if got := strings.Contains(stderr.String(), "--trace-query-literals: recorded query text keeps its literal values"); got != tt.warn {
			t.Errorf("tracecar %s: warning %v; want %v\n%s", strings.Join(args, " "), got, tt.warn, stderr.String())
		}
	}
}
