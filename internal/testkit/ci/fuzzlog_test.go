// Package ci_test tests what CI and the repository layout rely on: the shell functions of scripts/, and the rooms of the layout.
package ci_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deadlineOnly runs fuzz_deadline_only of fuzzlog.sh on log for target, and reports whether
// it took the log for the fuzzer's own deadline.
func deadlineOnly(tb testing.TB, log, target string) bool {
	tb.Helper()
	cmd := exec.Command("bash", "-c", `. ../../../scripts/fuzzlog.sh && fuzz_deadline_only "$1" "$2"`, "bash", log, target)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false
	}
	tb.Fatalf("fuzz_deadline_only %s %s: %v\n%s", log, target, err, out)
	return false
}

// TestFuzzDeadlineOnly feeds fuzz_deadline_only, which .ci/run uses to pass a fuzz run that
// failed, the logs of go test -fuzz: only the fuzzer's own -fuzztime deadline passes.
//
// testdata/fuzzlog/finding.log and setup-deadline.log are real go1.26.8 output (a target
// that fails on inputs longer than 2 bytes; a target whose setup fails with "dial node:
// context deadline exceeded"). deadline.log is the output of go.dev/issue/75804, which
// cannot be provoked at will: the progress lines are real, the failure is what
// testing.(*F).Fuzz prints for the error CoordinateFuzzing returns (fmt.Fprintf(f.w, "%v\n",
// err), indented like any output of the target), as published runs show it.
func TestFuzzDeadlineOnly(t *testing.T) {
	deadline, err := os.ReadFile("testdata/fuzzlog/deadline.log")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) string {
		if !strings.Contains(string(deadline), old) {
			t.Fatalf("deadline.log has no %q", old)
		}
		return strings.Replace(string(deadline), old, new, 1)
	}
	for _, tt := range []struct {
		name   string
		file   string // under testdata/fuzzlog, or
		log    string // the log itself
		target string
		want   bool
	}{
		{name: "the fuzzer's own deadline", file: "deadline.log", target: "FuzzDeadline", want: true},
		{name: "a finding", file: "finding.log", target: "FuzzFinding"},
		{name: "a test's own context deadline exceeded", file: "setup-deadline.log", target: "FuzzSetupDeadline"},
		{name: "the deadline of another target", file: "deadline.log", target: "FuzzOther"},
		{name: "the deadline and a failing input",
			log:    edit("    context deadline exceeded\n", "    context deadline exceeded\n    Failing input written to testdata/fuzz/FuzzDeadline/0123\n"),
			target: "FuzzDeadline"},
		{name: "the message with a prefix",
			log:    edit("    context deadline exceeded\n", "    fuzz_test.go:12: context deadline exceeded\n"),
			target: "FuzzDeadline"},
		{name: "a panic after the deadline",
			log:    edit("FAIL\nexit status 1\n", "panic: boom\nFAIL\nexit status 2\n"),
			target: "FuzzDeadline"},
		{name: "the target's own output before",
			log:    edit("--- FAIL:", "context deadline exceeded\n--- FAIL:"),
			target: "FuzzDeadline"},
		{name: "an empty log", log: "", target: "FuzzDeadline"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join("testdata", "fuzzlog", tt.file)
			if tt.file == "" {
				path = filepath.Join(t.TempDir(), "fuzz.log")
				if err := os.WriteFile(path, []byte(tt.log), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := deadlineOnly(t, path, tt.target); got != tt.want {
				t.Errorf("fuzz_deadline_only on %s: %v; want %v", tt.name, got, tt.want)
			}
		})
	}
}
