package reliability

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/internal/testkit/tlstest"
)

// The sidecar's own upgrade (docs/deploy.md: Upgrade without dropping a connection), with real
// processes: `tracecar node`, `tracecar sidecar` and `tracecar sidecar --takeover`, built
// by the test, and real drivers.

// proc is a tracecar process of a handover test: its stdout lines, and its stderr (the
// logs) in a file that a failing test prints.
type proc struct {
	name   string
	cmd    *exec.Cmd
	lines  chan string
	logs   string
	exited chan struct{}
	err    error // once exited
}

// procEnv is the environment of the children: the event loop on whatever the test process
// runs (CI runs this suite again with TRACECAR_EVENT_LOOP=off, which would keep every
// connection on the goroutine path, where it cannot move).
func procEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TRACECAR_EVENT_LOOP") })
}

func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, bin, nil, args...)
}

func startProcEnv(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	logs := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(procEnv(), env...)
	cmd.Stderr = f
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, lines: make(chan string, 64), logs: logs, exited: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			fmt.Fprintln(f, "stdout: "+s.Text())
			select {
			case p.lines <- s.Text():
			default:
			}
		}
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			b, _ := os.ReadFile(logs)
			t.Logf("%s (pid %d) logs:\n%s", name, cmd.Process.Pid, b)
		}
	})
	return p
}

// stop ends the process, with SIGINT first, and waits for it.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(testTimeout):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// await returns the submatches of the next stdout line that matches re.
func (p *proc) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(testTimeout)
	for {
		select {
		case l := <-p.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-p.exited:
			t.Fatalf("%s exited (%v) before printing a line matching %s", p.name, p.err, re)
		case <-deadline:
			t.Fatalf("%s printed no line matching %s", p.name, re)
		}
	}
}

// exitCode waits for the process to exit and returns its code.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(testTimeout):
		t.Fatalf("%s did not exit", p.name)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// logged reports whether the process's logs hold s.
func (p *proc) logged(s string) bool {
	b, _ := os.ReadFile(p.logs)
	return strings.Contains(string(b), s)
}

// cluster is a node and the sidecar process in front of it, replaced by takeovers.
type cluster struct {
	env       []string // more environment for the sidecars
	bin       string
	node      *proc
	nodeAddr  string
	nodeAPI   string
	ctl       string
	args      []string // the sidecar's flags but --takeover
	sc        *proc
	addr, api string
	n         int // sidecar processes so far
}

var (
	nodeCQLRe  = regexp.MustCompile(`CQL on (\S+)`)
	nodeAPIRe  = regexp.MustCompile(`API on (\S+)`)
	sidecarRe  = regexp.MustCompile(`CQL on (\S+) -> node \S+, admin API (\S+)`)
	tookOverRe = regexp.MustCompile(`took over (\d+) connections from process (\d+) \((\d+) closed there instead\) in (\S+)`)
)

// startCluster starts a node (with nodeArgs) and a sidecar (with scArgs) in front of it.
func startCluster(t *testing.T, nodeArgs, scArgs []string) *cluster {
	t.Helper()
	c := &cluster{bin: buildTracecar(t), ctl: filepath.Join(t.TempDir(), "ctl.sock")}
	c.node = startProc(t, "node", c.bin, append([]string{"node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0"}, nodeArgs...)...)
	c.nodeAddr = c.node.await(t, nodeCQLRe)[1]
	c.nodeAPI = c.node.await(t, nodeAPIRe)[1]
	c.args = append([]string{"sidecar", "--listen", "127.0.0.1:0", "--node", c.nodeAddr, "--admin", "127.0.0.1:0",
		"--control-socket", c.ctl, "--drain-timeout", "5s"}, scArgs...)
	c.sc = c.startSidecar(t, false)
	return c
}

func (c *cluster) startSidecar(t *testing.T, takeover bool) *proc {
	t.Helper()
	c.n++
	args := c.args
	if takeover {
		args = append(slices.Clone(args), "--takeover")
	}
	p := startProcEnv(t, fmt.Sprintf("sidecar-%d", c.n), c.bin, c.env, args...)
	m := p.await(t, sidecarRe)
	if c.addr != "" && m[1] != c.addr {
		t.Fatalf("%s listens on %s; want the predecessor's %s", p.name, m[1], c.addr)
	}
	c.addr, c.api = m[1], m[2]
	return p
}

// takeover replaces the sidecar process by a new one, and returns once it has taken every
// connection over, and the old one has exited 0; with the number of connections it took
// over, when the new process was started, and when its last connection had arrived (from
// its status). The connections move in the last milliseconds of that span (its
// connections_from to connections_to, logged as the move).
func (c *cluster) takeover(t *testing.T) (moved int, from, to time.Time) {
	t.Helper()
	old := c.sc
	from = time.Now()
	c.sc = c.startSidecar(t, true)
	m := c.sc.await(t, tookOverRe)
	if code := old.exitCode(t); code != 0 {
		t.Errorf("%s exited %d after the takeover; want 0", old.name, code)
	}
	// The old process is gone, and with it the keep-alive connections it answered on.
	if st := c.status(t); st.Process != nil && st.Process.Handover != nil {
		h := st.Process.Handover
		to = h.ConnectionsTo
		t.Logf("%s: new process up and serving in %v, then %s connections moved in %v", c.sc.name,
			h.ConnectionsFrom.Sub(from).Round(time.Millisecond), m[1], h.ConnectionsTo.Sub(h.ConnectionsFrom).Round(time.Microsecond))
	} else {
		t.Fatalf("%s: status %+v has no handover", c.sc.name, st.Process)
	}
	moved, _ = strconv.Atoi(m[1])
	if closed := m[3]; closed != "0" {
		t.Errorf("%s: %s connections closed by the predecessor; want 0", c.sc.name, closed)
	}
	return moved, from, to
}

