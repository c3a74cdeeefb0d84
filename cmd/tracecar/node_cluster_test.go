package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// startNodes runs `tracecar node` with args and returns the CQL and API addresses of each
// node, in order, once it has printed them.
func startNodes(t *testing.T, n int, args ...string) (cqls, apis []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"node", "--log-file", t.TempDir() + "/node.log"}, args...), pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		mustExitOK(t, done)
	})
	re := regexp.MustCompile(`(CQL|API) on (\S+)`)
	sc := bufio.NewScanner(pr)
	for (len(cqls) < n || len(apis) < n) && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			if m[1] == "CQL" {
				cqls = append(cqls, m[2])
			} else {
				apis = append(apis, m[2])
			}
		}
	}
	if len(cqls) < n || len(apis) < n {
		t.Fatalf("tracecar node printed CQL %v and API %v; want %d of each", cqls, apis, n)
	}
	go io.Copy(io.Discard, pr)
	return cqls, apis
}

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNodeCommandCluster starts `tracecar node --nodes 3`: nodes on 127.0.0.1 to 3 with
// one port, APIs on the matching addresses, peers that name the other nodes, and the
// test-only stop and start endpoints.
func TestNodeCommandCluster(t *testing.T) {
	cqls, apis := startNodes(t, 3, "--nodes", "3", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--allow-node-control", "--num-tokens", "4")
	port := ""
	for i, a := range cqls {
		host, p, _ := net.SplitHostPort(a)
		if want := "127.0.0." + strconv.Itoa(i+1); host != want {
			t.Errorf("node %d listens on %s; want %s", i+1, a, want)
		}
		if i == 0 {
			port = p
		} else if p != port {
			t.Errorf("node %d listens on port %s; node 1 on %s", i+1, p, port)
		}
		if want := "http://127.0.0." + strconv.Itoa(i+1) + ":"; !strings.HasPrefix(apis[i], want) {
			t.Errorf("node %d API on %s; want %s…", i+1, apis[i], want)
		}
	}

	c := gocql.NewCluster("127.0.0.2")
	c.Port = atoi(t, port)
	c.DisableInitialHostLookup = true
	c.Timeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var peers []string
	var tokens []string
	it := s.Query("SELECT peer, tokens FROM system.peers").Iter()
	var peer string
	for it.Scan(&peer, &tokens) {
		peers = append(peers, peer)
		if len(tokens) != 4 {
			t.Errorf("peer %s has %d tokens; want 4", peer, len(tokens))
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(peers, ",") != "127.0.0.1,127.0.0.3" && strings.Join(peers, ",") != "127.0.0.3,127.0.0.1" {
		t.Errorf("node 2's peers: %v; want 127.0.0.1 and 127.0.0.3", peers)
	}

	if code, body := post(t, apis[0]+"/tracecar/node/stop?node=3"); code != 200 {
		t.Fatalf("stop node 3: %d %s", code, body)
	}
	if nc, err := net.DialTimeout("tcp", cqls[2], 5*time.Second); err == nil {
		// It failed once in CI and never here: say who answered, for the next time.
		t.Errorf("node 3 accepts connections after /tracecar/node/stop: %s -> %s; sockets on port %s:\n%s",
			nc.LocalAddr(), nc.RemoteAddr(), port, socketsOnPort(atoi(t, port)))
		nc.Close()
	}
	if code, body := post(t, apis[1]+"/tracecar/node/stop?node=3"); code != http.StatusConflict {
		t.Errorf("stopping node 3 twice: %d %s; want 409", code, body)
	}
	if code, body := post(t, apis[0]+"/tracecar/node/stop?node=4"); code != http.StatusBadRequest || !strings.Contains(body, "from 1 to 3") {
		t.Errorf("stopping node 4 of 3: %d %s; want 400 naming the range", code, body)
	}
	if code, body := post(t, apis[2]+"/tracecar/node/start?node=3"); code != 200 {
		t.Fatalf("start node 3 through its own API: %d %s", code, body)
	}
	nc, err := net.DialTimeout("tcp", cqls[2], 5*time.Second)
	if err != nil {
		t.Fatalf("node 3 after /tracecar/node/start: %v", err)
	}
	nc.Close()
}

// TestNodeControlIsOffByDefault checks that without --allow-node-control there is no way to
// stop a node through the API.
func TestNodeControlIsOffByDefault(t *testing.T) {
	_, apis := startNodes(t, 2, "--nodes", "2", "--nodes-same-ip", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0")
	if code, _ := post(t, apis[0]+"/tracecar/node/stop?node=2"); code != http.StatusNotFound {
		t.Errorf("POST /tracecar/node/stop without --allow-node-control: %d; want 404", code)
	}
}

func TestNodeCommandUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"zero nodes", []string{"--nodes", "0"}, "--nodes must be from 1 to 254"},
		{"dcs mismatch", []string{"--nodes", "3", "--dcs", "dc1:2"}, "lays out 2 nodes, but --nodes is 3"},
		{"bad dcs", []string{"--dcs", "dc1"}, "want NAME:NODES"},
		{"tokens", []string{"--num-tokens", "0"}, "--num-tokens must be from 1 to 1536"},
		{"hostname", []string{"--nodes", "2", "--listen", "localhost:0"}, "must be IP:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			code := run(context.Background(), append([]string{"node", "--api", ""}, tt.args...), io.Discard, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("got exit %d, %q; want %d and %q", code, stderr.String(), exitUsage, tt.want)
			}
		})
	}
}

func TestSidecarPeerMapFlags(t *testing.T) {
	bad := t.TempDir() + "/cluster"
	if err := os.WriteFile(bad, []byte("10.0.0.1:9042 10.0.1.1:9043\n10.0.0.2:9042\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"both", []string{"--cluster-file", bad, "--peers", "10.0.0.1=10.0.1.1"}, "give one"},
		{"bad list", []string{"--peers", "10.0.0.1"}, "--peers: line 1"},
		{"bad file", []string{"--cluster-file", bad}, "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			code := run(context.Background(), append([]string{"sidecar"}, tt.args...), io.Discard, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("got exit %d, %q; want %d and %q", code, stderr.String(), exitUsage, tt.want)
			}
		})
	}
	var stderr strings.Builder
	if code := run(context.Background(), []string{"sidecar", "--cluster-file", t.TempDir() + "/missing"}, io.Discard, &stderr); code != exitRuntime {
		t.Errorf("a missing --cluster-file: exit %d (%s); want %d", code, stderr.String(), exitRuntime)
	}
}

// socketsOnPort lists the TCP sockets whose local port is port, from /proc/net/tcp and tcp6:
// local and remote address in /proc's hex, state, and the processes that hold them.
func socketsOnPort(port int) string {
	owners := map[string][]string{} // inode -> "pid comm"
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			pid := strings.Split(fd, "/")[2]
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			owners[l[8:len(l)-1]] = append(owners[l[8:len(l)-1]], pid+" "+strings.TrimSpace(string(comm)))
		}
	}
	var out strings.Builder
	suffix := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(file)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 9 && strings.HasSuffix(f[1], suffix) {
				fmt.Fprintf(&out, "  %s %s state %s held by %v\n", f[1], f[2], f[3], owners[f[9]])
			}
		}
	}
	return out.String()
}
