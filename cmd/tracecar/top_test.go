package main

import (
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

// topLoadScript is a Python-driver workload for one sidecar, until it is killed (at most
// SECS seconds): per round three prepared INSERTs and one prepared SELECT, and every tenth
// round an unprepared SELECT of a table that does not exist, which fails.
const topLoadScript = `
import os, time
from cassandra.cluster import Cluster
host, port = os.environ["CQL_HOST"], int(os.environ["CQL_PORT"])
cluster = Cluster([host], port=port, connect_timeout=20, control_connection_timeout=20)
s = cluster.connect()
s.execute("CREATE KEYSPACE IF NOT EXISTS topks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE IF NOT EXISTS topks.kv (k int PRIMARY KEY, v text)")
ins = s.prepare("INSERT INTO topks.kv (k, v) VALUES (?, ?)")
sel = s.prepare("SELECT v FROM topks.kv WHERE k = ?")
end = time.time() + float(os.environ.get("SECS", "120"))
i = 0
while time.time() < end:
    for j in range(3):
        s.execute(ins, (3 * i + j, "v"))
    s.execute(sel, (i,))
    if i % 10 == 0:
        try:
            s.execute("SELECT v FROM topks.nope WHERE k = %d" % i)
        except Exception:
            pass
    i += 1
`

const (
	topInsert = "INSERT INTO topks.kv (k, v) VALUES (?, ?)"
	topSelect = "SELECT v FROM topks.kv WHERE k = ?"
	topBad    = "SELECT v FROM topks.nope WHERE k = ?"
)

// tmux drives a tmux server of its own, on a socket in a test folder.
type tmux struct {
	tb   testing.TB
	bin  string
	sock string
}

func (m *tmux) run(args ...string) string {
	m.tb.Helper()
	out, err := exec.Command(m.bin, append([]string{"-S", m.sock}, args...)...).CombinedOutput()
	if err != nil {
		m.tb.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen returns what the pane shows.
func (m *tmux) screen() string { return m.run("capture-pane", "-p", "-t", "top") }

// waitScreen waits until cond holds for the pane's content, and returns it.
func (m *tmux) waitScreen(what string, cond func(string) bool) string {
	m.tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := m.screen()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			m.tb.Fatalf("the screen never showed %s:\n%s", what, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// topRow is a statement row of ctl top's screen.
type topRow struct {
	share, calls, errs float64
	text               string
}

var (
	topRowRe     = regexp.MustCompile(`(?m)^\s+(\d+\.\d)%\s+([\d.]+)\s+\S+\s+\S+\s+([\d.]+)\s+(?:yes|no)\s+\S+\s+(.+?)\s*$`)
	topClusterRe = regexp.MustCompile(`(?m)^CLUSTER\s+2/2 up\s+([\d.]+) op/s`)
	topCallsRe   = regexp.MustCompile(`(?m)^STATEMENTS\s+by (\S+) over the last \S+: \d+ active, ([\d.]+) calls/s`)
	topClockRe   = regexp.MustCompile(`(?m)^tracecar top .* (\d\d:\d\d:\d\d) `)
)

func topRows(screen string) []topRow {
	var rows []topRow
	for _, m := range topRowRe.FindAllStringSubmatch(screen, -1) {
		r := topRow{text: m[4]}
		r.share, _ = strconv.ParseFloat(m[1], 64)
		r.calls, _ = strconv.ParseFloat(m[2], 64)
		r.errs, _ = strconv.ParseFloat(m[3], 64)
		rows = append(rows, r)
	}
	return rows
}

// hasRows reports whether the screen lists the three statements of the workload.
func hasRows(screen string) bool {
	found := 0
	for _, r := range topRows(screen) {
		if r.text == topInsert || r.text == topSelect || r.text == topBad {
			found++
		}
	}
	return found == 3
}

// TestTopUnderTmux is the acceptance test of ctl top: two sidecars under Python-driver
// load, and top in a real terminal (tmux). The screen shows both hosts, the workload's
// statements in the order of their share of the interval's time, op/s that agree with
// the statements' calls/s within 10%, a new order on a key, and the shell's own screen
// back once q is pressed.
func TestTopUnderTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	bin := drivertest.RequireTool(t, "tmux", "tmux")
	drivertest.RequirePython(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "load.py")
	if err := os.WriteFile(script, []byte(topLoadScript), 0o644); err != nil {
		t.Fatal(err)
	}
	var admins []string
	for range 2 {
		st := mustStack(t, stackConfig{Statements: statementsConfig{On: true}})
		admins = append(admins, strings.TrimPrefix(st.Admin, "http://"))
		host, port, _ := net.SplitHostPort(st.Sidecar)
		load := exec.Command("/usr/bin/python3", script)
		load.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port)
		out := &lockedBuffer{}
		load.Stdout, load.Stderr = out, out
		if err := load.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			load.Process.Kill()
			load.Wait()
			if t.Failed() {
				t.Logf("python load on %s:\n%s", st.Sidecar, out.String())
			}
		})
	}

	m := &tmux{tb: t, bin: bin, sock: filepath.Join(dir, "tmux.sock")}
	start := exec.Command(bin, "-S", m.sock, "-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", "200", "-y", "50", "/bin/sh")
	start.Env = append(os.Environ(), childEnv+"=1", "PS1=$ ") // the shell runs this test binary as tracecar
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(bin, "-S", m.sock, "kill-server").Run() })
	m.waitScreen("the shell's prompt", func(s string) bool { return strings.TrimSpace(s) != "" })
	m.run("send-keys", "-t", "top", "echo TOP-BEFORE; "+exe+" ctl --hosts "+strings.Join(admins, ",")+
		" top --interval 1s --per-host; echo TOP-EXIT=$?", "Enter")

	// Both hosts answer, with rates, and every statement of the workload is on screen;
	// two refreshes later, past the drivers' start (their schema queries, answered slowly,
	// and the first readings of each host), the load is steady.
	s := m.waitScreen("two hosts up and the workload's statements", func(s string) bool {
		return topClusterRe.MatchString(s) && topCallsRe.MatchString(s) && hasRows(s)
	})
	for range 2 {
		clock := topClockRe.FindString(s)
		s = m.waitScreen("the next refresh", func(s string) bool {
			return topClockRe.FindString(s) != clock && topClusterRe.MatchString(s) && topCallsRe.MatchString(s) && hasRows(s)
		})
	}
	t.Logf("screen:\n%s", s)
	for _, a := range admins {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(a) + `\s+[\d.]+\s`).MatchString(s) {
			t.Errorf("no row for host %s", a)
		}
	}
	// The hosts' op rate and the statements' call rate are read over windows that need not
	// end together, so under a busy machine one refresh may put them apart: up to five
	// refreshes may show them within 10% of each other.
	for try := 1; ; try++ {
		ops, _ := strconv.ParseFloat(topClusterRe.FindStringSubmatch(s)[1], 64)
		calls := topCallsRe.FindStringSubmatch(s)
		callRate, _ := strconv.ParseFloat(calls[2], 64)
		if calls[1] == "total_time" && ops > 0 && callRate >= 0.9*ops && callRate <= 1.1*ops {
			break
		}
		if try == 5 {
			t.Errorf("sorted by %s, %v op/s against the statements' %v calls/s; want total_time, within 10%%", calls[1], ops, callRate)
			break
		}
		t.Logf("refresh %d: %v op/s against the statements' %v calls/s: reading the next", try, ops, callRate)
		clock := topClockRe.FindString(s)
		s = m.waitScreen("the next refresh", func(s string) bool {
			return topClockRe.FindString(s) != clock && topClusterRe.MatchString(s) && topCallsRe.MatchString(s) && hasRows(s)
		})
	}
	rows := topRows(s)
	for i := 1; i < len(rows); i++ {
		if rows[i].share > rows[i-1].share {
			t.Errorf("by total_time, row %d (%.1f%% %s) is above row %d (%.1f%%)", i-1, rows[i-1].share, rows[i-1].text, i, rows[i].share)
		}
	}

	// e: by errors, the failing SELECT first.
	m.run("send-keys", "-t", "top", "e")
	s = m.waitScreen("the statements by errors", func(s string) bool {
		c := topCallsRe.FindStringSubmatch(s)
		return c != nil && c[1] == "errors" && hasRows(s)
	})
	if rows := topRows(s); rows[0].text != topBad || rows[0].errs <= 0 {
		t.Errorf("by errors, the first row is %+v; want %q with errors:\n%s", rows[0], topBad, s)
	}
	// c: by calls.
	m.run("send-keys", "-t", "top", "c")
	s = m.waitScreen("the statements by calls", func(s string) bool {
		c := topCallsRe.FindStringSubmatch(s)
		return c != nil && c[1] == "calls" && hasRows(s)
	})
	rows = topRows(s)
	for i := 1; i < len(rows); i++ {
		if rows[i].calls > rows[i-1].calls {
			t.Errorf("by calls, row %d (%.1f/s) is above row %d (%.1f/s):\n%s", i-1, rows[i-1].calls, i, rows[i].calls, s)
		}
	}
	if rows[0].text != topInsert {
		t.Errorf("by calls, the first row is %q; want the INSERT, called three times a round", rows[0].text)
	}

	// q: top ends, and the terminal is the shell's again.
	m.run("send-keys", "-t", "top", "q")
	exited := regexp.MustCompile(`(?m)^TOP-EXIT=(\d+)\s*$`)
	s = m.waitScreen("top's exit", exited.MatchString)
	before := regexp.MustCompile(`(?m)^[^e\n]*TOP-BEFORE\s*$`) // the echo's output, not the command line
	if exited.FindStringSubmatch(s)[1] != "0" || !before.MatchString(s) || strings.Contains(s, "STATEMENTS") {
		t.Errorf("after q the screen is not the shell's own, or top failed:\n%s", s)
	}
	if alt := strings.TrimSpace(m.run("display-message", "-p", "-t", "top", "#{alternate_on} #{cursor_flag}")); alt != "0 1" {
		t.Errorf("after q: alternate screen and cursor %q; want \"0 1\" (normal screen, cursor shown)", alt)
	}
}