// status returns the sidecar's /tracecar/status.
func (c *cluster) status(t *testing.T) admin.Status {
	t.Helper()
	var st admin.Status
	if err := json.Unmarshal(c.get(t, "/tracecar/status"), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func (c *cluster) get(t *testing.T, path string) []byte {
	t.Helper()
	return httpDo(t, http.MethodGet, c.api+path)
}

func (c *cluster) post(t *testing.T, path string) {
	t.Helper()
	httpDo(t, http.MethodPost, c.api+path)
}

func httpDo(t *testing.T, method, u string) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s %s", method, u, resp.Status, b)
	}
	return b
}

// readinessDials counts the scrapes of a sidecar's /metrics: each runs the readiness
// check behind tracecar_node_up, which opens a connection to the node, so that the node's
// count of accepted connections is read net of them (nodeAccepted).
var readinessDials atomic.Int64

// metric returns the value of the series (name and labels, as /metrics writes it) at api.
func metric(t *testing.T, api, series string) float64 {
	t.Helper()
	if series != nodeAcceptedSeries {
		readinessDials.Add(1)
	}
	for _, l := range strings.Split(string(httpDo(t, http.MethodGet, api+"/metrics")), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatalf("%s/metrics has no %s", api, series)
	return 0
}

// nodeAcceptedSeries is the node's count of the connections it accepted.
const nodeAcceptedSeries = "tracecar_node_connections_accepted_total"

// nodeAccepted is the connections the node has accepted, less the readiness checks that
// this test's scrapes of the sidecars' /metrics ran (readinessDials): the connections that
// clients, through the sidecars, made.
func (c *cluster) nodeAccepted(t *testing.T) float64 {
	return metric(t, c.nodeAPI, nodeAcceptedSeries) - float64(readinessDials.Load())
}

// runtimeSettings changes every runtime setting the handover carries away from its
// default, and returns how the admin API reads them.
func (c *cluster) runtimeSettings(t *testing.T, change bool) string {
	t.Helper()
	if change {
		for _, p := range []string{
			"/storage_service/slow_query?enable=true&fast=true&threshold=250000&ttl=3600",
			"/storage_service/trace_probability?probability=0.0005",
			"/system/logger/admin?level=debug",
			"/tracecar/trace_filter?keyspace=audit", // no request of the load: none is traced, so no new process fetches node events over connections of its own
			"/tracecar/guardrail?cpu=90&window=30s",
			"/tracecar/statement_stats?enable=true",
		} {
			c.post(t, p)
		}
	}
	var b strings.Builder
	for _, p := range []string{"/storage_service/slow_query", "/storage_service/trace_probability", "/storage_service/logging_level",
		"/tracecar/trace_filter", "/tracecar/guardrail", "/tracecar/statement_stats"} {
		body := string(c.get(t, p))
		var m map[string]any
		json.Unmarshal([]byte(body), &m)
		switch p {
		case "/tracecar/guardrail":
			body = fmt.Sprint(m["budget"], m["state"]) // not its windows and figures, which move on
		case "/tracecar/statement_stats":
			body = fmt.Sprint(m["enabled"], m["max"]) // not the entries, which the load makes
		}
		fmt.Fprintf(&b, "%s %s\n", p, strings.TrimSpace(body))
	}
	return b.String()
}

// rateLoad runs requests at a fixed rate, open loop: each has a scheduled start, and its
// latency runs from that start (so that a stall counts for every request it delays).
type rateLoad struct {
	start   time.Time
	mu      sync.Mutex
	samples []sample
	failed  atomic.Int64
	lastErr atomic.Value
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

type sample struct {
	at  time.Duration // scheduled start, since the load began
	lat time.Duration
}

// startRateLoad runs op at rate per second on workers goroutines until end.
func startRateLoad(rate, workers int, op func(i int) error) *rateLoad {
	l := &rateLoad{start: time.Now(), stop: make(chan struct{})}
	next := make(chan int, workers)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(next)
		for i := 0; ; i++ {
			at := l.start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-l.stop:
					return
				}
			}
			select {
			case next <- i:
			case <-l.stop:
				return
			}
		}
	}()
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := range next {
				at := time.Duration(i) * time.Second / time.Duration(rate)
				err := op(i)
				lat := time.Since(l.start) - at
				if err != nil {
					l.failed.Add(1)
					l.lastErr.Store(err.Error())
					continue
				}
				l.mu.Lock()
				l.samples = append(l.samples, sample{at, lat})
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *rateLoad) end() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// window is a span of a load, since its start.
type window struct{ from, to time.Duration }

// p99s returns the p99 latency of the requests scheduled inside the windows, and of the
// others, with their counts, and the largest latency inside.
func p99s(samples []sample, windows []window) (in, out time.Duration, nIn, nOut int, maxIn time.Duration) {
	var a, b []time.Duration
	for _, s := range samples {
		if slices.ContainsFunc(windows, func(w window) bool { return s.at >= w.from && s.at <= w.to }) {
			a = append(a, s.lat)
			maxIn = max(maxIn, s.lat)
		} else {
			b = append(b, s.lat)
		}
	}
	return p99(a), p99(b), len(a), len(b), maxIn
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)*99+99)/100-1]
}

// handoverWindow is the span of a handover in a load (see cluster.takeover), plus a margin
// for the requests that queued behind the move.
func handoverWindow(l time.Time, from, to time.Time) window {
	return window{from.Sub(l), to.Sub(l) + 50*time.Millisecond}
}

