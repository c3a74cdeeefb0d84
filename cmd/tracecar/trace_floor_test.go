package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// floorScript runs three prepared statements 400 times each over about 4 s, with the
// Python driver at its defaults (protocol v5 negotiated).
const floorScript = `
import os, time
from cassandra.cluster import Cluster
cluster = Cluster([os.environ["CQL_HOST"]], port=int(os.environ["CQL_PORT"]), connect_timeout=20, control_connection_timeout=20)
s = cluster.connect()
s.execute("CREATE KEYSPACE IF NOT EXISTS floor WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE IF NOT EXISTS floor.kv (k int PRIMARY KEY, v int)")
ins = s.prepare("INSERT INTO floor.kv (k, v) VALUES (?, ?)")
sel = s.prepare("SELECT v FROM floor.kv WHERE k = ?")
upd = s.prepare("UPDATE floor.kv SET v = ? WHERE k = ?")
start = time.time()
for i in range(400):
    s.execute(ins, (i, i))
    s.execute(sel, (i,))
    s.execute(upd, (i + 1, i))
    lag = start + (i + 1) * 0.01 - time.time()
    if lag > 0:
        time.sleep(lag)
print("protocol", cluster.protocol_version)
print("loop_s", time.time() - start)
cluster.shutdown()
`

// TestTraceFloorPythonDriver: with probability 0 and slow-query logging off, the trace floor
// at interval=2s gives each of three prepared statements, run 400 times each over about 4 s
// by the Python driver, a full trace with the node's own events: each has a last_trace_id,
// `ctl trace` of one prints the node's events, and between 3 and 40 of the 1,200 requests
// are traced. A bad interval is a 400 naming it.
func TestTraceFloorPythonDriver(t *testing.T) {
	drivertest.RequirePython(t)
	st := mustStack(t, stackConfig{})
	admin := strings.TrimPrefix(st.Admin, "http://")
	for _, bad := range []string{"interval=soon", "interval=-1s", "interval=200h", "interval=2s&max_per_second=0", "max_per_second=3", "interval=0.5s"} {
		code, body := adminCall(t, st.Admin, "POST", "/tracecar/trace_floor?"+bad)
		name, _, _ := strings.Cut(bad, "=")
		switch {
		case strings.HasPrefix(bad, "interval=2s&"):
			name = "max_per_second"
		case strings.HasPrefix(bad, "max_per_second"):
			name = "interval" // required
		}
		if code != http.StatusBadRequest || !strings.Contains(body, name) {
			t.Errorf("POST trace_floor?%s: %d %s; want 400 naming %s", bad, code, body, name)
		}
	}
	if got := mustAdmin(t, st.Admin, "GET", "/tracecar/trace_floor"); !strings.Contains(string(got), `"enabled":false`) {
		t.Errorf("after refused changes the floor is %s; want it off", got)
	}
	mustAdmin(t, st.Admin, "POST", "/tracecar/trace_floor?interval=2s")
	if got := mustAdmin(t, st.Admin, "GET", "/tracecar/trace_floor"); !strings.Contains(string(got), `"interval":"2s"`) || !strings.Contains(string(got), `"max_per_second":10`) {
		t.Errorf("GET trace_floor: %s", got)
	}

	host, port, _ := net.SplitHostPort(st.Sidecar)
	cmd := exec.Command(drivertest.Python, "-c", floorScript)
	cmd.Env = append(cmd.Environ(), "CQL_HOST="+host, "CQL_PORT="+port)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "protocol 5") {
		t.Errorf("the driver negotiated %q; want protocol 5", out)
	}

	want := []string{"INSERT INTO floor.kv", "SELECT v FROM floor.kv", "UPDATE floor.kv"}
	var sts []statements.Statement
	if err := json.Unmarshal(mustAdmin(t, st.Admin, "GET", "/tracecar/statements?limit=1000"), &sts); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, s := range sts {
		for _, w := range want {
			if strings.HasPrefix(s.Statement, w) && s.Prepared {
				ids[w] = s.LastTraceID
				if s.LastTraceID == "" || s.LastTraceAt == nil {
					t.Errorf("%q has no last trace: %+v", s.Statement, s)
				}
			}
		}
	}
	if len(ids) != len(want) {
		t.Fatalf("statements %+v; want the three prepared ones", sts)
	}

	var sessions []tracing.Session
	if err := json.Unmarshal(mustAdmin(t, st.Admin, "GET", "/tracecar/slow_log?limit=10000&keyspace=floor"), &sessions); err != nil {
		t.Fatal(err)
	}
	traced := 0
	for _, s := range sessions {
		if s.Command != "EXECUTE" {
			continue
		}
		if s.Mode != tracing.ModeFloor {
			t.Errorf("session %s in mode %q; want floor", s.ID, s.Mode)
		}
		traced++
	}
	// Each statement once per 2 s interval at most: about 4 s of load gives 2 or 3 each. On
	// a loaded machine the loop takes longer, and the bound follows its length.
	loop := 0.0
	if _, after, ok := strings.Cut(string(out), "loop_s "); ok {
		loop, _ = strconv.ParseFloat(strings.TrimSpace(after), 64)
	}
	most := max(40, 3*(int(loop/2)+2))
	if traced < 3 || traced > most {
		t.Errorf("%d of the 1,200 requests traced by the floor over %.1fs; want 3 to %d", traced, loop, most)
	}
	t.Logf("%d of the 1,200 requests traced by the floor over %.1fs", traced, loop)

	// ctl trace of the INSERT's last floor trace, once the node's events are merged.
	id := ids[want[0]]
	deadline := time.Now().Add(20 * time.Second)
	var text string
	for {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"ctl", "--hosts", admin, "trace", id}, &stdout, &stderr)
		text = stdout.String()
		if code == exitOK && nodeEventRows(text) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctl trace %s: exit %d, no event of the node's own trace after 20s\n%s%s", id, code, text, stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(text, "INSERT INTO floor.kv") || !strings.Contains(text, tracing.EventSentToNode) {
		t.Errorf("ctl trace %s:\n%s", id, text)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"ctl", "--hosts", admin, "statements", "--limit", "1000"}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), id) {
		t.Errorf("ctl statements: exit %d\n%s%s\nwant the INSERT's last trace %s", code, stdout.String(), stderr.String(), id)
	}
}

