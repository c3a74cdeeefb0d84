package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/tracing"
)

// TestCtlSlowLogAndTrace: `tracecar ctl slow-log` reads the slow log from a shell, with the
// API's filters, newest or slowest first, one line per session, and without the drivers'
// system queries unless --include-system; `tracecar ctl trace ID` prints a session with
// its events, the node's merged ones included, as cqlsh's TRACING ON does (issue 47,
// finding 2). The traffic is gocql's, sampled, so that the node traces it too.
func TestCtlSlowLogAndTrace(t *testing.T) {
	st := mustStack(t, stackConfig{RingSize: 5000})
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60, Probability: 1}); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	mustKeyValueTable(t, s, "ctl_slow", "text")
	for i := range 30 {
		if err := s.Query("INSERT INTO ctl_slow.kv (k, v) VALUES (?, ?)", i, strings.Repeat("v", i*100)).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	admin := strings.TrimPrefix(st.Admin, "http://")
	ctl := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"ctl", "--hosts", admin}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}

	// Sampled sessions reach the ring once the node's events are merged in.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := ctl("slow-log", "--table", "ctl_slow.kv", "--limit", "1000", "--json")
		var sessions []tracing.Session
		json.Unmarshal([]byte(out), &sessions)
		if n := executes(sessions); code == exitOK && n == 30 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after 30s the slow log holds %d of the 30 INSERTs (exit %d)", n, code)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The slowest five, one line each, in order, none of them a system query.
	code, out := ctl("slow-log", "--sort", "duration", "--limit", "5")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 7 || !strings.HasPrefix(lines[0], "STARTED") || lines[6] != "5 sessions from 1 hosts" {
		t.Fatalf("slow-log --sort duration --limit 5: exit %d\n%s", code, out)
	}
	prev := int64(1 << 62)
	for _, l := range lines[1:6] {
		f := strings.Fields(l)
		d, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || d > prev {
			t.Errorf("line %q: duration %v after %d; want slowest first", l, f[1], prev)
		}
		prev = d
	}
	system := func(out string) bool {
		return strings.Contains(out, "FROM system.") || strings.Contains(out, "FROM system_schema.")
	}
	if code, out = ctl("slow-log", "--limit", "1000"); code != exitOK || system(out) || !strings.Contains(out, "INSERT INTO ctl_slow.kv") {
		t.Errorf("slow-log: exit %d, system queries %v\n%s", code, system(out), out)
	}
	if code, out = ctl("slow-log", "--limit", "1000", "--include-system"); code != exitOK || !system(out) {
		t.Errorf("slow-log --include-system: exit %d, system queries %v; want them", code, system(out))
	}
	code, out = ctl("slow-log", "--table", "ctl_slow.kv", "--limit", "1000", "--json")
	var sessions []tracing.Session
	if err := json.Unmarshal([]byte(out), &sessions); code != exitOK || err != nil || executes(sessions) != 30 {
		t.Fatalf("slow-log --table ctl_slow.kv --json: exit %d, %v, %d EXECUTEs; want the 30 INSERTs", code, err, executes(sessions))
	}
	for _, sess := range sessions {
		if !strings.Contains(sess.Parameters["query"], "ctl_slow.kv") {
			t.Errorf("--table ctl_slow.kv shows %+v", sess)
		}
	}
	if code, out = ctl("slow-log", "--sort", "size"); code != exitUsage || !strings.Contains(out, "--sort") {
		t.Errorf("slow-log --sort size: exit %d %q; want a usage error naming --sort", code, out)
	}
	if code, out = ctl("slow-log", "--since", "yesterday"); code != exitRuntime || !strings.Contains(out, "since") {
		t.Errorf("slow-log --since yesterday: exit %d %q; want the API's refusal naming since", code, out)
	}

	// A sampled INSERT's session, once the node's events are merged into it.
	id := sessions[0].ID
	for _, sess := range sessions {
		if sess.Command == "EXECUTE" {
			id = sess.ID
		}
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(st.Admin + "/tracecar/sessions/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var sess tracing.Session
		json.NewDecoder(resp.Body).Decode(&sess)
		resp.Body.Close()
		merged := false
		for _, e := range sess.Events {
			merged = merged || e.Source != tracing.SourceSidecar
		}
		if merged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s has no node events after 20s: %+v", id, sess.Events)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, out = ctl("trace", id)
	if code != exitOK || !strings.HasPrefix(out, "Tracing session: "+id) {
		t.Fatalf("trace %s: exit %d\n%s", id, code, out)
	}
	for _, want := range []string{" activity | timestamp", tracing.RequestExecute, tracing.EventReceived, tracing.EventSentToNode,
		tracing.EventResponseSent, "Request complete", "INSERT INTO ctl_slow.kv"} {
		if !strings.Contains(out, want) {
			t.Errorf("trace: no %q in\n%s", want, out)
		}
	}
	nodeRows := 0
	for _, l := range strings.Split(out, "\n") {
		if cols := strings.Split(l, " | "); len(cols) == 5 && strings.TrimSpace(cols[2]) != tracing.SourceSidecar &&
			strings.TrimSpace(cols[2]) != "source" && !strings.Contains(cols[0], "Request complete") && !strings.Contains(cols[0], tracing.RequestExecute) {
			nodeRows++
		}
	}
	if nodeRows == 0 {
		t.Errorf("trace: no event of the node's own trace\n%s", out)
	}
	if code, out = ctl("trace", "00000000-0000-1000-8000-000000000000"); code != exitRuntime || !strings.Contains(out, "no host has the session") {
		t.Errorf("trace of an unknown id: exit %d %q", code, out)
	}
	if code, _ = ctl("trace"); code != exitUsage {
		t.Errorf("trace without an id: exit %d; want %d", code, exitUsage)
	}
}

// executes counts the EXECUTE sessions of sessions: the runs of a prepared statement,
// without its PREPARE.
func executes(sessions []tracing.Session) int {
	n := 0
	for _, s := range sessions {
		if s.Command == "EXECUTE" {
			n++
		}
	}
	return n
}
