package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// pythonFill fills a node through the Python driver at its defaults (protocol v5) until a
// write is refused, then checks that reads work and that a TRUNCATE lets writes in again.
// It prints what it saw, one "key: value" a line.
const pythonFill = `
import os
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.protocol import OverloadedErrorMessage
c = Cluster([os.environ['CQL_HOST']], port=int(os.environ['CQL_PORT']))
s = c.connect()
print("protocol:", c.protocol_version)
s.execute("CREATE KEYSPACE mem WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.set_keyspace('mem')
s.execute("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))")
ins = s.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?)")
val = 'x' * 4000
def overloaded(e):
    errs = e.errors.values() if isinstance(e, NoHostAvailable) else [e]
    for x in errs:
        if isinstance(x, OverloadedErrorMessage):
            return x
    return None
n = 0
refused = None
while n < 100000:
    try:
        s.execute(ins, (n % 100, n, val))
    except Exception as e:
        refused = overloaded(e)
        if refused is None:
            raise
        break
    n += 1
print("written:", n)
print("refused:", refused.summary if refused else None, "|", refused.message if refused else None)
print("read:", len(list(s.execute("SELECT k, c FROM t WHERE k = 1 LIMIT 10"))))
try:
    s.execute(ins, (1, 1, val))
    print("again: admitted")
except Exception as e:
    print("again:", "refused" if overloaded(e) else repr(e))
s.execute("DELETE FROM t WHERE k = 2")
s.execute("TRUNCATE t")
s.execute(ins, (1, 1, val))
print("after truncate:", len(list(s.execute("SELECT k FROM t"))))
c.shutdown()
`

// startNodeProcess starts "tracecar node" as a process of its own (this test binary,
// re-executed as loadcheck does), with args, and returns its CQL and API addresses and pid.
func startNodeProcess(t *testing.T, args ...string) (cqlAddr, api string, pid int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	var lines []string
	for api == "" && sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if m := nodeCQLRE.FindStringSubmatch(line); m != nil {
			cqlAddr = m[1]
		}
		if m := nodeAPIRE.FindStringSubmatch(line); m != nil {
			api = "http://" + m[1]
		}
	}
	if cqlAddr == "" || api == "" {
		t.Fatalf("the node did not start:\n%s", strings.Join(lines, "\n"))
	}
	if want := "tracecar node: memory limit 64 MiB (--memory-limit)"; lines[0] != want {
		t.Errorf("start-up line %q; want %q", lines[0], want)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return cqlAddr, api, cmd.Process.Pid
}

// peakRSS returns the peak RSS (VmHWM) of process pid, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 10
}

// TestNodeMemoryLimitPython is the acceptance test of --memory-limit: a node process with
// 64 MiB, filled by the Python driver at its defaults, refuses the write that finds its
// tables full with Overloaded naming the limit and the flag, serves reads, keeps its peak
// RSS under 256 MiB, and takes writes again after a TRUNCATE; its metrics show the bytes
// held, the limit and the refused writes.
func TestNodeMemoryLimitPython(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a node with 56 MiB")
	}
	drivertest.RequirePython(t)
	addr, api, pid := startNodeProcess(t, "--memory-limit", "64MiB")
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, drivertest.Python, "-c", pythonFill)
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, raw)
	}
	out := string(raw)
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			got[k] = v
		}
	}
	if got["protocol"] != "5" {
		t.Errorf("the driver spoke protocol %q; want 5 (its default against this node)", got["protocol"])
	}
	// 56 MiB of tables (7/8 of 64 MiB), about 4.3 KB a row as the node counts them.
	if n, _ := strconv.Atoi(got["written"]); n < 10000 || n > 15000 {
		t.Errorf("%s rows of 4,000 bytes written before the refusal; want 10,000 to 15,000 (56 MiB)", got["written"])
	}
	if want := "Coordinator node overloaded | node memory limit 64 MiB reached (--memory-limit): "; !strings.HasPrefix(got["refused"], want) {
		t.Errorf("refusal %q; want it to start with %q\n%s", got["refused"], want, out)
	}
	if got["read"] != "10" || got["again"] != "refused" || got["after truncate"] != "1" {
		t.Errorf("read %q, write when full %q, rows after TRUNCATE and a write %q; want 10, refused, 1\n%s", got["read"], got["again"], got["after truncate"], out)
	}
	if rss := peakRSS(t, pid); rss >= 256<<20 {
		t.Errorf("the node's peak RSS was %d MiB; want under 256 MiB", rss>>20)
	} else {
		t.Logf("the node's peak RSS: %d MiB, with a limit of 64 MiB", rss>>20)
	}
	if m := scrape(t, api, "tracecar_node_memory_limit_bytes"); m[""] != 64<<20 {
		t.Errorf("tracecar_node_memory_limit_bytes %v; want %d", m, 64<<20)
	}
	if m := scrape(t, api, "tracecar_node_memory_refused_writes_total"); m[""] != 2 {
		t.Errorf("tracecar_node_memory_refused_writes_total %v; want 2", m)
	}
	if m := scrape(t, api, "tracecar_node_memory_held_bytes"); m[""] < 4000 || m[""] > 10000 {
		t.Errorf("tracecar_node_memory_held_bytes %v; want one row's, about 4.3 KB, after TRUNCATE and one write", m)
	}
}
