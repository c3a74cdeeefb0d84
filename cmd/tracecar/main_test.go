package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "usage: tracecar"},
		{"unknown command", []string{"nope"}, `unknown command "nope"`},
		{"unknown flag", []string{"node", "--bogus"}, "bogus"},
		{"bad log format", []string{"sidecar", "--log-format", "xml"}, "--log-format must be console or json"},
		{"bad auth", []string{"node", "--auth", "nocolon"}, "--auth must be USER:PASS"},
		{"tls half", []string{"sidecar", "--admin-tls-cert", "c.pem"}, "--admin-tls-cert and --admin-tls-key go together"},
		{"budget for a mode not run", []string{"loadcheck", "--modes", "direct,off", "--max-overhead", "full=5%"}, "full"},
		{"bad rounds", []string{"loadcheck", "--rounds", "x"}, "rounds"},
		{"otlp endpoint not a URL", []string{"sidecar", "--otlp-endpoint", "127.0.0.1:4318"}, "--otlp-endpoint must be a URL"},
		{"otlp protocol", []string{"sidecar", "--otlp-protocol", "http/json"}, "want http/protobuf or grpc"},
		{"node password alone", []string{"sidecar", "--node-password", "x"}, "needs --node-username"},
		{"toggle max over a week", []string{"sidecar", "--toggle-max-duration", "200h"}, "--toggle-max-duration must be a duration from 0 (off) to 168h"},
		{"toggle max negative", []string{"sidecar", "--toggle-max-duration", "-1s"}, "--toggle-max-duration must be"},
		{"deployment without a rate", []string{"loadcheck", "--node", "127.0.0.1:1", "--sidecar", "127.0.0.1:2", "--admin", "127.0.0.1:3"}, "saturates a production node"},
		{"sidecar without its node", []string{"loadcheck", "--sidecar", "127.0.0.1:2", "--admin", "127.0.0.1:3", "--rate", "1000"}, "need --node"},
		{"tls cert without key", []string{"sidecar", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{"client ca without cert", []string{"node", "--tls-client-ca", "ca.pem"}, "--tls-client-ca needs --tls-cert and --tls-key"},
		{"node tls without node", []string{"sidecar", "--node-tls"}, "--node-tls and --node-tls-* need --node"},
		{"node tls cert without key", []string{"sidecar", "--node", "127.0.0.1:1", "--node-tls-cert", "c.pem"}, "--node-tls-cert and --node-tls-key go together"},
		{"loadcheck tls without targets", []string{"loadcheck", "--tls-ca", "ca.pem"}, "--tls-* need --node or --sidecar"},
		{"bad max query len", []string{"sidecar", "--trace-max-query-len", "0"}, "--trace-max-query-len must be a positive number"},
		{"guardrail cpu over 100", []string{"sidecar", "--guardrail-cpu", "150"}, "--guardrail-cpu must be a percentage"},
		{"guardrail tiny window", []string{"sidecar", "--guardrail-window", "1ms"}, "--guardrail-window must be at least 100ms"},
		{"node api without node", []string{"sidecar", "--node-api", "http://127.0.0.1:1", "--node-kind", "scylla"}, "--node-api needs --node"},
		{"node api without kind", []string{"sidecar", "--node", "127.0.0.1:1", "--node-api", "http://127.0.0.1:1"}, "--node-api needs --node-kind"},
		{"bad node kind", []string{"sidecar", "--node", "127.0.0.1:1", "--node-api", "http://127.0.0.1:1", "--node-kind", "mysql"}, `node kind "mysql"`},
		{"slow_query on cassandra", []string{"sidecar", "--node", "127.0.0.1:1", "--node-api", "http://127.0.0.1:1", "--node-kind", "cassandra-jolokia", "--node-apply", "slow_query"}, "--node-apply slow_query needs --node-kind scylla"},
		{"bad node apply", []string{"sidecar", "--node-apply", "everything"}, "--node-apply"},
		{"bad node tracing", []string{"sidecar", "--node-tracing", "sometimes"}, `--node-tracing "sometimes": want on or off`},
		{"node tracing off with the probability applied", []string{"sidecar", "--node-tracing", "off", "--node-apply", "trace_probability"}, "--node-tracing off and --node-apply trace_probability contradict"},
		{"bad statement stats max", []string{"sidecar", "--statement-stats-max", "0"}, "--statement-stats-max must be a positive number"},
		{"bad max query len", []string{"sidecar", "--trace-max-query-len", "0"}, "--trace-max-query-len must be a positive number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), tt.args, &stdout, &stderr); got != exitUsage {
				t.Fatalf("exit code: got %d; want %d (stderr %q)", got, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.want)
			}
		})
	}
}