// seconds returns the whole seconds of a load (since its start) that w overlaps, as
// windows: loadcheck's and cassandra-stress's interval lines give a p99 per second.
func (w window) seconds() []window {
	var ws []window
	for s := w.from.Truncate(time.Second); s <= w.to; s += time.Second {
		ws = append(ws, window{s, s + time.Second - 1})
	}
	return ws
}

// handoverFigures logs the p99 in the seconds with a handover and in the other whole
// seconds (the first excepted: the driver warms up), with the p99 and the slowest request
// in the handovers' own spans. It is a figure for the note, never an assertion: timings on
// a shared 2-core machine are noise, and the tests assert what cannot be noise (no request
// failed, no connection reopened, the settings carried over).
func handoverFigures(t *testing.T, what string, samples []sample, windows []window) {
	t.Helper()
	var secs []window
	for _, w := range windows {
		secs = append(secs, w.seconds()...)
	}
	warm := slices.DeleteFunc(slices.Clone(samples), func(s sample) bool { return s.at < time.Second })
	in, out, nIn, nOut, _ := p99s(warm, secs)
	spanP99, _, nSpan, _, slowest := p99s(samples, windows)
	t.Logf("FIGURE %s, 3 takeovers: p99 %v in the seconds with a handover (%d requests), %v in the other seconds (%d requests); in the handovers' own spans (new process start to last connection moved, +50 ms) p99 %v of %d requests, the slowest %v",
		what, in, nIn, out, nOut, spanP99, nSpan, slowest)
}

func gocqlSession(t *testing.T, addr string, edit func(*gocql.ClusterConfig)) *gocql.Session {
	t.Helper()
	return sessionWith(t, addr, edit)
}

// TestHandoverGocqlLoad replaces the sidecar three times by a new process while gocql
// sends 3,000 requests a second through it: no request fails, neither the node nor any new
// sidecar accepts a connection (every one is moved), the runtime settings are the same
// after as before, and each old process exits 0.
func TestHandoverGocqlLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	c := startCluster(t, nil, nil)
	before := c.runtimeSettings(t, true)
	s := gocqlSession(t, c.addr, nil)
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS ho WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS ho.kv (k int PRIMARY KEY, v text)")
	l := startRateLoad(3000, 64, func(i int) error {
		if i%2 == 0 {
			return s.Query("INSERT INTO ho.kv (k, v) VALUES (?, ?)", i%100000, "v").Exec()
		}
		var v string
		err := s.Query("SELECT v FROM ho.kv WHERE k = ?", (i-1)%100000).Scan(&v)
		if errors.Is(err, gocql.ErrNotFound) {
			err = nil
		}
		return err
	})
	defer l.end()
	time.Sleep(3 * time.Second)
	nodeBefore := c.nodeAccepted(t)
	var windows []window
	for i := range 3 {
		moved, from, to := c.takeover(t)
		windows = append(windows, handoverWindow(l.start, from, to))
		if moved == 0 {
			t.Errorf("takeover %d moved no connection", i+1)
		}
		if got := metric(t, c.api, "tracecar_client_connections_accepted_total"); got != 0 {
			t.Errorf("takeover %d: the new sidecar accepted %v connections; want 0 (every one moved)", i+1, got)
		}
		if got := metric(t, c.api, `tracecar_handover_connections_total{outcome="moved"}`); int(got) != moved {
			t.Errorf("takeover %d: tracecar_handover_connections_total{outcome=\"moved\"} %v; want %d", i+1, got, moved)
		}
		st := c.status(t)
		if p := st.Process; p == nil || p.Predecessor == nil || p.Handover == nil || !p.Handover.Done || p.Handover.Received != moved {
			t.Errorf("takeover %d: status process %+v; want a predecessor and a done handover of %d connections", i+1, p, moved)
		}
		time.Sleep(2 * time.Second)
	}
	l.end()
	if f := l.failed.Load(); f != 0 {
		t.Errorf("%d requests failed (last: %v); want 0", f, l.lastErr.Load())
	}
	if got := c.nodeAccepted(t); got > nodeBefore {
		t.Errorf("the node accepted %v connections during the takeovers; want 0", got-nodeBefore)
	}
	if after := c.runtimeSettings(t, false); after != before {
		t.Errorf("runtime settings after 3 takeovers:\n%s\nwant as before:\n%s", after, before)
	}
	// Statement statistics moved with the processes: the last one counts every request.
	var stmts []struct {
		Statement string `json:"statement"`
		Calls     int    `json:"calls"`
	}
	json.Unmarshal(c.get(t, "/tracecar/statements?limit=100"), &stmts)
	calls := 0
	for _, st := range stmts {
		if strings.Contains(st.Statement, "ho.kv") && !strings.HasPrefix(st.Statement, "CREATE") {
			calls += st.Calls
		}
	}
	if calls < len(l.samples) {
		t.Errorf("statement statistics of the last process count %d requests on ho.kv; want the %d of the whole load (carried over)", calls, len(l.samples))
	}
	handoverFigures(t, "gocql at 3000/s", l.samples, windows)
}

// driverReport is what testdata/handover_load.{py,js} print at the end.
type driverReport struct {
	OK     int      `json:"ok"`
	Failed int      `json:"failed"`
	Errors []string `json:"errors"`
	// Protocol is the version the driver reached, when it says (the Python driver).
	Protocol int          `json:"protocol_version"`
	Samples  [][2]float64 `json:"samples"`
}

