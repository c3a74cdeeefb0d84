package ci_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// counterparts are the programs (and the variables naming programs) that a test runs but a
// fresh machine may lack: the drivers' interpreters, the daemons and tools .ci/run installs,
// the backends it builds. A test that names one must first check it through drivertest
// (Require*, Run*, Missing), so that it skips with its reason where it is absent, and fails
// only under TRACECAR_REQUIRE_DRIVERS, as in CI.
var counterparts = map[string]bool{
	"node": true, "npm": true, "python3": true, "java": true, "javac": true, "chromium": true, "tmux": true,
	"buildah": true, "rsyslogd": true, "haproxy": true, "prometheus": true, "promtool": true,
	"TRACECAR_JAEGER": true, "TRACECAR_OTELRECV": true,
}

// isCounterpart says whether s names a counterpart, by its path or its name alone.
func isCounterpart(s string) bool {
	return counterparts[s] || strings.HasPrefix(s, "/") && counterparts[filepath.Base(s)]
}

// TestDriverTestsCheckCounterparts: every place in the module's Go files (drivertest
// excepted, which holds the checks) that passes a counterpart's name to a call is behind
// one of drivertest's checks: a call to it earlier in the same function or in one enclosing
// it, or, for a helper, at every place the helper is called. A test that runs `node`
// without drivertest.RequireNodeJS fails a fresh machine's `go test ./...` instead of
// skipping (as TestAuditDrivers/nodejs did); this test names it.
func TestDriverTestsCheckCounterparts(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "tools", ".git", "drivertest":
				return filepath.SkipDir
			}
			return nil
		}
		// This file names the variable it looks for.
		if strings.HasSuffix(path, ".go") && d.Name() != "counterparts_test.go" {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, files := range dirs {
		srcs := map[string][]byte{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			srcs[f] = b
		}
		bypasses, err := uncheckedCounterparts(srcs)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, bypasses...)
	}
	sort.Strings(all)
	for _, b := range all {
		t.Errorf("%s", b)
	}
	if len(all) > 0 {
		t.Log("check the counterpart first with drivertest (RequireTool, RequirePython, RequireNodeJS, RequireNodeModules, RequirePythonModules, RequireEnvTool, Missing)")
	}
}

// TestCounterpartCheckFindsBypasses holds the check above to the defects it is for: the
// former TestAuditDrivers (its nodejs case ran node with no check), a helper that runs
// Python called from a test that checks nothing, and a sibling case's check that does not
// cover another case; and it passes their checked forms.
func TestCounterpartCheckFindsBypasses(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string // the names of the functions reported, in order
	}{
		{"the former TestAuditDrivers", `package p
func TestAuditDrivers(t *testing.T) {
	for _, drv := range []struct{ name string; run func(t *testing.T, env []string) }{
		{"python", func(t *testing.T, env []string) { runDriver(t, env, drivertest.Python, drivertest.ScriptPath("audit_workload.py")) }},
		{"nodejs", func(t *testing.T, env []string) { runDriver(t, env, "node", drivertest.ScriptPath("audit_workload.js")) }},
	} {
		t.Run(drv.name, func(t *testing.T) { drv.run(t, nil) })
	}
}
func runDriver(t *testing.T, env []string, name string, args ...string) { exec.Command(name, args...).Run() }
`, []string{"TestAuditDrivers", "TestAuditDrivers"}},
		{"one case checked, the other not", `package p
func TestAuditDrivers(t *testing.T) {
	for _, drv := range []struct{ name string; run func(t *testing.T, env []string) }{
		{"python", func(t *testing.T, env []string) { drivertest.RequirePython(t); runDriver(t, env, drivertest.Python, "a.py") }},
		{"nodejs", func(t *testing.T, env []string) { runDriver(t, env, "node", "a.js") }},
	} {
		t.Run(drv.name, func(t *testing.T) { drv.run(t, nil) })
	}
}
func runDriver(t *testing.T, env []string, name string, args ...string) { exec.Command(name, args...).Run() }
`, []string{"TestAuditDrivers"}},
		{"a helper called unchecked", `package p
const python = "/usr/bin/python3"
func mustRead(t *testing.T) { exec.Command(python, "-c", "import cassandra").Run() }
func TestChecked(t *testing.T) { drivertest.RequirePython(t); mustRead(t) }
func TestUnchecked(t *testing.T) { mustRead(t) }
`, []string{"mustRead"}},
		{"a check after the run", `package p
func TestLate(t *testing.T) { exec.Command("tmux", "ls").Run(); drivertest.RequireTool(t, "tmux", "tmux") }
`, []string{"TestLate"}},
		{"an own check instead of drivertest's", `package p
func requireProm(t *testing.T) string {
	p, err := exec.LookPath("prometheus")
	if err != nil { t.Skip("no prometheus") }
	return p
}
func TestProm(t *testing.T) { exec.Command(requireProm(t)).Run() }
`, []string{"requireProm"}},
		{"a check by hand", `package p
func requireProm(t *testing.T) string {
	p, err := exec.LookPath("/usr/bin/prometheus")
	if err != nil {
		if os.Getenv("TRACECAR_REQUIRE_DRIVERS") != "" { t.Fatal("no prometheus") }
		t.Skip("no prometheus")
	}
	return p
}
`, []string{"requireProm:", "requireProm"}},
		{"checked", `package p
const python = "/usr/bin/python3"
func mustRead(t *testing.T) { exec.Command(python, "-c", "import cassandra").Run() }
func requireNode(t *testing.T) { drivertest.RequireNodeModules(t, "cassandra-driver") }
func TestA(t *testing.T) {
	drivertest.RequirePython(t)
	mustRead(t)
	t.Run("node", func(t *testing.T) { requireNode(t); exec.Command("node", "a.js").Run() })
}
func TestB(t *testing.T) { bin := drivertest.RequireEnvTool(t, "TRACECAR_JAEGER", "Jaeger"); exec.Command(bin).Run() }
`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := uncheckedCounterparts(map[string][]byte{"p_test.go": []byte(c.src)})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, g := range got {
				_, after, _ := strings.Cut(g, " in ")
				name, _, _ := strings.Cut(after, " ")
				names = append(names, name)
			}
			if fmt.Sprint(names) != fmt.Sprint(c.want) {
				t.Errorf("reported %q; want the functions %q", got, c.want)
			}
		})
	}
}

