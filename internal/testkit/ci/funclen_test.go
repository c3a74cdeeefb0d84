package ci_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a function of the product may take, from func to its
// closing brace (issues 40 and 60).
const maxFuncLines = 80

// productRoot is the module's root, from this package's folder; the product is every Go
// file under it but tests, testdata and tools/ (the OpenTelemetry backends the tests build,
// each a module of its own).
const productRoot = "../../.."

// longFuncsAllowed are the product's functions still over maxFuncLines, as "folder Func" or
// "folder Type.Method", with their length when listed: each is to be split by concern, and
// then taken off the list (the test fails while a listed function is short, or gone, so
// that the list only shrinks); none may grow. It is empty: every function is short.
var longFuncsAllowed = map[string]int{}

// TestFunctionsAreShort: no function of the product is over maxFuncLines lines, so that
// each reads whole, but those listed in longFuncsAllowed, which may not grow.
func TestFunctionsAreShort(t *testing.T) {
	long := make(map[string]bool)
	for _, f := range longFuncs(t, productRoot, maxFuncLines) {
		key := f.dir + " " + f.fn
		long[key] = true
		switch allowed, ok := longFuncsAllowed[key]; {
		case !ok:
			t.Errorf("%s: %d lines; want at most %d (split it by concern)", f.name, f.lines, maxFuncLines)
		case f.lines > allowed:
			t.Errorf("%s: %d lines, %d when listed in longFuncsAllowed; it may only shrink", f.name, f.lines, allowed)
		}
	}
	if len(longFuncs(t, productRoot, 0)) < 1000 {
		t.Fatal("fewer than 1000 functions found: the tree is not being read")
	}
	for key := range longFuncsAllowed {
		if !long[key] {
			t.Errorf("%s is in longFuncsAllowed but no longer over %d lines: take it off the list", key, maxFuncLines)
		}
	}
}

// longFunc is a function over the limit.
type longFunc struct {
	name  string // path:line Func or path:line Type.Method
	dir   string // its folder, from dir
	fn    string // Func or Type.Method
	lines int
}

// longFuncs returns the functions of the Go files under dir, tests aside, that are over max
// lines.
func longFuncs(t *testing.T, dir string, max int) []longFunc {
	t.Helper()
	var long []longFunc
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && (d.Name() == "testdata" || d.Name() == "tools" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > max {
				rel, _ := filepath.Rel(dir, filepath.Dir(path))
				long = append(long, longFunc{name: funcName(path, start.Line, fd), dir: filepath.ToSlash(rel), fn: funcKey(fd), lines: n})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return long
}

func funcName(path string, line int, fd *ast.FuncDecl) string {
	return filepath.ToSlash(path) + ":" + strconv.Itoa(line) + " " + funcKey(fd)
}

// funcKey is Func, or Type.Method.
func funcKey(fd *ast.FuncDecl) string {
	if r := receiver(fd); r != "" {
		return r + "." + fd.Name.Name
	}
	return fd.Name.Name
}
