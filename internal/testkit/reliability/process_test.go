package reliability

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// child is a tracecar process started by a test.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

// buildTracecar builds the tracecar binary (without the race detector) into a temporary
// directory.
func buildTracecar(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tracecar")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tracecar/tracecar/cmd/tracecar").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case c.lines <- s.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(testTimeout):
			cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// await returns the submatches of the first stdout line that matches re.
func (c *child) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		select {
		case l := <-c.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("%s printed no line matching %s", c.cmd.Path, re)
		}
	}
}

// rssKiB returns the process's VmRSS in KiB, or 0 when /proc cannot tell.
func (c *child) rssKiB() uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// heapInuse reads go_memstats_heap_inuse_bytes from an admin API's /metrics.
func heapInuse(t *testing.T, api string) float64 {
	t.Helper()
	return metricValue(t, api, "go_memstats_heap_inuse_bytes")
}

// metricValue reads the unlabelled metric name from an admin API's /metrics.
func metricValue(t *testing.T, api, name string) float64 {
	t.Helper()
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatalf("%s/metrics has no %s", api, name)
	return 0
}

// TestChildProcessGCPercents checks the GOGC that `tracecar node` and `tracecar sidecar
// --node` run with, from their own /metrics: 400 for the node (cmd/tracecar, nodeGC) and
// Go's 100 for the sidecar, which a lower GOGC would cost CPU in sampled mode (docs/architecture.md,
// "Idle connections"), or the environment's GOGC for both when it is set.
func TestChildProcessGCPercents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildTracecar(t)
	nodeProc := startChild(t, bin, "node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0")
	nodeAddr := nodeProc.await(t, regexp.MustCompile(`CQL on (\S+)`))[1]
	nodeAPI := nodeProc.await(t, regexp.MustCompile(`API on (\S+)`))[1]
	sc := startChild(t, bin, "sidecar", "--listen", "127.0.0.1:0", "--node", nodeAddr, "--admin", "127.0.0.1:0")
	scAPI := sc.await(t, regexp.MustCompile(`CQL on \S+ -> node \S+, admin API (\S+)`))[1]
	wantNode, wantSidecar := 400.0, 100.0
	if v, ok := os.LookupEnv("GOGC"); ok {
		env, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Skipf("GOGC=%q is not a number", v)
		}
		wantNode, wantSidecar = env, env
	}
	if got := metricValue(t, nodeAPI, "go_gc_gogc_percent"); got != wantNode {
		t.Errorf("tracecar node runs with GOGC %v; want %v", got, wantNode)
	}
	if got := metricValue(t, scAPI, "go_gc_gogc_percent"); got != wantSidecar {
		t.Errorf("tracecar sidecar --node runs with GOGC %v; want %v", got, wantSidecar)
	}
}

// TestHostileFramesChildProcesses runs the acceptance case against real processes, as the
// issue reproduced it: `tracecar node` and `tracecar sidecar --node` as children, 40
// connections to each claiming 200 MiB frames and sending 8 MiB. The heap of each (from its
// /metrics) and its RSS (from /proc) stay under 256 MiB, and both keep serving a driver.
func TestHostileFramesChildProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const conns, claim, sent = 40, 200 << 20, 8 << 20
	bin := buildTracecar(t)
	nodeProc := startChild(t, bin, "node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0")
	nodeAddr := nodeProc.await(t, regexp.MustCompile(`CQL on (\S+)`))[1]
	nodeAPI := nodeProc.await(t, regexp.MustCompile(`API on (\S+)`))[1]
	sc := startChild(t, bin, "sidecar", "--listen", "127.0.0.1:0", "--node", nodeAddr, "--admin", "127.0.0.1:0")
	m := sc.await(t, regexp.MustCompile(`CQL on (\S+) -> node \S+, admin API (\S+)`))
	scAddr, scAPI := m[1], m[2]

	s := session(t, scAddr)
	probe := startProber(s)
	procs := []struct {
		name, addr, api string
		c               *child
		peak            atomic.Uint64
	}{{name: "sidecar", addr: scAddr, api: scAPI, c: sc}, {name: "node", addr: nodeAddr, api: nodeAPI, c: nodeProc}}
	var before [2]uint64
	var heapBefore [2]float64
	for i := range procs {
		before[i] = procs[i].c.rssKiB()
		heapBefore[i] = heapInuse(t, procs[i].api)
	}
	ctx, stop := context.WithCancel(context.Background())
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for ctx.Err() == nil {
			for i := range procs {
				if r := procs[i].c.rssKiB(); r > procs[i].peak.Load() {
					procs[i].peak.Store(r)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var refused atomic.Int64
	for i := range procs {
		parallel(conns, func(j int) {
			limit := cql.MaxStartupFrameSize
			if j%2 == 1 {
				limit = cql.DefaultMaxFrameSize
			}
			e, _, err := claimFrames(procs[i].addr, j%2 == 1, int16(j), claim, sent)
			if err == nil && e.Message == cql.FrameTooBigMessage(claim, limit) {
				refused.Add(1)
			}
		})
	}
	stop()
	sampler.Wait()
	probe.finish(t)
	for i := range procs {
		p := &procs[i]
		heap := heapInuse(t, p.api)
		t.Logf("FIGURE child process %s: RSS %d KiB before, peak %d KiB during 40 connections claiming 200 MiB; heap in use %.1f MiB before, %.1f MiB after",
			p.name, before[i], p.peak.Load(), heapBefore[i]/(1<<20), heap/(1<<20))
		if p.peak.Load() >= heapBound>>10 {
			t.Errorf("%s: peak RSS %d KiB, want under %d KiB", p.name, p.peak.Load(), heapBound>>10)
		}
		if heap >= heapBound {
			t.Errorf("%s: heap in use %.0f bytes after the attack, want under %d", p.name, heap, heapBound)
		}
		var v string
		if err := session(t, p.addr).Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
			t.Errorf("driver to the %s after the attack: %v", p.name, err)
		}
	}
	if got := refused.Load(); got != 2*conns {
		t.Errorf("%d of %d hostile connections refused with Cassandra's error", got, 2*conns)
	}
}