// runDriverLoad runs a driver's load script (name, args) against the sidecar at rate while
// the sidecar is replaced three times, and checks what TestHandoverGocqlLoad checks. env
// is added to the script's environment; protocol, when not 0, is the protocol version the
// script must report.
func runDriverLoad(t *testing.T, rate int, env []string, protocol int, name string, args ...string) {
	c := startCluster(t, nil, nil)
	before := c.runtimeSettings(t, true)
	host, port, _ := strings.Cut(c.addr, ":")
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port, "RATE="+strconv.Itoa(rate))
	cmd.Env = append(cmd.Env, env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 64<<20)
	if !lines.Scan() || lines.Text() != "ready" {
		cmd.Wait()
		t.Fatalf("%s did not start its load: %q\n%s", name, lines.Text(), stderr.String())
	}
	start := time.Now()
	time.Sleep(3 * time.Second)
	nodeBefore := c.nodeAccepted(t)
	var windows []window
	for i := range 3 {
		moved, from, to := c.takeover(t)
		windows = append(windows, handoverWindow(start, from, to))
		if moved == 0 {
			t.Errorf("takeover %d moved no connection", i+1)
		}
		if got := metric(t, c.api, "tracecar_client_connections_accepted_total"); got != 0 {
			t.Errorf("takeover %d: the new sidecar accepted %v connections; want 0 (every one moved)", i+1, got)
		}
		time.Sleep(2 * time.Second)
	}
	fmt.Fprintln(stdin, "stop")
	stdin.Close()
	var report []byte
	for lines.Scan() {
		if b := lines.Bytes(); len(b) > 0 && b[0] == '{' {
			report = b
			break
		}
		t.Logf("%s: %s", name, lines.Text())
	}
	if report == nil {
		t.Fatalf("%s printed no report: %v\n%s", name, lines.Err(), stderr.String())
	}
	var r driverReport
	if err := json.Unmarshal(report, &r); err != nil {
		t.Fatalf("%s report: %v", name, err)
	}
	cmd.Wait()
	if protocol != 0 && r.Protocol != protocol {
		t.Errorf("%s reached protocol v%d through the sidecar; want v%d", name, r.Protocol, protocol)
	}
	if r.Failed != 0 || r.OK == 0 {
		t.Errorf("%s: %d requests failed, %d succeeded (errors: %q); want none failed", name, r.Failed, r.OK, r.Errors)
	}
	if got := c.nodeAccepted(t); got > nodeBefore {
		t.Errorf("the node accepted %v connections during the takeovers; want 0", got-nodeBefore)
	}
	if after := c.runtimeSettings(t, false); after != before {
		t.Errorf("runtime settings after 3 takeovers:\n%s\nwant as before:\n%s", after, before)
	}
	samples := make([]sample, len(r.Samples))
	for i, s := range r.Samples {
		samples[i] = sample{time.Duration(s[0] * float64(time.Millisecond)), time.Duration(s[1] * float64(time.Millisecond))}
	}
	handoverFigures(t, fmt.Sprintf("%s at %d/s", filepath.Base(name), rate), samples, windows)
}

func TestHandoverPythonLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	drivertest.RequirePython(t)
	runDriverLoad(t, 1000, nil, 5, drivertest.Python, filepath.Join("testdata", "handover_load.py"))
}

// TestHandoverPythonV5LZ4 is TestHandoverPythonLoad with lz4: protocol v5's compressed
// segments move with their connections (the successor reads them in the lz4 form).
func TestHandoverPythonV5LZ4(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	drivertest.RequirePython(t)
	runDriverLoad(t, 1000, []string{"COMPRESSION=lz4"}, 5, drivertest.Python, filepath.Join("testdata", "handover_load.py"))
}

func TestHandoverNodeJSLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	drivertest.RequireNodeJS(t)
	runDriverLoad(t, 1000, nil, 0, "node", filepath.Join("testdata", "handover_load.js"))
}

// rawConn is a CQL connection the test speaks frames on itself.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) send(stream int16, m cql.Message) {
	rc.t.Helper()
	if _, err := rc.c.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: stream}, m)); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// recv reads the next frame, within testTimeout.
func (rc *rawConn) recv() (cql.Header, []byte) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(testTimeout))
	h, body, _, err := cql.ReadFrame(rc.r, nil)
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return h, body
}

// expect reads the next frame and fails unless it has opcode op on stream.
func (rc *rawConn) expect(stream int16, op cql.Opcode) []byte {
	rc.t.Helper()
	h, body := rc.recv()
	if h.Stream != stream || h.Opcode != op {
		rc.t.Fatalf("got %v on stream %d (%q); want %v on stream %d", h.Opcode, h.Stream, body, op, stream)
	}
	return body
}

func plainToken(user, pass string) []byte { return []byte("\x00" + user + "\x00" + pass) }