// nodeEventRows counts the rows of ctl trace's table whose source is the node.
func nodeEventRows(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		cols := strings.Split(l, " | ")
		if len(cols) != 5 {
			continue
		}
		src := strings.TrimSpace(cols[2])
		if src != tracing.SourceSidecar && src != "source" && !strings.Contains(cols[0], "Request complete") &&
			!strings.Contains(cols[0], tracing.RequestExecute) {
			n++
		}
	}
	return n
}

// adminCall sends one request to the admin API and returns its status and body.
func adminCall(tb testing.TB, base, method, path string) (int, string) {
	tb.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestTraceFloorFor: the trace floor is a toggle like the others: for= reverts it, a bad
// for is a 400 naming it and changes nothing, DELETE drops the timer's part, and the
// timer shows in the status.
func TestTraceFloorFor(t *testing.T) {
	st := mustStack(t, stackConfig{})
	for _, bad := range []string{"abc", "-5s", "0", "169h"} {
		if code, body := adminCall(t, st.Admin, "POST", "/tracecar/trace_floor?interval=2s&for="+bad); code != http.StatusBadRequest || !strings.Contains(body, "for") {
			t.Errorf("for=%s: %d %s; want 400 naming for", bad, code, body)
		}
	}
	if got := mustAdmin(t, st.Admin, "GET", "/tracecar/trace_floor"); !strings.Contains(string(got), `"enabled":false`) {
		t.Fatalf("after refused changes: %s; want the floor off", got)
	}
	mustAdmin(t, st.Admin, "POST", "/tracecar/trace_floor?interval=30s&max_per_second=3&for=1s")
	if got := string(mustAdmin(t, st.Admin, "GET", "/tracecar/status")); !strings.Contains(got, `"trace_floor"`) {
		t.Errorf("status has no timer of the floor: %s", got)
	}
	waitFloor(t, st.Admin, `"enabled":false`)
	// It reverts to what it was: a floor of 30s, set for 1s to 10s.
	mustAdmin(t, st.Admin, "POST", "/tracecar/trace_floor?interval=30s")
	mustAdmin(t, st.Admin, "POST", "/tracecar/trace_floor?interval=10s&for=1s")
	waitFloor(t, st.Admin, `"interval":"30s"`)
	// A later change keeps its value: 40s set after a for= is not put back.
	mustAdmin(t, st.Admin, "POST", "/tracecar/trace_floor?interval=20s&for=1s")
	mustAdmin(t, st.Admin, "POST", "/tracecar/trace_floor?interval=40s")
	time.Sleep(1500 * time.Millisecond)
	if got := string(mustAdmin(t, st.Admin, "GET", "/tracecar/trace_floor")); !strings.Contains(got, `"interval":"40s"`) {
		t.Errorf("the later change was not kept: %s; want 40s", got)
	}
}

// waitFloor waits up to 10 s for GET /tracecar/trace_floor to contain want.
func waitFloor(tb testing.TB, base, want string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := string(mustAdmin(tb, base, "GET", "/tracecar/trace_floor"))
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("trace_floor is %s after 10s; want %s", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
