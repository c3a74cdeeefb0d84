package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/testkit/capturetest"
)

// writeCapture writes a small capture of one table, ks.t, whose columns are cols, and
// returns its path.
func writeCapture(tb testing.TB, dir, name string, cols []capturefile.Column) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	capturetest.Write(tb, path, cols)
	return path
}

var plainColumns = capturetest.Columns

// TestCaptureBadInput gives every reader of a capture file a bad one: a truncated file,
// a corrupt one, one of another format version, a schema the replay cannot create; and the
// sidecar a capture directory it cannot use. The table the node refuses is found on the
// embedded default, whose node is started for it. Each exits 1 with an error that names the
// file and the problem, and writes nothing: no output, no report, no directory.
func TestCaptureBadInput(t *testing.T) {
	dir := t.TempDir()
	good := writeCapture(t, dir, "good.tcap", plainColumns)
	b, _ := os.ReadFile(good)
	cut := filepath.Join(dir, "cut.tcap")
	os.WriteFile(cut, b[:len(b)-10], 0o600)
	corrupt := filepath.Join(dir, "corrupt.tcap")
	bad := bytes.Clone(b)
	bad[len(bad)/2] ^= 0x55
	os.WriteFile(corrupt, bad, 0o600)
	version := filepath.Join(dir, "version.tcap")
	v := bytes.Clone(b)
	binary.BigEndian.PutUint16(v[len(capturefile.Magic):], 7)
	os.WriteFile(version, v, 0o600)
	udt := writeCapture(t, dir, "udt.tcap", append(plainColumns[:1:1], capturefile.Column{Name: "home", Type: "frozen<address>", Kind: capturefile.Regular, Position: -1}))
	mixed := writeCapture(t, dir, "mixed.tcap", append(plainColumns[:2:2], capturefile.Column{Name: "hits", Type: "counter", Kind: capturefile.Regular, Position: -1}))
	notDir := filepath.Join(dir, "a-file")
	os.WriteFile(notDir, nil, 0o600)
	report := filepath.Join(dir, "report.json")

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"dump, truncated", []string{"capture", "dump", cut}, []string{cut, "truncated", "ends inside the chunk at byte 18"}},
		{"stats, truncated", []string{"capture", "stats", cut}, []string{cut, "truncated"}},
		{"dump, corrupt", []string{"capture", "dump", corrupt}, []string{corrupt, "corrupt", "chunk at byte"}},
		{"dump, another version", []string{"capture", "stats", version}, []string{version, "capture format version 7: this tracecar reads version 1"}},
		{"replay, truncated", []string{"loadcheck", "--workload", "replay:" + cut, "--json", report}, []string{cut, "truncated"}},
		{"replay, corrupt", []string{"loadcheck", "--workload", "replay:" + corrupt, "--json", report}, []string{corrupt, "corrupt"}},
		{"replay, another version", []string{"loadcheck", "--workload", "replay:" + version, "--json", report}, []string{"capture format version 7"}},
		{"replay, a schema the node cannot be given", []string{"loadcheck", "--workload", "replay:" + udt, "--json", report},
			[]string{udt, "table ks.t cannot be created", "column home has type frozen<address>", "user-defined type"}},
		{"replay, a table the node refuses", []string{"loadcheck", "--workload", "replay:" + mixed, "--json", report, "--modes", "off", "--rounds", "1"},
			[]string{"cannot create table ks.t of the capture", "Cannot mix counter and non counter columns", "nothing was replayed"}},
		{"sidecar, a capture directory that is a file", []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--capture-dir", notDir},
			[]string{"--capture-dir", notDir}},
		{"sidecar, a capture directory under a file", []string{"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--capture-dir", filepath.Join(notDir, "sub")},
			[]string{"--capture-dir", filepath.Join(notDir, "sub"), "not a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code := run(ctx, tt.args, &out, &errb)
			if code != exitRuntime {
				t.Fatalf("exit %d; want %d\n%s\n%s", code, exitRuntime, out.String(), errb.String())
			}
			t.Logf("%s", strings.TrimSpace(errb.String()))
			for _, w := range tt.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q lacks %q", errb.String(), w)
				}
			}
			if tt.args[0] == "capture" && out.Len() > 0 {
				t.Errorf("printed %q before failing", out.String())
			}
			if _, err := os.Stat(report); err == nil {
				t.Errorf("a report was written")
			}
		})
	}
	if fi, err := os.Stat(notDir); err != nil || fi.IsDir() {
		t.Errorf("the file in the way of --capture-dir was changed: %v", err)
	}
}

// TestCaptureUsage checks the usage errors of the capture's command lines (exit 2).
func TestCaptureUsage(t *testing.T) {
	dir := t.TempDir()
	good := writeCapture(t, dir, "good.tcap", plainColumns)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"capture"}, "want dump or stats"},
		{[]string{"capture", "print", good}, `capture "print"`},
		{[]string{"capture", "dump"}, "want one FILE"},
		{[]string{"loadcheck", "--workload", "replay:" + good, "--replay-speed", "fast"}, `--replay-speed "fast"`},
		{[]string{"loadcheck", "--workload", "replay:" + good, "--replay-speed", "2x", "--rate", "100"}, "contradict"},
		{[]string{"loadcheck", "--workload", "write", "--replay-speed", "2x"}, "apply to --workload replay:FILE"},
		{[]string{"loadcheck", "--node", "n:1", "--workload", "replay:" + good, "--replay-speed", "1x"}, "--replay-keyspace"},
		{[]string{"loadcheck", "--node", "n:1", "--workload", "replay:" + good, "--replay-keyspace", "r"}, "--replay-speed"},
		{[]string{"loadcheck", "--node", "n:1", "--workload", "replay:" + good, "--replay-keyspace", "ks", "--replay-speed", "1x"}, "never writes into the captured keyspaces"},
		{[]string{"ctl", "capture", "begin"}, `capture "begin"`},
		{[]string{"ctl", "capture", "start", "--values", "all"}, `--values "all"`},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tt.args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("tracecar %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), code, errb.String(), tt.want)
		}
	}
}

// TestCaptureDumpStats prints a small capture both ways.
func TestCaptureDumpStats(t *testing.T) {
	good := writeCapture(t, t.TempDir(), "good.tcap", plainColumns)
	dump := mustRun(t, exitOK, "capture", "dump", good)
	lines := strings.Split(strings.TrimSpace(dump), "\n")
	if len(lines) != 1+1+1+1+200+1 || !strings.HasPrefix(lines[0], `{"type":"header"`) || !strings.HasPrefix(lines[len(lines)-1], `{"type":"end"`) ||
		!strings.Contains(lines[4], `"op":"EXECUTE"`) || !strings.Contains(lines[4], `"values":[{"type":"int","len":4}]`) {
		t.Errorf("dump:\n%s", strings.Join(lines[:min(6, len(lines))], "\n"))
	}
	stats := mustRun(t, exitOK, "capture", "stats", good)
	for _, w := range []string{"200 records", "SELECT * FROM ks.t WHERE k = ?", "10 distinct"} {
		if !strings.Contains(stats, w) {
			t.Errorf("stats lack %q:\n%s", w, stats)
		}
	}
}