// TestHandoverConnectionState moves connections in every state a CQL connection has
// between two frames, through a takeover by a new process, against a node with
// authentication: a gocql session with lz4 whose connections ran USE (its queries name no
// keyspace), a raw connection in the middle of its authentication (AUTHENTICATE received,
// AUTH_RESPONSE not sent), and a raw one registered for schema events. Each keeps working
// after the takeover, and an event fired afterwards reaches the registered one.
func TestHandoverConnectionState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	c := startCluster(t, []string{"--auth", "cassandra:cassandra"}, nil)
	admin := sessionWith(t, c.addr, func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: "cassandra", Password: "cassandra"}
	})
	mustExec(t, admin, "CREATE KEYSPACE IF NOT EXISTS st WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, admin, "CREATE TABLE IF NOT EXISTS st.kv (k int PRIMARY KEY, v text)")
	used := sessionWith(t, c.addr, func(cc *gocql.ClusterConfig) {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: "cassandra", Password: "cassandra"}
		cc.Compressor = drivertest.Compressor("lz4")
		cc.Keyspace = "st" // USE st on every connection
	})
	mustExec(t, used, "INSERT INTO kv (k, v) VALUES (1, 'before')")

	midAuth := dialRaw(t, c.addr)
	midAuth.send(0, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	midAuth.expect(0, cql.OpAuthenticate)

	events := dialRaw(t, c.addr)
	events.send(0, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	events.expect(0, cql.OpAuthenticate)
	events.send(1, cql.AuthResponse{Token: plainToken("cassandra", "cassandra")})
	events.expect(1, cql.OpAuthSuccess)
	events.send(2, cql.Register{Events: []string{cql.EventSchemaChange}})
	events.expect(2, cql.OpReady)

	nodeBefore := c.nodeAccepted(t)
	for i := range 2 {
		moved, _, _ := c.takeover(t)
		if want := int(c.status(t).Process.Handover.Received); moved != want || moved < 2+2*3 {
			t.Errorf("takeover %d moved %d connections (status %d); want every one: 2 raw and 3 per session at least", i+1, moved, want)
		}
	}
	if got := metric(t, c.api, "tracecar_client_connections_accepted_total"); got != 0 {
		t.Errorf("the new sidecar accepted %v connections; want 0", got)
	}
	if got := c.nodeAccepted(t); got > nodeBefore {
		t.Errorf("the node accepted %v connections during the takeovers; want 0", got-nodeBefore)
	}

	// The session with lz4, after USE: its queries name no keyspace. Its handshake is done,
	// so a frame over the 64 KiB allowed before it passes (200 KiB of random text, which
	// lz4 cannot shrink below 64 KiB).
	mustExec(t, used, "INSERT INTO kv (k, v) VALUES (2, 'after')")
	big := make([]byte, 150<<10)
	rand.Read(big)
	mustExec(t, used, "INSERT INTO kv (k, v) VALUES (3, ?)", base64.StdEncoding.EncodeToString(big))
	var v string
	if err := used.Query("SELECT v FROM kv WHERE k = 1").Scan(&v); err != nil || v != "before" {
		t.Errorf("after the takeovers, SELECT with the keyspace of USE: %q, %v; want %q", v, err, "before")
	}
	// Authentication finishes with the new process.
	midAuth.send(1, cql.AuthResponse{Token: plainToken("cassandra", "cassandra")})
	midAuth.expect(1, cql.OpAuthSuccess)
	midAuth.send(2, cql.Query{Query: "SELECT v FROM st.kv WHERE k = 2", Params: cql.QueryParams{Consistency: cql.One}})
	midAuth.expect(2, cql.OpResult)
	// An event fired now reaches the registered connection.
	mustExec(t, admin, "CREATE TABLE st.fired_after (k int PRIMARY KEY)")
	body := events.expect(-1, cql.OpEvent)
	if !strings.Contains(string(body), "fired_after") {
		t.Errorf("event %q; want the SCHEMA_CHANGE of st.fired_after", body)
	}
	events.send(3, cql.Options{})
	events.expect(3, cql.OpSupported)
}

// relay is a TCP relay between the sidecar and the node, in the test process, that can hold
// back what the node sends on one of its connections: a request on it then stays in flight
// for as long as the test wants, and a handover waits for it.
type relay struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	tagNext bool
	tagged  chan *relayConn
}

