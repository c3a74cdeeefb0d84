package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// docFiles lists the README and every page of docs/, as paths relative to the root.
func docFiles(tb testing.TB) []string {
	tb.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		tb.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(repoRoot, p)
		out = append(out, rel)
	}
	return out
}

// readDoc returns the text of the document at path, relative to the root.
func readDoc(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// docSection returns the part of the document at path under heading (a whole line such as
// "## Admin API"), up to the next heading of the same or a higher level outside code.
func docSection(tb testing.TB, path, heading string) string {
	tb.Helper()
	_, rest, ok := strings.Cut("\n"+readDoc(tb, path), "\n"+heading+"\n")
	if !ok {
		tb.Fatalf("%s has no heading %q", path, heading)
	}
	level, _ := headingOf(heading)
	lines := strings.Split(rest, "\n")
	inCode := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inCode = !inCode
			continue
		}
		if n, _ := headingOf(l); !inCode && n > 0 && n <= level {
			return strings.Join(lines[:i], "\n")
		}
	}
	return rest
}

// headingOf returns the level and text of a Markdown heading line, or 0.
func headingOf(line string) (int, string) {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || !strings.HasPrefix(line[n:], " ") {
		return 0, ""
	}
	return n, strings.TrimSpace(line[n:])
}

// shBlock is a fenced sh block of a document, with the marker on the line before it.
type shBlock struct {
	file   string
	line   int    // of the opening fence, 1-based
	marker string // "run by TestX", "not run: why", or "" (run by TestDocsShellBlocks)
	lines  []string
}

var blockMarker = regexp.MustCompile(`^<!-- (run by Test[A-Za-z0-9_]+|not run: .+) -->$`)

// shBlocks returns the sh blocks of text, from the document file.
func shBlocks(file, text string) []shBlock {
	var out []shBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		b := shBlock{file: file, line: i + 1}
		if i > 0 {
			if m := blockMarker.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.marker = m[1]
			}
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.lines = append(b.lines, lines[i])
		}
		out = append(out, b)
	}
	return out
}

// TestDocsShellBlocks runs every sh block of the README and docs/ that runs against a local
// stack, as a shell would, in a temporary directory where ./tracecar is this test binary (see
// runShellBlock). A block marked "<!-- run by TestX -->" is run by that test, which must
// exist; one marked "<!-- not run: why -->" (a remote deployment, a tool this test does not
// install) is not run, and says why.
func TestDocsShellBlocks(t *testing.T) {
	tests := testFuncs(t)
	for _, f := range docFiles(t) {
		for _, b := range shBlocks(f, readDoc(t, f)) {
			name := fmt.Sprintf("%s:%d", f, b.line)
			switch {
			case strings.HasPrefix(b.marker, "run by "):
				if fn := strings.TrimPrefix(b.marker, "run by "); !tests[fn] {
					t.Errorf("%s: the block says it is run by %s, and no test of cmd/tracecar has that name", name, fn)
				}
			case strings.HasPrefix(b.marker, "not run: "):
			default:
				t.Run(name, func(t *testing.T) {
					out := runShellBlock(t, b.lines, true)
					t.Logf("%s", out)
				})
			}
		}
	}
}

