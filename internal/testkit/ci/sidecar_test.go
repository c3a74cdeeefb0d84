package ci_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxMethods is the most methods a type of the proxy may have: a type with more does
// several things, which its methods' files should say as types of their own.
const maxMethods = 40

// sidecarDir is the proxy's folder, from this package's.
const sidecarDir = "../../../sidecar"

// parseDir parses the product files of the package in dir (tests excluded) that build on
// this system, with their comments.
func parseDir(t *testing.T, dir string) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	fset := token.NewFileSet()
	files := make(map[string]*ast.File)
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return fset, files
}

// receiver returns the name of the type of a method's receiver, or "" for a function.
func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	x := fd.Recv.List[0].Type
	if s, ok := x.(*ast.StarExpr); ok {
		x = s.X
	}
	if ix, ok := x.(*ast.IndexExpr); ok {
		x = ix.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// TestSidecarTypesAreSmall: no type of package sidecar, or of its packages, has more than
// maxMethods methods, counted in its method set (of the pointer, value and pointer
// receivers together) as the type checker sees it, so that the methods of an embedded
// type count as the embedder's: sidecar.conn had 110, the pipeline, both transports, the
// end and the handover in one, and later declared 29 but answered to 74 through the
// pipeline.Conn it embedded.
func TestSidecarTypesAreSmall(t *testing.T) {
	seen := 0
	for _, p := range listPackages(t) {
		if p.ImportPath != module+"sidecar" && !strings.HasPrefix(p.ImportPath, module+"sidecar/") {
			continue
		}
		seen++
		_, _, pkg, _ := typeCheck(t, p.Dir, p.ImportPath)
		for typ, n := range methodCounts(pkg) {
			if n > maxMethods {
				t.Errorf("%s: type %s has %d methods, embedded ones counted; want at most %d: split what it does into types of their own, or hold a part as a named field rather than embed it", p.ImportPath, typ, n, maxMethods)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("found %d packages of the sidecar: the list is not being read", seen)
	}
}

// methodCounts returns, for each type declared at the package level of pkg, the number of
// methods that answer to a value of it: the method set of its pointer (of the interface
// itself for an interface), promoted methods of embedded fields included.
func methodCounts(pkg *types.Package) map[string]int {
	count := make(map[string]int)
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		typ := tn.Type()
		if !types.IsInterface(typ) {
			typ = types.NewPointer(typ)
		}
		count[name] = types.NewMethodSet(typ).Len()
	}
	return count
}

// The pipeline (package sidecar/internal/pipeline) is the per-frame work on one connection's
// protocol state; the transports (package sidecar: the event loop, the goroutine path,
// v5's segments) own the bytes, the sockets and the framing, and call it. Where a frame
// changes the framing, the pipeline returns that effect for the transport to apply. Being
// its own package, it cannot name a transport's field; transportImports are the packages
// through which it could reach a socket, a file or the handover, none of which it may import.
const pipelinePkg = module + "sidecar/internal/pipeline"

var transportImports = []string{"net", "os", "syscall", "crypto/tls", "golang.org/x/sys/unix", module + "sidecar", module + "sidecar/handover", module + "sidecar/idlepark"}

// TestPipelineNamesNoTransport: package sidecar/internal/pipeline imports no package of sockets,
// files or the handover, and no package of the module imports the transports' package
// from below (TestHandoverPointsOneWay checks the sidecar's own subpackages); its
// declarations are type-checked, so that a socket type reached through another package is
// caught too.
func TestPipelineNamesNoTransport(t *testing.T) {
	var found bool
	for _, p := range listPackages(t) {
		if p.ImportPath != pipelinePkg {
			continue
		}
		found = true
		for _, imp := range p.Imports {
			for _, banned := range transportImports {
				if imp == banned {
					t.Errorf("%s imports %s: the pipeline touches no socket, file or handover; return an effect for the transport to apply", p.ImportPath, imp)
				}
			}
		}
	}
	if !found {
		t.Fatalf("no package %s", pipelinePkg)
	}
	fset, files, _, info := typeCheck(t, filepath.Join(sidecarDir, "internal", "pipeline"), pipelinePkg)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			if obj := info.Uses[id]; obj != nil && obj.Pkg() != nil {
				for _, banned := range transportImports {
					if obj.Pkg().Path() == banned {
						t.Errorf("%s: names %s.%s: the pipeline touches no socket, file or handover", fset.Position(id.Pos()), banned, id.Name)
					}
				}
			}
			return true
		})
	}
}

// typeCheck parses and type-checks the product files of the package in dir, whose import
// path is path, against the export data of its dependencies (go list -export).
func typeCheck(t *testing.T, dir, path string) (*token.FileSet, map[string]*ast.File, *types.Package, *types.Info) {
	t.Helper()
	return typeCheckWith(t, exportData(t, path), dir, path)
}

// exportData returns the files of export data of the packages patterns name and their
// dependencies, by import path (go list -export -deps, which builds them).
func exportData(t *testing.T, patterns ...string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[p] = file
		}
	}
	return exports
}

// typeCheckWith is typeCheck with the export data of the dependencies given.
func typeCheckWith(t *testing.T, exports map[string]string, dir, path string) (*token.FileSet, map[string]*ast.File, *types.Package, *types.Info) {
	t.Helper()
	fset, files := parseDir(t, dir)
	imp := importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
		file, ok := exports[p]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(file)
	})
	list := make([]*ast.File, 0, len(files))
	for _, f := range files {
		list = append(list, f)
	}
	info := &types.Info{Selections: make(map[*ast.SelectorExpr]*types.Selection), Uses: make(map[*ast.Ident]types.Object)}
	pkg, err := (&types.Config{Importer: imp}).Check(path, fset, list, info)
	if err != nil {
		t.Fatalf("type-check %s: %v", path, err)
	}
	return fset, files, pkg, info
}