type relayConn struct {
	hold    atomic.Bool
	release chan struct{}
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target, tagged: make(chan *relayConn, 1)}
	var wg sync.WaitGroup
	var conns []net.Conn
	var connsMu sync.Mutex
	var released []*relayConn
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		for _, rc := range released {
			rc.free()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			rc := &relayConn{release: make(chan struct{})}
			r.mu.Lock()
			if r.tagNext {
				r.tagNext = false
				r.tagged <- rc
			}
			r.mu.Unlock()
			connsMu.Lock()
			conns = append(conns, a, b)
			released = append(released, rc)
			connsMu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(b, a)
				b.Close()
			}()
			go func() {
				defer wg.Done()
				defer a.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := b.Read(buf)
					if n > 0 && rc.hold.Load() {
						<-rc.release
					}
					if n > 0 {
						if _, werr := a.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return r
}

func (rc *relayConn) free() {
	select {
	case <-rc.release:
	default:
		close(rc.release)
	}
}

// stuckConn opens a raw connection through the sidecar whose request the relay holds back:
// it is never quiet, so a handover waits for it until its drain timeout.
func (c *cluster) stuckConn(t *testing.T, r *relay) (*rawConn, *relayConn) {
	t.Helper()
	r.mu.Lock()
	r.tagNext = true
	r.mu.Unlock()
	rc := dialRaw(t, c.addr)
	rc.send(0, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	rc.expect(0, cql.OpReady)
	var held *relayConn
	select {
	case held = <-r.tagged:
	case <-time.After(testTimeout):
		t.Fatal("the relay saw no connection for the stuck client")
	}
	held.hold.Store(true)
	rc.send(1, cql.Query{Query: "SELECT release_version FROM system.local", Params: cql.QueryParams{Consistency: cql.One}})
	return rc, held
}

// ackLoad writes unique keys through s at rate, and keeps those acknowledged.
type ackLoad struct {
	*rateLoad
	mu    sync.Mutex
	acked []int
}

func startAckLoad(s *gocql.Session, rate int) *ackLoad {
	a := &ackLoad{}
	a.rateLoad = startRateLoad(rate, 32, func(i int) error {
		err := s.Query("INSERT INTO ho.ack (k) VALUES (?)", i).Exec()
		if err == nil {
			a.mu.Lock()
			a.acked = append(a.acked, i)
			a.mu.Unlock()
		}
		return err
	})
	return a
}

// checkAcked fails unless every acknowledged write can be read back through s.
func (a *ackLoad) checkAcked(t *testing.T, s *gocql.Session) {
	t.Helper()
	a.mu.Lock()
	acked := slices.Clone(a.acked)
	a.mu.Unlock()
	lost := 0
	for _, k := range acked {
		var got int
		if err := s.Query("SELECT k FROM ho.ack WHERE k = ?", k).Scan(&got); err != nil {
			lost++
		}
	}
	if lost > 0 || len(acked) == 0 {
		t.Errorf("%d of %d acknowledged writes cannot be read back; want every one", lost, len(acked))
	}
}

// recovery returns how long after at the first request scheduled after it completed.
func (l *rateLoad) recovery(at time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	best := time.Duration(-1)
	for _, s := range l.samples {
		if s.at >= at && (best < 0 || s.at+s.lat < best) {
			best = s.at + s.lat
		}
	}
	if best < 0 {
		return -1
	}
	return best - at
}

// waitStatus polls the sidecar's status until cond holds.
func (c *cluster) waitStatus(t *testing.T, what string, cond func(admin.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		if cond(c.status(t)) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("the sidecar's status never showed %s", what)
}

func startKillCluster(t *testing.T) (*cluster, *relay, *gocql.Session) {
	t.Helper()
	bin := buildTracecar(t)
	node := startProc(t, "node", bin, "node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0")
	nodeAddr := node.await(t, nodeCQLRe)[1]
	nodeAPI := node.await(t, nodeAPIRe)[1]
	r := startRelay(t, nodeAddr)
	c := &cluster{bin: bin, node: node, nodeAddr: nodeAddr, nodeAPI: nodeAPI, ctl: filepath.Join(t.TempDir(), "ctl.sock")}
	c.args = []string{"sidecar", "--listen", "127.0.0.1:0", "--node", r.ln.Addr().String(), "--admin", "127.0.0.1:0",
		"--control-socket", c.ctl, "--drain-timeout", "20s"}
	c.sc = c.startSidecar(t, false)
	s := sessionWith(t, c.addr, nil)
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS ho WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS ho.ack (k int PRIMARY KEY)")
	return c, r, s
}

// TestHandoverKillOldMidway kills the old process (SIGKILL) in the middle of a handover,
// while it waits for a connection with a request in flight: the new process keeps the
// listeners and every connection it took over (the gocql load does not see it), the one
// the old process still held closes, and a later takeover works.
func TestHandoverKillOldMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	c, r, s := startKillCluster(t)
	l := startAckLoad(s, 1000)
	defer l.end()
	time.Sleep(time.Second)
	stuck, _ := c.stuckConn(t, r)
	conns := int(metric(t, c.api, "tracecar_client_connections"))
	old := c.sc
	c.sc = c.startSidecar(t, true)
	c.waitStatus(t, "every connection but the stuck one moved", func(st admin.Status) bool {
		return st.Process != nil && st.Process.Handover != nil && st.Process.Handover.Received == conns-1
	})
	old.kill(t)
	m := c.sc.await(t, tookOverRe)
	if m[1] != strconv.Itoa(conns-1) {
		t.Errorf("the new process took over %s connections; want %d (all but the stuck one)", m[1], conns-1)
	}
	// The stuck connection was the old process's only: it closed with it.
	stuck.c.SetReadDeadline(time.Now().Add(testTimeout))
	if _, _, _, err := cql.ReadFrame(stuck.r, nil); err == nil {
		t.Error("the stuck connection got a frame; want it closed with the process that held it")
	}
	time.Sleep(time.Second)
	// The listeners and the control socket live on: a new connection and a new takeover.
	sessionWith(t, c.addr, nil)
	if moved, _, _ := c.takeover(t); moved < conns-1 {
		t.Errorf("a later takeover moved %d connections; want at least %d", moved, conns-1)
	}
	time.Sleep(500 * time.Millisecond)
	l.end()
	if f := l.failed.Load(); f != 0 {
		t.Errorf("%d requests failed (last: %v); want 0: every driver connection had moved", f, l.lastErr.Load())
	}
	l.checkAcked(t, sessionWith(t, c.addr, nil))
	if st := c.status(t); st.Process.Predecessor == nil {
		t.Errorf("status %+v; want a predecessor", st.Process)
	}
}

// TestHandoverKillNewMidway kills the new process (SIGKILL) in the middle of a handover: the
// old one keeps its listeners and the connection it had not moved (whose request is then
// answered by it), the driver reconnects to it on its own, and every acknowledged write is
// there; a later takeover works.
func TestHandoverKillNewMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	c, r, s := startKillCluster(t)
	l := startAckLoad(s, 1000)
	defer l.end()
	time.Sleep(time.Second)
	stuck, held := c.stuckConn(t, r)
	conns := int(metric(t, c.api, "tracecar_client_connections"))
	old, oldAddr, oldAPI := c.sc, c.addr, c.api
	nw := c.startSidecar(t, true)
	c.waitStatus(t, "every connection but the stuck one moved", func(st admin.Status) bool {
		return st.Process != nil && st.Process.Handover != nil && st.Process.Handover.Received == conns-1
	})
	killedAt := time.Since(l.start)
	nw.kill(t)
	c.sc, c.addr, c.api = old, oldAddr, oldAPI
	// The old process serves on: the stuck connection's request is answered by it.
	held.free()
	stuck.expect(1, cql.OpResult)
	waitFor(t, "the old process to log the failed handover", func() bool { return old.logged("handover failed: this process serves on") })
	time.Sleep(3 * time.Second)
	if st := c.status(t); st.Process == nil || st.Process.PID != old.cmd.Process.Pid {
		t.Errorf("status %+v; want the old process %d", st.Process, old.cmd.Process.Pid)
	}
	rec := l.recovery(killedAt)
	t.Logf("FIGURE new process killed mid-handover: gocql (ReconnectInterval 200ms) back after %v; %d requests failed meanwhile", rec, l.failed.Load())
	if rec < 0 {
		t.Error("no request succeeded after the new process was killed")
	}
	if moved, _, _ := c.takeover(t); moved == 0 {
		t.Error("a later takeover moved no connection")
	}
	time.Sleep(500 * time.Millisecond)
	l.end()
	l.checkAcked(t, sessionWith(t, c.addr, nil))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// driverProc is a driver's load script running against the sidecar.
type driverProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
	errs  *strings.Builder
	start time.Time
}

func startDriverLoad(t *testing.T, addr string, rate int, name string, args ...string) *driverProc {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	d := &driverProc{name: filepath.Base(name), cmd: exec.Command(name, args...), errs: &strings.Builder{}}
	d.cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port, "RATE="+strconv.Itoa(rate))
	d.stdin, _ = d.cmd.StdinPipe()
	stdout, _ := d.cmd.StdoutPipe()
	d.cmd.Stderr = d.errs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cmd.Process.Kill(); d.cmd.Wait() })
	d.lines = bufio.NewScanner(stdout)
	d.lines.Buffer(nil, 64<<20)
	if !d.lines.Scan() || d.lines.Text() != "ready" {
		t.Fatalf("%s did not start its load: %q\n%s", name, d.lines.Text(), d.errs)
	}
	d.start = time.Now()
	return d
}

