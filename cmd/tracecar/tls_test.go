package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/internal/testkit/tlstest"
)

// startCommand runs tracecar args until the test ends, and returns the submatches of the
// first stdout line that matches each of res, in order.
func startCommand(tb testing.TB, args []string, stderr io.Writer, res ...string) [][]string {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, args, pw, stderr)
		pw.Close()
	}()
	tb.Cleanup(func() {
		cancel()
		mustExitOK(tb, done)
	})
	sc := bufio.NewScanner(pr)
	var out [][]string
	for _, re := range res {
		r := regexp.MustCompile(re)
		var m []string
		for m == nil && sc.Scan() {
			m = r.FindStringSubmatch(sc.Text())
		}
		if m == nil {
			tb.Fatalf("tracecar %s printed no line matching %q", strings.Join(args, " "), re)
		}
		out = append(out, m)
	}
	go io.Copy(io.Discard, pr)
	return out
}

// tlsSession opens a gocql session over TLS to addr, with a client certificate.
func tlsSession(tb testing.TB, pki *tlstest.PKI, addr string) *gocql.Session {
	tb.Helper()
	host, port, _ := strings.Cut(addr, ":")
	o := drivertest.Options{Host: host, Port: atoi(tb, port), TLSCA: pki.CA, TLSCert: pki.ClientCert, TLSKey: pki.ClientKey}
	s, err := drivertest.Cluster(o).CreateSession()
	if err != nil {
		tb.Fatalf("gocql over TLS to %s: %v", addr, err)
	}
	tb.Cleanup(s.Close)
	return s
}

// TestTLSCommands runs `tracecar node` with TLS and mutual TLS, and `tracecar sidecar` in
// front of it with TLS on both sides and the CQL sink on. A gocql client goes through the
// sidecar over mutual TLS; the sink writes its records into the node over TLS, and the
// sampled sessions get the node's own events over TLS. Then `tracecar loadcheck` runs its
// load over TLS to both.
func TestTLSCommands(t *testing.T) {
	pki := tlstest.New(t)
	const token = "cmd-tls-token"
	t.Setenv("TRACECAR_ADMIN_TOKEN", token)
	nodeOut := startCommand(t, []string{"node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0",
		"--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey, "--tls-client-ca", pki.CA, "--log-level", "warn"},
		io.Discard, `CQL on (\S+)`, `API on (\S+)`)
	nodeAddr, nodeAPI := nodeOut[0][1], nodeOut[1][1]

	// The node's API takes the token from the environment.
	if code, _ := call(t, http.MethodPost, nodeAPI+"/system/logger/node?level=debug", ""); code != http.StatusUnauthorized {
		t.Errorf("node API without the token: %d; want 401", code)
	}
	if code, body := call(t, http.MethodPost, nodeAPI+"/system/logger/node?level=warn", "Bearer "+token); code != http.StatusOK {
		t.Errorf("node API with the token: %d %s; want 200", code, body)
	}

	side := startCommand(t, []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--node", nodeAddr,
		"--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey, "--tls-client-ca", pki.CA,
		"--node-tls-ca", pki.CA, "--node-tls-cert", pki.ClientCert, "--node-tls-key", pki.ClientKey,
		"--cql-sink", "--log-level", "warn"},
		io.Discard, `CQL on (\S+) -> node (\S+), admin API (\S+)`)[0]
	sidecarAddr, admin := side[1], side[3]
	auth := "Bearer " + token
	if code, body := call(t, http.MethodPost, admin+"/storage_service/trace_probability?probability=1", auth); code != http.StatusOK {
		t.Fatalf("set probability: %d %s", code, body)
	}

	s := tlsSession(t, pki, sidecarAddr)
	var rv string
	if err := s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv); err != nil || rv != "4.1.0" {
		t.Fatalf("release_version through the TLS sidecar: %q, %v", rv, err)
	}

	// The sampled session gets the node's events, read over TLS by the node-event fetch.
	var sessions []struct {
		Parameters map[string]string `json:"parameters"`
		Events     []struct {
			Source string `json:"source"`
		} `json:"events"`
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waited 30s for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("a sampled session with the node's events", func() bool {
		code, body := call(t, http.MethodGet, admin+"/tracecar/slow_log", auth)
		if code != http.StatusOK || json.Unmarshal([]byte(body), &sessions) != nil {
			return false
		}
		for _, s := range sessions {
			if !strings.Contains(s.Parameters["query"], "release_version") {
				continue
			}
			for _, e := range s.Events {
				if e.Source == "node" {
					return true
				}
			}
		}
		return false
	})
	// The CQL sink wrote it into the node, over TLS.
	direct := tlsSession(t, pki, nodeAddr)
	waitFor("a record in tracecar_traces.sessions", func() bool {
		var n int
		return direct.Query("SELECT count(*) FROM tracecar_traces.sessions").Scan(&n) == nil && n > 0
	})

	if code, body := call(t, http.MethodPost, admin+"/storage_service/trace_probability?probability=0", auth); code != http.StatusOK {
		t.Fatalf("reset probability: %d %s", code, body)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var lcOut strings.Builder
	code := run(ctx, []string{"loadcheck", "--node", nodeAddr, "--sidecar", sidecarAddr, "--admin", admin, "--node-api", nodeAPI,
		"--tls-ca", pki.CA, "--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey,
		"--modes", "direct,off", "--rounds", "1", "--duration", "500ms", "--warmup", "100ms", "--rate", "200", "--concurrency", "2",
		"--json", filepath.Join(dir, "r.json")}, &lcOut, &lcOut)
	if code != exitOK {
		t.Fatalf("loadcheck over TLS: exit %d\n%s", code, lcOut.String())
	}
	var rep struct {
		Modes []struct {
			Name   string  `json:"name"`
			OpRate float64 `json:"op_rate"`
			Errors int64   `json:"errors"`
		} `json:"modes"`
	}
	b := mustReadFile(t, filepath.Join(dir, "r.json"))
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Modes {
		if m.OpRate <= 0 || m.Errors != 0 {
			t.Errorf("loadcheck mode %s over TLS: op rate %v, errors %d; want load and no errors", m.Name, m.OpRate, m.Errors)
		}
	}
	if len(rep.Modes) != 2 {
		t.Errorf("loadcheck ran %d modes; want direct and off", len(rep.Modes))
	}
}

func mustReadFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
