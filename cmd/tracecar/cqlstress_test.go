package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cqlstressDir holds profiles of the shapes of cassandra-stress's examples.
const cqlstressDir = "../../loadcheck/testdata/cqlstress"

// TestLoadcheckCqlstressExamples runs each profile of the shape of cassandra-stress's
// examples on the embedded node, one short round, with its own ops: each ends with exit 0
// and no errors, its preload (when it reads) printed as a plan with a size that fits the
// node's limit, the COMPACT STORAGE one included.
func TestLoadcheckCqlstressExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the embedded default")
	}
	plan := regexp.MustCompile(`Preloading ([\d,]+) partitions, ([\d,]+) rows, about [\d.]+ [KMG]?i?B \([^)]*a partition\); as many as fit a budget of 8 MiB \(1/8 of the node's --memory-limit 64 MiB\); --preload N forces a count; expected to take about \S+`)
	tests := []struct {
		file, ops string
		exit      int
		want      string
	}{
		{"lwt.yaml", "insert=1,singlepost=1,timeline=1", exitOK, "Preloaded "},
		{"counter.yaml", "", exitOK, "insert"},
		{"counter.yaml", "insert=1,simple1=1", exitOK, "Preloaded "},
		{"insanity.yaml", "insert=1,simple1=1", exitOK, "Preloaded "},
		{"example.yaml", "insert=1,simple1=1,range1=1", exitOK, "Preloaded "},
		// The node takes COMPACT STORAGE tables, as Cassandra 4 does (CREATE TABLE keeps the option,
		// with ALTER TABLE ... DROP COMPACT STORAGE to leave it) and ScyllaDB.
		{"compact.yaml", "insert=1,simple1=1,range1=1", exitOK, "Preloaded "},
	}
	for _, tt := range tests {
		t.Run(tt.file+" "+tt.ops, func(t *testing.T) {
			args := []string{"loadcheck", "--profile", filepath.Join(cqlstressDir, tt.file), "--memory-limit", "64MiB",
				"--modes", "off", "--rounds", "1", "--duration", "500ms", "--warmup", "0", "--target-error", "0",
				"--json", filepath.Join(t.TempDir(), "r.json")}
			if tt.ops != "" {
				args = append(args, "--ops", tt.ops)
			}
			out := mustRun(t, tt.exit, args...)
			if !strings.Contains(out, tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out)
			}
			if tt.want == "Preloaded " && !plan.MatchString(out) {
				t.Errorf("no preload plan matching %s:\n%s", plan, out)
			}
			if tt.exit == exitOK && !strings.Contains(out, "Total errors              : 0 ") {
				t.Errorf("errors in the run:\n%s", out)
			}
		})
	}
}

// TestLoadcheckPreloadRefused: a preload that cannot fit the node's limit stops with exit 2
// naming the limit and --preload, before writing when its plan is over the limit, and when
// the node refuses its writes.
func TestLoadcheckPreloadRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the embedded default")
	}
	for _, tt := range []struct{ name, preload, want string }{
		{"plan over the limit", "100", "more than the node's --memory-limit 32 MiB: give a smaller --preload"},
		{"node refuses", "10", "the node refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := mustRun(t, exitUsage, "loadcheck", "--profile", filepath.Join(cqlstressDir, "lwt.yaml"), "--memory-limit", "32MiB",
				"--ops", "insert=1,singlepost=1", "--preload", tt.preload, "--modes", "off", "--rounds", "1", "--duration", "500ms", "--warmup", "0")
			if !strings.Contains(out, tt.want) || !strings.Contains(out, "--memory-limit 32 MiB") || !strings.Contains(out, "--preload") {
				t.Errorf("output lacks %q, the limit or --preload:\n%s", tt.want, out)
			}
		})
	}
}