// TestSidecarCommand starts `tracecar sidecar` with its embedded node, runs gocql through
// it, toggles fast mode with the admin API, finds the session in the slow log, and stops
// it as SIGTERM would.
func TestSidecarCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "warn"}, pw, io.Discard)
		pw.Close()
	}()
	re := regexp.MustCompile(`CQL on (\S+) -> node (\S+), admin API (\S+)`)
	sc := bufio.NewScanner(pr)
	var m []string
	for m == nil && sc.Scan() {
		m = re.FindStringSubmatch(sc.Text())
	}
	if m == nil {
		cancel()
		t.Fatalf("no address line from tracecar sidecar (exit %d)", <-done)
	}
	go io.Copy(io.Discard, pr)
	sidecarAddr, admin := m[1], m[3]

	post := func(path string) {
		t.Helper()
		resp, err := http.Post(admin+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	post("/storage_service/slow_query?enable=true&fast=true&threshold=0")

	host, port, _ := strings.Cut(sidecarAddr, ":")
	c := gocql.NewCluster(host)
	c.Port = atoi(t, port)
	c.Timeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		t.Fatalf("gocql through the sidecar: %v", err)
	}
	var rv string
	if err := s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv); err != nil || rv != "4.1.0" {
		t.Fatalf("release_version: %q, %v", rv, err)
	}
	s.Close()

	resp, err := http.Get(admin + "/tracecar/slow_log?limit=100")
	if err != nil {
		t.Fatal(err)
	}
	var sessions []struct {
		Command    string            `json:"command"`
		Mode       string            `json:"mode"`
		Parameters map[string]string `json:"parameters"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&sessions); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	found := false
	for _, s := range sessions {
		if s.Mode == "fast" && strings.Contains(s.Parameters["query"], "SELECT release_version FROM system.local") {
			found = true
		}
	}
	if !found {
		t.Errorf("slow log has no fast session for the query; got %+v", sessions)
	}

	cancel()
	mustExitOK(t, done)
}

func atoi(tb testing.TB, s string) int {
	tb.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			tb.Fatalf("not a port: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// loadcheckArgs are short runs of the embedded default, enough rounds for a t-test. One
// worker makes the op rate latency-bound, so the sidecar's extra hop shows as a large,
// stable difference even under the race detector and next to other tests.
func loadcheckArgs(dir string, extra ...string) []string {
	return append([]string{"loadcheck", "--rounds", "6", "--target-error", "0", "--duration", "600ms", "--warmup", "200ms",
		"--concurrency", "1", "--json", filepath.Join(dir, "report.json")}, extra...)
}

// TestLoadcheckGuardrail checks the exit codes and the output of the guardrail on the
// embedded default. The relay through the sidecar adds a hop to every round trip, so with
// one worker it costs a large share of the op rate against the direct node: a 90% budget is
// never breached. A relay that holds each request for 10 ms costs nearly all of it: a 0.1%
// budget is breached, significantly. The decision itself
// is tested on fixed samples in loadcheck (TestGuardrailFromSamples).
func TestLoadcheckGuardrail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	dir := t.TempDir()
	t.Run("off=90% passes", func(t *testing.T) {
		var out, errb bytes.Buffer
		code := run(context.Background(), loadcheckArgs(dir, "--modes", "direct,off", "--baseline", "direct", "--max-overhead", "off=90%"), &out, &errb)
		if code != exitOK {
			t.Fatalf("exit code: got %d; want 0\n%s\n%s", code, out.String(), errb.String())
		}
		checkReport(t, filepath.Join(dir, "report.json"), []string{"direct", "off"})
	})
	t.Run("slow=0.1% breaches", func(t *testing.T) {
		// One run with a large true gap: the mode "slow" reaches the node through a relay
		// that holds every request for guardrailDelay, so with one worker it cannot exceed
		// 1/guardrailDelay ops/s, against thousands for the direct node even on a loaded
		// machine.
		st := mustStack(t, stackConfig{})
		relay := mustDelayRelay(t, st.Node, guardrailDelay)
		var out, errb bytes.Buffer
		code := run(context.Background(), loadcheckArgs(dir, "--node", st.Node, "--sidecar", st.Sidecar, "--admin", st.Admin,
			"--unthrottled", "--modes", "direct,slow", "--mode", "slow=target="+relay, "--baseline", "direct", "--max-overhead", "slow=0.1%"), &out, &errb)
		if code != exitGuardrail {
			t.Fatalf("exit code: got %d; want %d (guardrail breached)\n%s\n%s", code, exitGuardrail, out.String(), errb.String())
		}
		b, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Guardrail []struct {
				Mode           string   `json:"mode"`
				DegradationPct float64  `json:"degradation_pct"`
				Value          float64  `json:"value"`
				ValueErr       float64  `json:"value_err"`
				Lower95        *float64 `json:"lower95"`
				Upper95        *float64 `json:"upper95"`
				PValue         *float64 `json:"p_value"`
				Outcome        string   `json:"outcome"`
				Breached       bool     `json:"breached"`
			} `json:"guardrail"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Guardrail) != 1 || !rep.Guardrail[0].Breached || rep.Guardrail[0].PValue == nil || rep.Guardrail[0].Outcome != "over" || rep.Guardrail[0].Lower95 == nil {
			t.Fatalf("report guardrail %+v; want one breached verdict with a p-value", rep.Guardrail)
		}
		v := rep.Guardrail[0]
		if v.DegradationPct < 50 {
			t.Errorf("slow costs %.2f%% of direct's op rate; want a large gap (> 50%%)", v.DegradationPct)
		}
		// Word for word, with the numbers of the report: the paired estimate, tested
		// against the limit.
		line := fmt.Sprintf("GUARDRAIL BREACHED on op rate: slow costs %.2f%% ± %.2f%% of direct's op rate, significantly over its 0.1%% budget (one-sided 95%% bounds %+.2f%% to %+.2f%%; one-sided paired t against the limit, H0: at most the limit: t = ",
			v.Value, v.ValueErr, *v.Lower95, *v.Upper95)
		t.Logf("%s", strings.TrimSpace(line))
		if !strings.Contains(out.String(), line) {
			t.Errorf("stdout lacks the breach line\n%q\n%s", line, out.String())
		}
		if want := fmt.Sprintf("tracecar: guardrail breached: slow ops %+.2f%% ± %.2f%% > 0.1%%\n", v.Value, v.ValueErr); errb.String() != want {
			t.Errorf("stderr %q; want %q", errb.String(), want)
		}
	})
}

