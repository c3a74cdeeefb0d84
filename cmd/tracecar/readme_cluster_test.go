package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// readmeBlock returns the lines of the first sh block after heading in the document file.
func readmeBlock(tb testing.TB, file, heading string) []string {
	tb.Helper()
	_, rest, ok := strings.Cut(readDoc(tb, file), "\n"+heading+"\n")
	if !ok {
		tb.Fatalf("%s has no heading %q", file, heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		tb.Fatalf("no sh block under %q", heading)
	}
	return strings.Split(block, "\n")
}

// TestREADMEClusterBlock runs the cluster block of docs/deploy.md as written, on free ports instead
// of its fixed ones: `tracecar node --nodes 3`, three sidecars, and the Python driver's
// queries through one sidecar, which must find the three sidecars and read its write back.
func TestREADMEClusterBlock(t *testing.T) {
	drivertest.RequirePython(t)
	ports, script := startREADMECluster(t)
	pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer pcancel()
	cmd := exec.CommandContext(pctx, drivertest.Python, "-")
	cmd.Stdin = strings.NewReader(strings.Join(script, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/deploy.md's Python: %v\n%s", err, out)
	}
	sc := ports["9043"]
	want := fmt.Sprintf("['127.0.0.1:%s', '127.0.0.2:%s', '127.0.0.3:%s']\nhello cluster\n", sc, sc, sc)
	if !strings.HasSuffix(string(out), want) {
		t.Errorf("docs/deploy.md's Python printed:\n%s\nwant it to end with:\n%s", out, want)
	}
}

// startREADMECluster starts the processes of the cluster block of docs/deploy.md in-process, each of
// its ports replaced by a free one, until the test ends. It returns the README's ports
// mapped to the ones used, and the block's Python script with its ports replaced.
func startREADMECluster(t *testing.T) (map[string]string, []string) {
	t.Helper()
	lines := readmeBlock(t, "docs/deploy.md", "## A cluster: one sidecar per node")

	// Every port the block names gets a port that is free on 127.0.0.1 to 3.
	// The listeners stay open until every port is picked, so that two of the block's ports
	// never get the same one (as --listen and --api of one node once did).
	ports := map[string]string{}
	var held []net.Listener
	for _, p := range regexp.MustCompile(`(?::|port=)(\d{4,5})\b`).FindAllStringSubmatch(strings.Join(lines, "\n"), -1) {
		if _, ok := ports[p[1]]; !ok {
			lns := clustertest.ListenSamePort(t, 3)
			ports[p[1]] = fmt.Sprint(lns[0].Addr().(*net.TCPAddr).Port)
			held = append(held, lns...)
		}
	}
	for _, ln := range held {
		ln.Close()
	}
	portRE := regexp.MustCompile(`(:|port=)(\d{4,5})\b`)
	local := func(s string) string {
		return portRE.ReplaceAllStringFunc(s, func(m string) string {
			sub := portRE.FindStringSubmatch(m)
			return sub[1] + ports[sub[2]]
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	var listens, apis []string
	var script []string
	inScript := false
	for _, line := range lines {
		switch {
		case inScript && line == "EOF":
			inScript = false
		case inScript:
			script = append(script, local(line))
		case line == "" || strings.HasPrefix(line, "#") || line == "go build -o tracecar ./cmd/tracecar" || strings.HasPrefix(line, "sleep "):
		case strings.HasPrefix(line, "./tracecar ") && strings.HasSuffix(line, " &"):
			args := strings.Fields(local(strings.TrimSuffix(strings.TrimPrefix(line, "./tracecar "), " &")))
			for i, a := range args {
				if a == "--listen" && i+1 < len(args) {
					listens = append(listens, args[i+1])
				}
				if (a == "--admin" || a == "--api") && i+1 < len(args) {
					apis = append(apis, args[i+1])
				}
			}
			args = append(args, "--log-file", t.TempDir()+"/log")
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code := run(ctx, args, io.Discard, io.Discard); code != exitOK {
					t.Errorf("tracecar %s: exit %d", strings.Join(args, " "), code)
				}
			}()
		case line == "python3 - <<'EOF'":
			inScript = true
		default:
			t.Fatalf("the test does not know how to run docs/deploy.md line %q", line)
		}
	}
	if len(listens) != 4 || len(script) == 0 {
		t.Fatalf("docs/deploy.md block: %d listeners and %d lines of Python; want a node, 3 sidecars and a script", len(listens), len(script))
	}
	for _, a := range append(listens, apis...) {
		waitListening(t, a)
	}
	// The node's --listen is node 1's; nodes 2 and 3 are on the next IPs.
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		for _, a := range []string{listens[0], apis[0]} {
			_, port, _ := net.SplitHostPort(a)
			waitListening(t, net.JoinHostPort(ip, port))
		}
	}
	return ports, script
}

func waitListening(tb testing.TB, addr string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nothing listens on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCtlHostsFromCQL sets fast mode on the README's three sidecars with one command that
// names one sidecar's CQL port, and reads it back from each sidecar's own API.
func TestCtlHostsFromCQL(t *testing.T) {
	ports, _ := startREADMECluster(t)
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"ctl", "--hosts-from-cql", "127.0.0.3:" + ports["9043"], "--admin-port", ports["10000"],
		"slow-query", "--enable", "--fast", "--threshold", "200ms"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("ctl --hosts-from-cql: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for i := 1; i <= 3; i++ {
		host := fmt.Sprintf("127.0.0.%d:%s", i, ports["10000"])
		if !strings.Contains(stdout.String(), host+"  ok") {
			t.Errorf("ctl output does not say %s ok:\n%s", host, stdout.String())
		}
		api := "http://" + host
		resp, err := http.Get(api + "/storage_service/slow_query")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `{"enable":true,"ttl":86400,"threshold":200000,"fast":true}`; strings.TrimSpace(string(body)) != want {
			t.Errorf("sidecar %d after ctl: %s; want %s", i, body, want)
		}
	}

	stderr.Reset()
	if code := run(context.Background(), []string{"ctl", "--hosts-from-cql", "nowhere", "status"}, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "HOST:PORT") {
		t.Errorf("--hosts-from-cql nowhere: exit %d, %s; want %d naming HOST:PORT", code, stderr.String(), exitUsage)
	}
}

// TestLoadcheckCluster runs loadcheck, with the default modes, against the README's three
// sidecars: every mode's steps reach all three and are undone after, the load of the
// sidecar modes spreads over all three, and the report has a per-sidecar table.
func TestLoadcheckCluster(t *testing.T) {
	ports, _ := startREADMECluster(t)
	var admins []string
	for i := 1; i <= 3; i++ {
		admins = append(admins, fmt.Sprintf("http://127.0.0.%d:%s", i, ports["10000"]))
	}
	report := t.TempDir() + "/r.json"
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"loadcheck",
		"--node", "127.0.0.1:" + ports["9042"], "--sidecar", "127.0.0.1:" + ports["9043"],
		"--admin", strings.Join(admins, ","), "--node-api", "http://127.0.0.1:" + ports["10001"],
		"--rate", "2000", "--rounds", "1", "--target-error", "0", "--duration", "1s", "--warmup", "0", "--concurrency", "4", "--json", report}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("loadcheck against 3 sidecars: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "Requests seen by each sidecar") {
		t.Errorf("no per-sidecar table in:\n%s", stdout.String())
	}
	t.Logf("%s", stdout.String()[strings.Index(stdout.String(), "Requests seen by each sidecar"):])
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Cluster struct {
			Sidecars []string `json:"sidecars"`
			Modes    []struct {
				Name     string   `json:"name"`
				Requests []uint64 `json:"requests"`
				Total    uint64   `json:"total"`
			} `json:"modes"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Cluster.Sidecars, admins) || len(rep.Cluster.Modes) != 5 {
		t.Fatalf("report cluster section: %+v; want 5 modes on sidecars %v", rep.Cluster, admins)
	}
	for _, m := range rep.Cluster.Modes {
		if m.Name == "direct" {
			continue // the load goes to the nodes
		}
		for i, n := range m.Requests {
			if n*10 < m.Total {
				t.Errorf("mode %s: sidecar %d saw %d of %d requests; want the load spread over the 3", m.Name, i+1, n, m.Total)
			}
		}
	}
	for _, a := range admins {
		resp, err := http.Get(a + "/storage_service/slow_query")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `{"enable":false,"ttl":86400,"threshold":500000,"fast":false}`; strings.TrimSpace(string(body)) != want {
			t.Errorf("%s after loadcheck: %s; want the initial %s", a, body, want)
		}
	}

	// A sidecar that cannot be reached stops the check before any run, and is named.
	dead := "http://127.0.0.1:1"
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"loadcheck",
		"--node", "127.0.0.1:" + ports["9042"], "--sidecar", "127.0.0.1:" + ports["9043"],
		"--admin", admins[0] + "," + dead, "--rate", "2000", "--rounds", "1", "--duration", "1s", "--warmup", "0"}, &stdout, &stderr)
	if code != exitRuntime || !strings.Contains(stderr.String(), "sidecar "+dead) {
		t.Errorf("with an unreachable sidecar: exit %d, %q; want %d naming %s", code, stderr.String(), exitRuntime, dead)
	}
}
