// Package deploytest tests what deploy/ ships, the Prometheus rules and their unit tests,
// the Grafana dashboard, the container image and the examples, each against the real tool
// it is for (promtool, Prometheus, buildah, systemd-analyze). It has no code of its own.
package deploytest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// repo and deploy are the module's root and its deploy/ folder, from this package's.
const (
	repo   = "../../.."
	deploy = repo + "/deploy"
)

var (
	binOnce sync.Once
	binDir  string // removed by TestMain
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// mustBinary builds tracecar once for the package's tests: static, as the image holds
// it (deploy/build-image.sh builds it the same way).
func mustBinary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		var err error
		if binDir, err = os.MkdirTemp("", "tracecar-deploy-"); err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(binDir, "tracecar")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", binPath, "./cmd/tracecar")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binPath
}

// proc is a child process whose output lines the test can wait for.
type proc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced at each line
	done  chan struct{}
}

// startProc starts name with args until the test ends.
func startProc(tb testing.TB, name string, args ...string) *proc {
	tb.Helper()
	p := &proc{cmd: exec.Command(name, args...), more: make(chan struct{}), done: make(chan struct{})}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		pw.Close()
	}()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.more)
			p.more = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if tb.Failed() {
			tb.Logf("output of %s %s:\n%s", filepath.Base(name), strings.Join(args, " "), p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine returns the submatches of the first line that matches re, waiting up to a
// minute for it.
func (p *proc) waitLine(tb testing.TB, re *regexp.Regexp) []string {
	tb.Helper()
	deadline := time.After(time.Minute)
	for i := 0; ; {
		p.mu.Lock()
		for ; i < len(p.lines); i++ {
			if m := re.FindStringSubmatch(p.lines[i]); m != nil {
				p.mu.Unlock()
				return m
			}
		}
		more := p.more
		p.mu.Unlock()
		select {
		case <-more:
		case <-p.done:
			tb.Fatalf("%s ended without a line matching %s:\n%s", p.cmd.Path, re, p.output())
		case <-deadline:
			tb.Fatalf("no line matching %s from %s in a minute:\n%s", re, p.cmd.Path, p.output())
		}
	}
}

// TestPromtoolRules checks the rule files and runs their unit tests with promtool.
func TestPromtoolRules(t *testing.T) {
	promtool := drivertest.RequireTool(t, "promtool", "prometheus")
	rules, _ := filepath.Glob(deploy + "/prometheus/*.rules.yml")
	tests, _ := filepath.Glob(deploy + "/prometheus/tests/*.yml")
	if len(rules) != 2 || len(tests) != 2 {
		t.Fatalf("rules %v, tests %v; want the recording and alert rules and a test of each", rules, tests)
	}
	for _, args := range [][]string{append([]string{"check", "rules"}, rules...), append([]string{"test", "rules"}, tests...)} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// dashboard is the part of a Grafana dashboard this package checks.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos *struct {
			X, Y, W, H int
		} `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func mustDashboard(tb testing.TB) dashboard {
	tb.Helper()
	b, err := os.ReadFile(deploy + "/grafana/tracecar.json")
	if err != nil {
		tb.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		tb.Fatalf("deploy/grafana/tracecar.json: %v", err)
	}
	return d
}

// dashboardQueries returns every panel query, keyed by "panel title/refId", with the
// dashboard's variables replaced as Grafana does with "All" selected.
func dashboardQueries(d dashboard) map[string]string {
	r := strings.NewReplacer("$job", ".+", "$instance", ".+", "$__rate_interval", "1m", "$__interval", "15s")
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title+"/"+tg.RefID] = r.Replace(tg.Expr)
		}
	}
	return out
}

// TestDashboardShape checks what Grafana needs of the dashboard that no Prometheus can
// tell: ids, positions, a query in every target, the variables the queries use, and that
// every recording rule a query reads exists.
func TestDashboardShape(t *testing.T) {
	d := mustDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Error("the dashboard has no title or uid")
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	rules, err := os.ReadFile(deploy + "/prometheus/recording.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d missing or repeated", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q has no position", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: a target without expr or refId", p.Title)
			}
			for _, v := range regexp.MustCompile(`\$(\w+)`).FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[v[1]] && !strings.HasPrefix(v[1], "__") {
					t.Errorf("panel %q uses $%s, which the dashboard does not define", p.Title, v[1])
				}
			}
			for _, name := range regexp.MustCompile(`\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b`).FindAllString(tg.Expr, -1) {
				if !strings.Contains(string(rules), "record: "+name+"\n") {
					t.Errorf("panel %q reads %s, which no recording rule records", p.Title, name)
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("%d queries; want the dashboard's twenty-odd", queries)
	}
}

// promQuery runs an instant query against Prometheus at base and returns the values of its
// result (NaN ones dropped), and the labels of each.
func promQuery(base, q string) ([]float64, []map[string]string, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, nil, err
	}
	if r.Status != "success" {
		return nil, nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	var vals []float64
	var labels []map[string]string
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil || v != v {
			continue
		}
		vals = append(vals, v)
		labels = append(labels, s.Metric)
	}
	return vals, labels, nil
}

// freePort returns a TCP port free on every one of ips.
func freePort(tb testing.TB, ips ...string) int {
	tb.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{ln}
		ok := true
		for _, ip := range ips[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, l)
		}
		for _, l := range lns {
			l.Close()
		}
		if ok {
			return port
		}
	}
	tb.Fatal("no port free on every address")
	return 0
}

func post(tb testing.TB, u string) {
	tb.Helper()
	resp, err := http.Post(u, "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Fatalf("POST %s: %s %s", u, resp.Status, b)
	}
}

// TestPrometheusScrapesSidecars runs a real Prometheus with the rules of deploy/prometheus
// against three sidecars in front of a three-node embedded cluster under gocql load: every
// recording rule and every dashboard query returns data; then a node is stopped, and
// TracecarNodeUnreachable fires for its sidecar, and only its, once its `for:` has passed.
func TestPrometheusScrapesSidecars(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a Prometheus, a cluster and load")
	}
	prom := drivertest.RequireTool(t, "prometheus", "prometheus")
	bin := mustBinary(t)
	dir := t.TempDir()
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

	nodes := startProc(t, bin, "node", "--nodes", "3", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0",
		"--allow-node-control", "--log-level", "warn")
	nodeAddr := make([]string, 3)
	for i := range 3 {
		nodeAddr[i] = nodes.waitLine(t, regexp.MustCompile(fmt.Sprintf(`^tracecar node %d: CQL on (\S+)$`, i+1)))[1]
	}
	nodeAPI := nodes.waitLine(t, regexp.MustCompile(`^tracecar node 1: API on (\S+)$`))[1]
	cqlPort, adminPort := freePort(t, ips...), freePort(t, ips...)
	dead, err := net.Listen("tcp", "127.0.0.1:0") // an OTLP endpoint that refuses every export
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close()
	var admins, sidecars []string
	for i, ip := range ips {
		args := []string{"sidecar", "--listen", fmt.Sprintf("%s:%d", ip, cqlPort), "--node", nodeAddr[i],
			"--admin", fmt.Sprintf("%s:%d", ip, adminPort), "--peer-port", strconv.Itoa(cqlPort),
			"--statement-stats", "--log-level", "error"}
		if i == 2 {
			args = append(args, "--otlp-endpoint", deadURL)
		}
		sc := startProc(t, bin, args...)
		m := sc.waitLine(t, regexp.MustCompile(`CQL on (\S+) -> node \S+, admin API http://(\S+)`))
		sidecars, admins = append(sidecars, m[1]), append(admins, m[2])
	}
	// The third sidecar records every request, so its OTel sink exports (and fails).
	post(t, "http://"+admins[2]+"/storage_service/slow_query?enable=true&fast=true&threshold=0")

	stop := startLoad(t, sidecars)
	defer stop()

	promPort := freePort(t, "127.0.0.1")
	abs, _ := filepath.Abs(deploy + "/prometheus")
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s/recording.rules.yml
  - %s/alerts.rules.yml
scrape_configs:
  - job_name: tracecar
    static_configs:
      - targets: [%s]
`, abs, abs, strings.Join(admins, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	startProc(t, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(base, "http://"), "--log.level=warn")

	// Every recording rule, and every dashboard query, returns data.
	queries := dashboardQueries(mustDashboard(t))
	rules, err := os.ReadFile(deploy + "/prometheus/recording.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+- record: (\S+)$`).FindAllStringSubmatch(string(rules), -1) {
		queries["recording rule "+m[1]] = m[1]
	}
	pending := map[string]string{}
	for k, q := range queries {
		pending[k] = q
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(pending) > 0 && time.Now().Before(deadline) {
		for k, q := range pending {
			if vals, _, err := promQuery(base, q); err == nil && len(vals) > 0 {
				delete(pending, k)
			}
		}
		time.Sleep(time.Second)
	}
	for k, q := range pending {
		_, _, err := promQuery(base, q)
		t.Errorf("%s returned no data in 2 minutes (%v): %s", k, err, q)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d queries (recording rules and dashboard panels) return data", len(queries))
	if v, _, _ := promQuery(base, `cluster:tracecar_operations:rate1m`); len(v) != 1 || v[0] < 10 {
		t.Errorf("cluster op rate %v; want the load's, at least 10/s", v)
	}

	// A stopped node: its sidecar's alert goes pending, then fires once `for:` has passed.
	forS := alertFor(t, base, "TracecarNodeUnreachable")
	post(t, nodeAPI+"/tracecar/node/stop?node=2")
	stopped := time.Now()
	var pendingAt, firingAt time.Duration
	for firingAt == 0 {
		if time.Since(stopped) > forS+30*time.Second {
			t.Fatalf("TracecarNodeUnreachable did not fire within %v of the node's stop (for: %v)", time.Since(stopped), forS)
		}
		for _, a := range alerts(t, base) {
			if a.Labels["alertname"] != "TracecarNodeUnreachable" {
				continue
			}
			if a.Labels["instance"] != admins[1] {
				t.Fatalf("TracecarNodeUnreachable for %s; only node 2 (sidecar %s) was stopped", a.Labels["instance"], admins[1])
			}
			switch {
			case a.State == "pending" && pendingAt == 0:
				pendingAt = time.Since(stopped)
			case a.State == "firing":
				firingAt = time.Since(stopped)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("node 2 stopped: TracecarNodeUnreachable pending after %v, firing after %v (for: %v)", pendingAt, firingAt, forS)
	// Firing needs the condition for the whole `for:`; it may take a scrape and an
	// evaluation (1 s each here) more to be seen, and the polling a little more.
	if firingAt < forS || firingAt > forS+5*time.Second {
		t.Errorf("fired %v after the stop; want within its for: %v (+ a scrape and an evaluation)", firingAt, forS)
	}
}

// alertFor returns the `for:` of an alert rule, as Prometheus loaded it.
func alertFor(tb testing.TB, base, name string) time.Duration {
	tb.Helper()
	resp, err := http.Get(base + "/api/v1/rules?type=alert")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name     string  `json:"name"`
					Duration float64 `json:"duration"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		tb.Fatal(err)
	}
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			if rule.Name == name {
				return time.Duration(rule.Duration * float64(time.Second))
			}
		}
	}
	tb.Fatalf("Prometheus has no alert rule %s", name)
	return 0
}

type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func alerts(tb testing.TB, base string) []alert {
	tb.Helper()
	resp, err := http.Get(base + "/api/v1/alerts")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		tb.Fatal(err)
	}
	return r.Data.Alerts
}