// report stops the load and returns what it measured.
func (d *driverProc) report(t *testing.T) driverReport {
	t.Helper()
	fmt.Fprintln(d.stdin, "stop")
	d.stdin.Close()
	var r driverReport
	for d.lines.Scan() {
		if b := d.lines.Bytes(); len(b) > 0 && b[0] == '{' {
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s report: %v", d.name, err)
			}
			return r
		}
	}
	t.Fatalf("%s printed no report: %v\n%s", d.name, d.lines.Err(), d.errs)
	return r
}

func (r driverReport) load(start time.Time) *rateLoad {
	l := &rateLoad{start: start}
	for _, s := range r.Samples {
		l.samples = append(l.samples, sample{time.Duration(s[0] * float64(time.Millisecond)), time.Duration(s[1] * float64(time.Millisecond))})
	}
	return l
}

// TestSidecarCrashRecovery kills the sidecar (SIGKILL) under load from gocql, the Python
// driver and the Node.js driver, each with its default reconnection settings, and starts it
// again at once, as a supervisor does (systemd's Restart=always): each driver gets its
// requests through again on its own, and the test reports how long each took.
func TestSidecarCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	drivertest.RequirePython(t)
	drivertest.RequireNodeJS(t)
	c := startCluster(t, nil, nil)
	host, port, _ := strings.Cut(c.addr, ":")
	p, _ := strconv.Atoi(port)
	cc := drivertest.Cluster(drivertest.Options{Host: host, Port: p}) // gocql's defaults for reconnection
	s, err := cc.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS ho WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS ho.kv (k int PRIMARY KEY, v text)")
	gl := startRateLoad(200, 16, func(i int) error {
		return s.Query("INSERT INTO ho.kv (k, v) VALUES (?, ?)", i%100000, "v").Exec()
	})
	defer gl.end()
	py := startDriverLoad(t, c.addr, 200, drivertest.Python, filepath.Join("testdata", "handover_load.py"))
	js := startDriverLoad(t, c.addr, 200, "node", filepath.Join("testdata", "handover_load.js"))
	time.Sleep(2 * time.Second)
	killed := time.Now()
	c.sc.kill(t)
	// The supervisor starts it again at once, on the same address.
	args := slices.Clone(c.args)
	args[slices.Index(args, "--listen")+1] = c.addr
	c.args = args
	c.sc = c.startSidecar(t, false)
	restarted := time.Since(killed)
	// gocql's default takes seconds: wait for it, boundedly.
	for time.Since(killed) < 90*time.Second && gl.recovery(killed.Sub(gl.start)) < 0 {
		time.Sleep(100 * time.Millisecond)
	}
	gl.end()
	time.Sleep(3 * time.Second) // the other drivers reconnect within seconds by default
	type result struct {
		name string
		l    *rateLoad
		fail int64
	}
	results := []result{{"gocql", gl, gl.failed.Load()}}
	for _, d := range []*driverProc{py, js} {
		r := d.report(t)
		results = append(results, result{d.name, r.load(d.start), int64(r.Failed)})
	}
	for _, r := range results {
		rec := r.l.recovery(killed.Sub(r.l.start))
		t.Logf("FIGURE crash and restart (sidecar back %v after the kill): %s got a request through %v after the kill, with its default settings; %d requests failed",
			restarted.Round(time.Millisecond), r.name, rec.Round(time.Millisecond), r.fail)
		if rec < 0 {
			t.Errorf("%s got no request through after the restart", r.name)
		}
	}
}

