package ci_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// fileName is a name of one of the repository's files as a comment or a doc writes it: a
// Go, shell, Markdown or deployment file, with or without its folders.
var fileName = regexp.MustCompile("(?:^|[\\s(`'\"\\[])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+(?:\\.[a-z0-9]+)*\\.(?:go|sh|md|service|conf))(?:$|[\\s)`'\",.:;\\]#])")

// elsewhere are the names that comments and docs give to files that are not the
// repository's: the node's own, a driver's, or one that the reader makes.
var elsewhere = map[string]bool{
	"README.md":            true, // every module's; the repository's is checked as a path
	"DESIGN.md":            true, // the project's contracts, kept beside the repository
	"cpu-per-op.sh":        true, // the benchmark kept beside the repository (../shared/bench)
	"BENCHMARKS.md":        true, // latte's
	"application.conf":     true, // the Java driver's configuration
	"docs/db/cassandra.md": true, // OpenTelemetry's semantic conventions
}

// TestNamedFilesExist: every file that a comment of the Go code, a page of docs/ or the
// README names exists (issue 59: comments named protocol.go, pipeline.go and env.go long
// after they were gone). A bare name, such as "conn.go", is looked for in the folder of the
// file that names it, then anywhere in the repository; a path, from that folder or one
// above it. Test files are not read: their comments name their fixtures.
func TestNamedFilesExist(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	base := map[string]bool{}
	var texts []string // Go files and Markdown files, from the root
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "tools" || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		base[d.Name()] = true
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".md") && (rel == "README.md" || strings.HasPrefix(rel, "docs/")) {
			texts = append(texts, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(root, p)); return err == nil }
	// under reports whether path names a file from the root or from dir or a folder above it.
	under := func(dir, path string) bool {
		for {
			if exists(filepath.Join(dir, path)) {
				return true
			}
			if dir == "." {
				return false
			}
			dir = filepath.Dir(dir)
		}
	}
	var missing []string
	for _, rel := range texts {
		var text []string
		if strings.HasSuffix(rel, ".go") {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, cg := range f.Comments {
				text = append(text, cg.Text())
			}
		} else {
			b, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			text = append(text, string(b))
		}
		dir := filepath.Dir(rel)
		for _, s := range text {
			for _, m := range fileName.FindAllStringSubmatch(s, -1) {
				name := strings.TrimPrefix(m[1], "./")
				switch {
				case elsewhere[name], strings.HasPrefix(name, "../"): // outside the repository
				case !strings.Contains(name, "/"):
					if !exists(filepath.Join(dir, name)) && !base[name] {
						missing = append(missing, rel+": "+name)
					}
				case !under(dir, name):
					missing = append(missing, rel+": "+name)
				}
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s names a file that does not exist", m)
	}
}