// testFuncs returns the names of the Test functions of this package's test files.
func testFuncs(tb testing.TB) map[string]bool {
	tb.Helper()
	files, _ := filepath.Glob("*_test.go")
	out := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(t \*testing\.T\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestREADMEQuickStart runs the README's "Try it" block as a new user would, from a fresh
// directory: the sidecar with its embedded node, fast mode at threshold 0, traffic, and the
// slowest requests read from the slow log. It fails unless the last command prints them.
func TestREADMEQuickStart(t *testing.T) {
	blocks := shBlocks("README.md", docSection(t, "README.md", "## Try it"))
	if len(blocks) != 1 {
		t.Fatalf("the README's Try it section has %d sh blocks; want 1", len(blocks))
	}
	if n := len(blocks[0].lines); n > 5 {
		t.Errorf("the README's Try it block has %d commands; want at most 5", n)
	}
	out := runShellBlock(t, blocks[0].lines, false)
	row := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+Z\s+(\d+)\s`)
	var durations []int
	for _, l := range strings.Split(out, "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			d, _ := strconv.Atoi(m[1])
			durations = append(durations, d)
		}
	}
	if len(durations) != 5 || !slices.IsSortedFunc(durations, func(a, b int) int { return b - a }) || !strings.Contains(out, "5 sessions from 1 hosts") {
		t.Errorf("the Try it block printed %d slow-log rows, durations %v; want the 5 slowest, slowest first:\n%s", len(durations), durations, out)
	}
}

// The ports the documents use, which runShellBlock replaces with free ones.
var docPorts = []string{"9042", "9043", "10000", "10001", "4318"}

var docPort = regexp.MustCompile(`(127\.0\.0\.1:|localhost:)(\d{4,5})\b`)

// runShellBlock runs lines with bash (-e, -o pipefail) in a temporary directory and returns
// their output, or fails t. There:
//   - ./tracecar (and tracecar, on the PATH) is this test binary run as the command;
//   - `go build -o tracecar ./cmd/tracecar` is skipped, as ./tracecar is there already;
//   - curl fails on an HTTP error (--fail-with-body);
//   - each of docPorts on 127.0.0.1 is a free port, `tracecar sidecar` listens on the
//     free ports of 9043 and 10000 unless the line says where, and `tracecar ctl` reaches
//     the one of 10000 unless it names --hosts;
//   - a command started in the background with & is waited for until what it listens on
//     answers;
//   - with stack, a sidecar with an embedded node runs before the first line, as
//     `./tracecar sidecar` would start it, unless the block starts a sidecar itself.
//
// Every process the block started is killed at the end.
func runShellBlock(t *testing.T, lines []string, stack bool) string {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	for _, p := range docPorts {
		ports[p] = freePort(t)
	}
	wrapper := fmt.Sprintf(`#!/bin/sh
export %s=1
if [ "$1" = sidecar ]; then
  shift
  set -- sidecar --listen 127.0.0.1:%s --admin 127.0.0.1:%s "$@"
elif [ "$1" = ctl ]; then
  case " $* " in *" --hosts"*) ;; *) shift; set -- ctl --hosts 127.0.0.1:%s "$@" ;; esac
fi
exec %q "$@"
`, childEnv, ports["9043"], ports["10000"], ports["10000"], self)
	if err := os.WriteFile(filepath.Join(dir, "tracecar"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	// curl fails the block on an HTTP error, as a reader would see one.
	if curl, err := exec.LookPath("curl"); err == nil {
		w := fmt.Sprintf("#!/bin/sh\nexec %q --fail-with-body -sS \"$@\"\n", curl)
		if err := os.WriteFile(filepath.Join(dir, "curl"), []byte(w), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	local := func(s string) string {
		return docPort.ReplaceAllStringFunc(s, func(m string) string {
			sub := docPort.FindStringSubmatch(m)
			if p, ok := ports[sub[2]]; ok {
				return "127.0.0.1:" + p
			}
			return m
		})
	}
	waitFor := func(addrs ...string) string {
		var w []string
		for _, a := range addrs {
			host, port, _ := net.SplitHostPort(a)
			w = append(w, fmt.Sprintf("for i in $(seq 600); do (exec 3<>/dev/tcp/%s/%s) 2>/dev/null && break; sleep 0.1; done", host, port))
		}
		return strings.Join(w, "\n")
	}
	listenArg := regexp.MustCompile(`--(?:listen|admin|api)[ =](127\.0\.0\.1:\d+)`)
	var script []string
	startsSidecar := false
	for _, l := range lines {
		if strings.Contains(l, "tracecar sidecar") {
			startsSidecar = true
		}
	}
	if stack && !startsSidecar {
		script = append(script, "./tracecar sidecar --log-file stack.log >stack.out 2>&1 &",
			waitFor("127.0.0.1:"+ports["9043"], "127.0.0.1:"+ports["10000"]))
	}
	for _, l := range lines {
		if strings.TrimSpace(l) == "go build -o tracecar ./cmd/tracecar" {
			continue
		}
		l = local(l)
		script = append(script, l)
		if strings.HasSuffix(strings.TrimSpace(l), "&") {
			var addrs []string
			for _, m := range listenArg.FindAllStringSubmatch(l, -1) {
				addrs = append(addrs, m[1])
			}
			if strings.Contains(l, "tracecar sidecar") && !strings.Contains(l, "--listen") {
				addrs = append(addrs, "127.0.0.1:"+ports["9043"])
			}
			if strings.Contains(l, "tracecar sidecar") && !strings.Contains(l, "--admin") {
				addrs = append(addrs, "127.0.0.1:"+ports["10000"])
			}
			script = append(script, waitFor(addrs...))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", strings.Join(script, "\n"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: what the block leaves in the background holds it open.
	out, err := os.Create(filepath.Join(dir, "block.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	// What the block left running in the background stops with it.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	b, _ := os.ReadFile(out.Name())
	if err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "stack.out"))
		t.Fatalf("the block failed: %v\nscript:\n%s\noutput:\n%s\nstack:\n%s", err, strings.Join(script, "\n"), b, logs)
	}
	return string(b)
}

// freePort returns a port that was free on 127.0.0.1 a moment ago, below Linux's
// ephemeral range (32768 and up): a port the kernel handed out for :0 and took back could be
// handed out again, to the embedded node that `./tracecar sidecar` starts on :0, before the
// block binds it (seen in CI: the sidecar's --listen refused with "address in use").
func freePort(tb testing.TB) string {
	tb.Helper()
	const lo, hi = 20000, 32768
	start := lo + rand.IntN(hi-lo)
	for i := range hi - lo {
		port := lo + (start-lo+i)%(hi-lo)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		return fmt.Sprint(port)
	}
	tb.Fatalf("no free port in %d–%d on 127.0.0.1", lo, hi-1)
	return ""
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks checks every relative link of the README and docs/: the file it names
// exists, and so does the heading its #anchor names, as GitHub makes anchors of headings.
func TestDocsLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		inCode := false
		for _, l := range strings.Split(readDoc(t, path), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inCode = !inCode
			}
			if _, h := headingOf(l); !inCode && h != "" {
				a[githubAnchor(h)] = true
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range docFiles(t) {
		inCode := false
		for i, l := range strings.Split(readDoc(t, f), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inCode = !inCode
			}
			if inCode {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := f
				if file != "" {
					path = filepath.ToSlash(filepath.Join(filepath.Dir(f), file))
					if _, err := os.Stat(filepath.Join(repoRoot, path)); err != nil {
						t.Errorf("%s:%d: link %s: no file %s", f, i+1, target, path)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", f, i+1, target, path, anchor)
				}
			}
		}
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower case, punctuation but - and _
// dropped, spaces made -.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("—–…’“”·×÷", r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestREADMEShape checks what a reader meets first: a README of at most 200 lines, the first
// slow_query curl and every toggle within its first 80, a link to every page of docs/, and
// the two commands as .ci/run finds them.
func TestREADMEShape(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(readDoc(t, "README.md"), "\n"), "\n")
	if len(lines) > 200 {
		t.Errorf("README.md has %d lines; want at most 200 (the rest goes to docs/)", len(lines))
	}
	first := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "curl ") && strings.Contains(l, "/storage_service/slow_query")
	})
	if first < 0 || first >= 80 {
		t.Errorf("README.md's first curl of /storage_service/slow_query is on line %d; want it within the first 80", first+1)
	}
	toggles := slices.Index(lines, "## Toggles")
	end := -1
	if toggles >= 0 {
		for _, b := range shBlocks("README.md", strings.Join(lines, "\n")) {
			if b.line > toggles {
				end = b.line + len(b.lines) // the closing fence, 1-based
				break
			}
		}
	}
	if end < 0 || end > 80 {
		t.Errorf("README.md's toggles block ends on line %d; want every toggle within the first 80 lines", end)
	}
	// Every page of docs/ is linked from the README's documentation list (issue 59: audit.md
	// and scylla.md were not).
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	list := docSection(t, "README.md", "## Documentation")
	for _, p := range pages {
		if link := "](docs/" + filepath.Base(p) + ")"; !strings.Contains(list, link) {
			t.Errorf("README.md's documentation list does not link docs/%s", filepath.Base(p))
		}
	}
	for _, want := range []string{
		"go run ./cmd/tracecar loadcheck   # the main job",
		"go test -race ./...               # the whole test suite",
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("README.md has no line starting %q", want)
		}
	}
}

// TestDocsServicesRunFromABinary: a long-running service in the README or docs/ (the
// sidecar, the node) runs from a built binary, never from `go run`: a SIGTERM to the PID
// that `go run` prints stops the go tool, and the service lives on, orphaned (issue 47,
// finding 10). The one-shot main job, `go run ./cmd/tracecar loadcheck`, stays.
func TestDocsServicesRunFromABinary(t *testing.T) {
	service := regexp.MustCompile(`go run (\./cmd/tracecar|github\.com/tracecar/tracecar/cmd/tracecar)\S*\s+(sidecar|node)\b`)
	for _, doc := range docFiles(t) {
		for i, line := range strings.Split(readDoc(t, doc), "\n") {
			if service.MatchString(line) {
				t.Errorf("%s:%d: %q starts a service with go run; build it (go build -o tracecar ./cmd/tracecar) and run ./tracecar", doc, i+1, line)
			}
		}
	}
}