// uncheckedCounterparts returns, for one package's files, each counterpart named outside
// any check, as "file:line: <name> in <function> ...".
func uncheckedCounterparts(srcs map[string][]byte) ([]string, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	names := make([]string, 0, len(srcs))
	for name := range srcs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, srcs[name], 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	p := &pkgScan{fset: fset, decls: map[string][]*ast.FuncDecl{}, consts: map[string]string{}}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				p.decls[d.Name.Name] = append(p.decls[d.Name.Name], d)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, v := range vs.Values {
						if s, ok := stringLit(v); ok && isCounterpart(s) && i < len(vs.Names) {
							p.consts[vs.Names[i].Name] = s
						}
					}
				}
			}
		}
	}
	// Local variables naming a counterpart count as constants do, by name.
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
				for i, r := range as.Rhs {
					if s, ok := stringLit(r); ok && isCounterpart(s) {
						if id, ok := as.Lhs[i].(*ast.Ident); ok {
							p.consts[id.Name] = s
						}
					}
				}
			}
			return true
		})
	}
	p.findRunners()
	p.findGuards()
	for _, f := range files {
		p.scanFile(f)
	}
	var out []string
	// A check written by hand (reading TRACECAR_REQUIRE_DRIVERS) is one drivertest's checks
	// do not hold to their messages, nor this test to its place.
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := stringLit(asExpr(n)); ok && s == "TRACECAR_REQUIRE_DRIVERS" {
				pos := fset.Position(n.Pos())
				out = append(out, fmt.Sprintf("%s:%d: %q in %s: a check by hand, not drivertest's", pos.Filename, pos.Line, s, enclosingFunc(f, n.Pos())))
			}
			return true
		})
	}
	for _, m := range p.mentions {
		if !p.guarded(m, map[*ast.FuncDecl]bool{}) {
			fn := "(package level)"
			if m.decl != nil {
				fn = m.decl.Name.Name
			}
			pos := fset.Position(m.pos)
			out = append(out, fmt.Sprintf("%s:%d: %q in %s is run with no drivertest check before it", pos.Filename, pos.Line, m.what, fn))
		}
	}
	return out, nil
}

// pkgScan is one package's functions, counterpart constants, checks and mentions.
type pkgScan struct {
	fset     *token.FileSet
	decls    map[string][]*ast.FuncDecl // by name: functions and methods alike
	consts   map[string]string          // package constants naming a counterpart
	guards   map[*ast.FuncDecl]bool     // functions that call a check
	runners  map[string]int             // functions that run the program a parameter names: its index
	calls    []site                     // every call of a function of the package
	checks   []site                     // every call of a check
	mentions []site                     // every counterpart named in a call's arguments
}

// site is a place in a function: the function declared and the function literals around it,
// innermost last.
type site struct {
	pos   token.Pos
	what  string // the counterpart, or the function called
	decl  *ast.FuncDecl
	funcs []ast.Node // the FuncDecl, then the FuncLits enclosing the site
}

func asExpr(n ast.Node) ast.Expr {
	e, _ := n.(ast.Expr)
	return e
}

// enclosingFunc is the name of the function of f declared around pos.
func enclosingFunc(f *ast.File, pos token.Pos) string {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Pos() <= pos && pos < fd.End() {
			return fd.Name.Name
		}
	}
	return "(package level)"
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// isDrivertestCheck says whether call is one of drivertest's checks (or a function of it
// that checks before it runs: Run*, Python*).
func isDrivertestCheck(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "drivertest" {
		return false
	}
	n := sel.Sel.Name
	return strings.HasPrefix(n, "Require") || strings.HasPrefix(n, "Run") || strings.HasPrefix(n, "Python") || n == "Missing"
}

