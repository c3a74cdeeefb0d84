package sidecar

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
)

// gocqlSuiteTimeout bounds one run of gocql's own integration suite (about 20 seconds on 2
// cores).
const gocqlSuiteTimeout = 5 * time.Minute

// TestGocqlOwnIntegrationSuite runs gocql's own integration suite (v1.7.0, the module this
// one depends on, build tag cassandra: 154 tests of queries, batches, paging, LWT,
// prepared statements, UDTs, tuples, metadata, views, aggregates, tracing, events) against
// the embedded node, directly and through a sidecar, as its CI runs it against a
// Cassandra 4.1 cluster. Only TestDiscoverViaProxy is left out: it expects the node on
// gocql's default port, 9042, and the node here listens on a free one.
func TestGocqlOwnIntegrationSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	dir := gocqlSuiteDir(t)
	for _, via := range []string{"direct", "sidecar"} {
		t.Run(via, func(t *testing.T) {
			n := mustNode(t, node.Config{}, nodeAddr)
			addr := n.addr
			if via == "sidecar" {
				tp := mustProxyApart(t, Config{}, nil, n)
				addr = tp.addr
			}
			runGocqlSuite(t, dir, addr)
		})
	}
}

// gocqlSuiteDir returns a writable copy of the gocql module this one builds with.
func gocqlSuiteDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gocql/gocql").Output()
	src := strings.TrimSpace(string(out))
	if err != nil || src == "" {
		t.Fatalf("go list -m github.com/gocql/gocql: %q, %v", out, err)
	}
	dst := t.TempDir()
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	return dst
}

var failedTest = regexp.MustCompile(`(?m)^--- FAIL: (\S+)`)

// runGocqlSuite runs gocql's integration suite in dir against the node or sidecar at addr,
// at protocol v4 (gocql's own choice), as a Cassandra 4.1.
func runGocqlSuite(t *testing.T, dir, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gocqlSuiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-tags", "cassandra", "-count=1", "-skip", "^TestDiscoverViaProxy$", ".",
		"-args", "-cluster", addr, "-proto", "4", "-autowait", "100ms", "-gocql.cversion", "4.1.0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if failed := failedTest.FindAllStringSubmatch(string(out), -1); err != nil || len(failed) > 0 {
		var names []string
		for _, f := range failed {
			names = append(names, f[1])
		}
		t.Fatalf("gocql's integration suite against %s: %v; failed: %v\n%s", addr, err, names, tail(out, 4000))
	}
	if !strings.Contains(string(out), "ok  \tgithub.com/gocql/gocql") {
		t.Fatalf("gocql's integration suite did not report ok:\n%s", tail(out, 4000))
	}
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