// TestHandoverTLSDrains takes over a sidecar whose clients speak TLS: TLS connections
// cannot move, so the old process drains and closes each, with a log line, counts them as
// closed, and the driver reconnects to the new process on its own.
func TestHandoverTLSDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	pki := tlstest.New(t)
	c := startCluster(t, nil, []string{"--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey})
	s := sessionWith(t, c.addr, func(cc *gocql.ClusterConfig) {
		cc.SslOpts = &gocql.SslOptions{CaPath: pki.CA, EnableHostVerification: false}
	})
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS ho WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS ho.kv (k int PRIMARY KEY, v text)")
	l := startRateLoad(200, 8, func(i int) error {
		return s.Query("INSERT INTO ho.kv (k, v) VALUES (?, ?)", i%1000, "v").Exec()
	})
	defer l.end()
	time.Sleep(time.Second)
	conns := int(metric(t, c.api, "tracecar_client_connections"))
	old := c.sc
	c.sc = c.startSidecar(t, true)
	m := c.sc.await(t, tookOverRe)
	if m[1] != "0" || m[3] != strconv.Itoa(conns) {
		t.Errorf("took over %s connections, %s closed by the predecessor; want 0 moved and all %d closed (TLS)", m[1], m[3], conns)
	}
	if code := old.exitCode(t); code != 0 {
		t.Errorf("the old process exited %d; want 0", code)
	}
	if !old.logged("a TLS connection cannot move") {
		t.Error("the old process logged no line for the TLS connections it closed")
	}
	if got := metric(t, c.api, `tracecar_handover_connections_total{outcome="closed"}`); int(got) != conns {
		t.Errorf(`tracecar_handover_connections_total{outcome="closed"} %v; want %d`, got, conns)
	}
	drainedAt := time.Since(l.start)
	time.Sleep(3 * time.Second)
	rec := l.recovery(drainedAt)
	l.end()
	t.Logf("FIGURE TLS takeover: %d connections drained and closed; gocql (ReconnectInterval 200ms) through again %v after; %d requests failed (sent as their connection closed)",
		conns, rec, l.failed.Load())
	if rec < 0 {
		t.Error("gocql got no request through after the takeover")
	}
	if got := metric(t, c.api, "tracecar_client_connections_accepted_total"); got < float64(conns) {
		t.Errorf("the new process accepted %v connections; want the driver's %d again", got, conns)
	}
}

// TestSidecarSIGHUP: SIGHUP reopens --log-file (after logrotate moved it) and re-reads the
// TLS certificate for the connections accepted after it.
func TestSidecarSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	pki := tlstest.New(t)
	logFile := filepath.Join(t.TempDir(), "sidecar.log")
	c := startCluster(t, nil, []string{"--tls-cert", pki.ServerCert, "--tls-key", pki.ServerKey, "--log-file", logFile})
	leaf := func() []byte {
		conn, err := tls.Dial("tcp", c.addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	first := leaf()
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	renewed := tlstest.New(t)
	for _, f := range [][2]string{{renewed.ServerCert, pki.ServerCert}, {renewed.ServerKey, pki.ServerKey}} {
		b, _ := os.ReadFile(f[0])
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.sc.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "a new log file with the SIGHUP line", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "SIGHUP: TLS certificate re-read")
	})
	if got := leaf(); string(got) == string(first) {
		t.Error("a connection after SIGHUP got the old certificate; want the renewed one")
	}
	select {
	case <-c.sc.exited:
		t.Fatal("the sidecar exited on SIGHUP")
	default:
	}
}

// TestSupervisorNotify: under systemd (Type=notify, NotifyAccess=all; NOTIFY_SOCKET set), a
// sidecar says READY=1 once it serves, and a takeover says MAINPID= with its own pid, so
// that systemd follows the new process (docs/deploy.md: the systemd unit).
func TestSupervisorNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	path := filepath.Join(t.TempDir(), "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 8)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ln.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	next := func() string {
		select {
		case m := <-got:
			return m
		case <-time.After(testTimeout):
			t.Fatal("no notification")
			return ""
		}
	}
	bin := buildTracecar(t)
	node := startProc(t, "node", bin, "node", "--listen", "127.0.0.1:0")
	c := &cluster{bin: bin, node: node, nodeAddr: node.await(t, nodeCQLRe)[1], env: []string{"NOTIFY_SOCKET=" + path},
		ctl: filepath.Join(t.TempDir(), "ctl.sock")}
	c.args = []string{"sidecar", "--listen", "127.0.0.1:0", "--node", c.nodeAddr, "--admin", "127.0.0.1:0", "--control-socket", c.ctl}
	c.sc = c.startSidecar(t, false)
	if m := next(); m != "READY=1" {
		t.Errorf("first process: %q; want READY=1", m)
	}
	c.takeover(t)
	if m, want := next(), fmt.Sprintf("MAINPID=%d\nREADY=1", c.sc.cmd.Process.Pid); m != want {
		t.Errorf("after the takeover: %q; want %q", m, want)
	}
}

// TestSidecarSIGHUPConfig: with --config, SIGHUP re-reads the file: a new log format and
// file take effect at once, and a changed setting that needs a new process is logged so.
func TestSidecarSIGHUPConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	dir := t.TempDir()
	first, second, config := filepath.Join(dir, "first.log"), filepath.Join(dir, "second.log"), filepath.Join(dir, "sidecar.conf")
	write := func(lines ...string) {
		if err := os.WriteFile(config, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# the sidecar's logs", "log-format console", "--log-file="+first, "max-connections 100")
	c := startCluster(t, nil, []string{"--config", config})
	write("log-format json", "log-file "+second, "max-connections 7")
	c.sc.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "JSON lines in the new log file", func() bool {
		b, _ := os.ReadFile(second)
		return strings.Contains(string(b), `"message":"SIGHUP: log destination reopened"`)
	})
	b, _ := os.ReadFile(first)
	if !strings.Contains(string(b), "SIGHUP: --max-connections changed: it takes effect in a new process") {
		t.Errorf("the log has no line for the changed --max-connections:\n%s", b)
	}
	if strings.Contains(string(b), `"message"`) {
		t.Errorf("the first log file has JSON lines; want console lines only:\n%s", b)
	}
}
