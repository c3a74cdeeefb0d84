//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracecar/tracecar/internal/schedpolicy"
)

// TestSidecarSchedPolicy runs `tracecar sidecar` as a process of its own, with its
// default --sched-policy and with each value, sends gocql requests through it (so that the
// runtime starts the threads a loaded sidecar has), and checks the scheduling policy of
// every one of its threads: SCHED_OTHER by default, a default that cannot delay the node
// (issue 47, finding 7), and SCHED_BATCH only when asked for. /tracecar/status and
// `tracecar ctl status` name the policy.
func TestSidecarSchedPolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		want  uint32
		name2 string // in /tracecar/status
	}{
		{"default", nil, unix.SCHED_NORMAL, "normal"},
		{"normal", []string{"--sched-policy", "normal"}, unix.SCHED_NORMAL, "normal"},
		{"batch", []string{"--sched-policy", "batch"}, unix.SCHED_BATCH, "batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, addr, adminAddr := mustSidecarProcess(t, tc.args...)
			s := mustSession(t, addr)
			defer s.Close()
			for i := range 200 {
				if err := s.Query(`SELECT release_version FROM system.local`).Exec(); err != nil {
					t.Fatalf("query %d through the sidecar: %v", i, err)
				}
			}
			threads, err := schedpolicy.Threads(pid)
			if err != nil {
				t.Fatal(err)
			}
			if len(threads) < 3 {
				t.Fatalf("the sidecar has %d threads; want a Go process's several", len(threads))
			}
			for tid, p := range threads {
				if p != tc.want {
					t.Errorf("thread %d of the sidecar has policy %d; want %d", tid, p, tc.want)
				}
			}
			var st struct {
				Process struct {
					PID         int    `json:"pid"`
					SchedPolicy string `json:"sched_policy"`
				} `json:"process"`
			}
			if err := json.Unmarshal(mustAdmin(t, adminAddr, "GET", "/tracecar/status"), &st); err != nil {
				t.Fatal(err)
			}
			if st.Process.PID != pid || st.Process.SchedPolicy != tc.name2 {
				t.Errorf("/tracecar/status process: pid %d, sched_policy %q; want %d, %q", st.Process.PID, st.Process.SchedPolicy, pid, tc.name2)
			}
			code, out, errOut := runCtlArgs("--hosts", strings.TrimPrefix(adminAddr, "http://"), "status")
			if code != 0 || !strings.Contains(out, " sched="+tc.name2) {
				t.Errorf("tracecar ctl status: exit %d, %q %q; want 0 and sched=%s", code, out, errOut, tc.name2)
			}
		})
	}
	// A policy that does not exist is a usage error, before anything starts.
	var out, errb strings.Builder
	if code := run(t.Context(), []string{"sidecar", "--sched-policy", "fifo"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--sched-policy") || !strings.Contains(errb.String(), "want batch") {
		t.Errorf("--sched-policy fifo: exit %d, %q; want 2 and a message naming the flag and what it takes", code, errb.String())
	}
}

// mustSidecarProcess starts `tracecar sidecar` with an embedded node, in a process of its
// own (this test binary, run as tracecar), until the test ends, and returns its pid, its
// CQL address and its admin API's URL.
func mustSidecarProcess(tb testing.TB, args ...string) (int, string, string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--control-socket", "none"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(unix.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			tb.Errorf("the sidecar did not exit within 30s of SIGTERM")
		}
	})
	re := regexp.MustCompile(`CQL on (\S+) -> node \S+, admin API (\S+)`)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd.Process.Pid, m[1], m[2]
		}
	}
	tb.Fatalf("the sidecar printed no CQL address")
	return 0, "", ""
}