// calledName is the name of the function or method call calls, if the package declares it.
func (p *pkgScan) calledName(call *ast.CallExpr) string {
	var n string
	switch f := call.Fun.(type) {
	case *ast.Ident:
		n = f.Name
	case *ast.SelectorExpr:
		n = f.Sel.Name
	}
	if _, ok := p.decls[n]; ok {
		return n
	}
	return ""
}

// execCall names the call if it is exec.Command, exec.CommandContext, exec.LookPath,
// os.Getenv or os.LookupEnv, and returns the argument that names the program (or variable).
func execCall(call *ast.CallExpr) ast.Expr {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return nil
	}
	i := -1
	switch x.Name + "." + sel.Sel.Name {
	case "exec.Command", "exec.LookPath", "os.Getenv", "os.LookupEnv":
		i = 0
	case "exec.CommandContext":
		i = 1
	}
	if i < 0 || len(call.Args) <= i {
		return nil
	}
	return call.Args[i]
}

// programArgs returns the arguments of call that name a program it runs: exec's, or any of a
// runner's.
func (p *pkgScan) programArgs(call *ast.CallExpr) []ast.Expr {
	if a := execCall(call); a != nil {
		return []ast.Expr{a}
	}
	if i, ok := p.runners[p.calledName(call)]; ok && i < len(call.Args) {
		return call.Args[i : i+1]
	}
	return nil
}

// findRunners marks the functions that pass one of their parameters to exec as the program.
func (p *pkgScan) findRunners() {
	p.runners = map[string]int{}
	for name, ds := range p.decls {
		for _, d := range ds {
			params := map[string]int{}
			for _, f := range d.Type.Params.List {
				for _, n := range f.Names {
					params[n.Name] = len(params)
				}
			}
			if d.Body == nil {
				continue
			}
			ast.Inspect(d.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := execCall(call).(*ast.Ident); ok {
						if i, ok := params[id.Name]; ok {
							p.runners[name] = i
						}
					}
				}
				return true
			})
		}
	}
}

// findGuards marks the functions that call a check, directly or through another such
// function.
func (p *pkgScan) findGuards() {
	p.guards = map[*ast.FuncDecl]bool{}
	for changed := true; changed; {
		changed = false
		for _, ds := range p.decls {
			for _, d := range ds {
				if p.guards[d] || d.Body == nil {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || p.guards[d] {
						return !p.guards[d]
					}
					if isDrivertestCheck(call) {
						p.guards[d] = true
					} else if name := p.calledName(call); name != "" {
						for _, g := range p.decls[name] {
							if p.guards[g] && g != d {
								p.guards[d] = true
							}
						}
					}
					return !p.guards[d]
				})
				changed = changed || p.guards[d]
			}
		}
	}
}

func (p *pkgScan) isCheck(call *ast.CallExpr) bool {
	if isDrivertestCheck(call) {
		return true
	}
	for _, g := range p.decls[p.calledName(call)] {
		if p.guards[g] {
			return true
		}
	}
	return false
}

// scanFile records the checks, the calls of the package's functions and the counterparts
// named in f.
func (p *pkgScan) scanFile(f *ast.File) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		var stack []ast.Node
		funcs := func() []ast.Node {
			out := []ast.Node{fd}
			for _, n := range stack {
				if _, ok := n.(*ast.FuncLit); ok {
					out = append(out, n)
				}
			}
			return out
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if p.isCheck(call) {
				p.checks = append(p.checks, site{pos: call.Pos(), decl: fd, funcs: funcs()})
			}
			if name := p.calledName(call); name != "" {
				p.calls = append(p.calls, site{pos: call.Pos(), what: name, decl: fd, funcs: funcs()})
			}
			for _, a := range p.programArgs(call) {
				what := ""
				switch a := a.(type) {
				case *ast.BasicLit:
					if s, ok := stringLit(a); ok && isCounterpart(s) {
						what = s
					}
				case *ast.Ident:
					what = p.consts[a.Name]
				case *ast.SelectorExpr:
					if x, ok := a.X.(*ast.Ident); ok && x.Name == "drivertest" && a.Sel.Name == "Python" {
						what = "drivertest.Python"
					}
				}
				if what != "" {
					p.mentions = append(p.mentions, site{pos: a.Pos(), what: what, decl: fd, funcs: funcs()})
				}
			}
			return true
		})
	}
}

// guarded says whether a check runs before the site m: earlier in a function enclosing it, or,
// at every place m's function is called (seen excepted, against recursion).
func (p *pkgScan) guarded(m site, seen map[*ast.FuncDecl]bool) bool {
	for _, c := range p.checks {
		if c.decl != m.decl || c.pos > m.pos {
			continue
		}
		// The check's innermost function must enclose m: a check in a sibling closure does
		// not cover m.
		inner := c.funcs[len(c.funcs)-1]
		for _, f := range m.funcs {
			if f == inner {
				return true
			}
		}
	}
	if seen[m.decl] {
		return false
	}
	seen[m.decl] = true
	callers := 0
	for _, c := range p.calls {
		found := false
		for _, d := range p.decls[c.what] {
			found = found || d == m.decl
		}
		if !found {
			continue
		}
		callers++
		if !p.guarded(c, seen) {
			return false
		}
	}
	return callers > 0
}