func exprString(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	case *ast.CallExpr:
		return exprString(x.Fun) + "(…)"
	}
	return "…"
}

// TestHandoverPointsOneWay: the proxy imports its handover, never the other way: package
// handover declares what it needs of the proxy (Source, Conn, Sink), as package idlepark
// does (Parkable), so that the per-frame code reaches no handover through an interface,
// and the handover can be read, and tested, without the proxy.
func TestHandoverPointsOneWay(t *testing.T) {
	for _, p := range listPackages(t) {
		if !strings.HasPrefix(p.ImportPath, module+"sidecar/") {
			continue
		}
		for _, imp := range p.Imports {
			if imp == module+"sidecar" {
				t.Errorf("%s imports %s: the arrow points from the proxy to its parts", p.ImportPath, imp)
			}
		}
	}
}

// TestSidecarFilesPointDown: the files of package sidecar form layers (listed from the
// ground up in sidecar/doc.go, "Layers"): a file points at another when it names one of
// its package-level declarations (a type, a function or method, a variable, a constant,
// or a field of a struct type declared there), and no file points back up at a file that
// points at it, directly or through others. So the file graph has no cycle; a cycle is
// printed, with the names each file takes from the next. The connection's core (conn.go)
// reaches its transport only through its carrier, the transports reach the Proxy only
// through connEnv, and the Proxy is on top.
func TestSidecarFilesPointDown(t *testing.T) {
	fset, files, pkg, info := typeCheck(t, sidecarDir, module+"sidecar")
	graph := fileGraph(fset, files, pkg, info)
	if len(graph) < 10 {
		t.Fatalf("only %d files of package sidecar point at others: the graph is not being read", len(graph))
	}
	for _, scc := range stronglyConnected(graph) {
		if len(scc) > 1 {
			t.Errorf("%d files of package sidecar point at each other, around the cycle\n\t%s\nA file points at a file above it: move the declaration it needs down (or the code that needs it up), or reach the layer above through a func field or an interface set from there (see \"Layers\" in sidecar/doc.go)",
				len(scc), strings.Join(cycleIn(graph, scc), "\n\t"))
		}
	}
}

// fileGraph returns, for each file of the package that names a package-level declaration of
// another of its files, those files, with the names.
func fileGraph(fset *token.FileSet, files map[string]*ast.File, pkg *types.Package, info *types.Info) map[string]map[string][]string {
	graph := make(map[string]map[string][]string)
	seen := make(map[[3]string]bool)
	for name, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := info.Uses[id]
			if obj == nil || obj.Pkg() != pkg || !packageLevel(obj, pkg) {
				return true
			}
			to := filepath.Base(fset.Position(obj.Pos()).Filename)
			if _, ok := files[to]; !ok || to == name || seen[[3]string{name, to, obj.Name()}] {
				return true
			}
			seen[[3]string{name, to, obj.Name()}] = true
			if graph[name] == nil {
				graph[name] = make(map[string][]string)
			}
			graph[name][to] = append(graph[name][to], obj.Name())
			return true
		})
	}
	return graph
}

// packageLevel reports whether obj is declared at package level, or is a method or a
// field (of a type declared at package level: a local type's are in its function's file).
func packageLevel(obj types.Object, pkg *types.Package) bool {
	switch o := obj.(type) {
	case *types.Var:
		return o.IsField() || o.Parent() == pkg.Scope()
	case *types.Func:
		return o.Parent() == pkg.Scope() || o.Signature().Recv() != nil
	case *types.TypeName, *types.Const:
		return o.Parent() == pkg.Scope()
	}
	return false
}

// stronglyConnected returns the strongly connected components of graph (Tarjan's
// algorithm), in a fixed order.
func stronglyConnected(graph map[string]map[string][]string) [][]string {
	var nodes []string
	for a := range graph {
		nodes = append(nodes, a)
	}
	sort.Strings(nodes)
	index, low, onStack := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var sccs [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		var next []string
		for w := range graph[v] {
			next = append(next, w)
		}
		sort.Strings(next)
		for _, w := range next {
			if _, ok := index[w]; !ok {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			sort.Strings(scc)
			sccs = append(sccs, scc)
		}
	}
	for _, v := range nodes {
		if _, ok := index[v]; !ok {
			visit(v)
		}
	}
	return sccs
}

// cycleIn returns a shortest cycle through the first file of scc, a strongly connected
// component of graph, as lines "a.go -> b.go [the names a.go takes from b.go]".
func cycleIn(graph map[string]map[string][]string, scc []string) []string {
	in := make(map[string]bool)
	for _, v := range scc {
		in[v] = true
	}
	start := scc[0]
	prev := map[string]string{}
	queue := []string{start}
	for len(queue) > 0 && prev[start] == "" {
		v := queue[0]
		queue = queue[1:]
		var next []string
		for w := range graph[v] {
			next = append(next, w)
		}
		sort.Strings(next)
		for _, w := range next {
			if _, ok := prev[w]; !ok && in[w] {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	var path []string
	for v := start; ; {
		p := prev[v]
		names := append([]string(nil), graph[p][v]...)
		sort.Strings(names)
		path = append([]string{fmt.Sprintf("%s -> %s %v", p, v, names)}, path...)
		v = p
		if v == start {
			break
		}
	}
	return path
}
