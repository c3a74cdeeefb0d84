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

// maxFuncLines is the most lines a function of the rooms below may take, from func to its
// closing brace (issue 40).
const maxFuncLines = 80

// shortFuncRooms are the folders, from the module's root, whose product code (not their
// tests), in every file whatever system it builds on, keeps every function within
// maxFuncLines.
var shortFuncRooms = []string{"cmd", "sidecar"}

// TestFunctionsAreShort: no function of the rooms in shortFuncRooms is over maxFuncLines
// lines, so that each reads whole.
func TestFunctionsAreShort(t *testing.T) {
	for _, room := range shortFuncRooms {
		for _, f := range longFuncs(t, filepath.Join("..", "..", "..", room), maxFuncLines) {
			t.Errorf("%s: %d lines; want at most %d (split it by concern)", f.name, f.lines, maxFuncLines)
		}
	}
}

// longFunc is a function over the limit.
type longFunc struct {
	name  string // path:line Func or path:line Type.Method
	lines int
}

// longFuncs returns the functions of the Go files under dir, tests aside, that are over max
// lines.
func longFuncs(t *testing.T, dir string, max int) []longFunc {
	t.Helper()
	var long []longFunc
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
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
				long = append(long, longFunc{name: funcName(path, start.Line, fd), lines: n})
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
	name := fd.Name.Name
	if fd.Recv != nil && len(fd.Recv.List) > 0 {
		typ := fd.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok {
			name = id.Name + "." + name
		}
	}
	return filepath.ToSlash(path) + ":" + strconv.Itoa(line) + " " + name
}