// guardrailDelay is what the relay of TestLoadcheckGuardrail holds each request for.
const guardrailDelay = 10 * time.Millisecond

// mustDelayRelay relays TCP connections to target, holding everything the client sends
// for delay before passing it on, until the test ends. It returns its address.
func mustDelayRelay(tb testing.TB, target string, delay time.Duration) string {
	tb.Helper()
	return mustRelay(tb, target, func() { time.Sleep(delay) })
}

// mustRelay relays TCP connections to target until the test ends, calling hold before it
// passes on each chunk a client sent. It returns its address.
func mustRelay(tb testing.TB, target string, hold func()) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(n)
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer n.Close()
				buf := make([]byte, 64<<10)
				for {
					k, err := c.Read(buf)
					if err != nil {
						return
					}
					hold()
					if _, err := n.Write(buf[:k]); err != nil {
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, n)
			}()
		}
	}()
	return ln.Addr().String()
}

func checkReport(tb testing.TB, path string, modes []string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var rep struct {
		Modes []map[string]any `json:"modes"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		tb.Fatalf("report JSON: %v", err)
	}
	if len(rep.Modes) != len(modes) {
		tb.Fatalf("report has %d modes; want %d", len(rep.Modes), len(modes))
	}
	fields := []string{"name", "op_rate", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "errors", "degradation_pct", "p_value"}
	for i, m := range rep.Modes {
		if m["name"] != modes[i] {
			tb.Errorf("mode %d: name %v; want %s", i, m["name"], modes[i])
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				tb.Errorf("mode %v lacks %q", m["name"], f)
			}
		}
		if r, _ := m["op_rate"].(float64); r <= 0 {
			tb.Errorf("mode %v: op_rate %v; want > 0", m["name"], m["op_rate"])
		}
	}
}

// mustExitOK waits for a command whose context was cancelled to return exit code 0.
func mustExitOK(tb testing.TB, done <-chan int) {
	tb.Helper()
	select {
	case code := <-done:
		if code != exitOK {
			tb.Errorf("exit code after shutdown: got %d; want 0", code)
		}
	case <-time.After(30 * time.Second):
		tb.Fatal("the command did not stop within 30s of its context ending")
	}
}
