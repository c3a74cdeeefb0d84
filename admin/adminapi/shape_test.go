package adminapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// shapes are the types the server writes, one value of each. The list is checked both
// ways against the types that declare the Shape method.
var shapes = []Shape{
	Health{}, ErrorBody{}, Loggers{}, Level(""), NodeStates{}, Queries{}, LoggerLevels{}, SlowQuery{},
	Status{}, TraceContext{}, TraceFloor{}, StatementStats{}, Statements{}, Session{}, Sessions{},
	TraceFilter{}, Guardrail{}, Capture{}, Audit{}, Probability(0),
}

// shapeMethods returns the receivers of the shape methods declared in this package's
// files.
func shapeMethods(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range pkgs["adminapi"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "shape" {
				continue
			}
			if id, ok := fd.Recv.List[0].Type.(*ast.Ident); ok {
				out = append(out, id.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestShapesAreDeclaredHere: every type the server writes is a Shape (admin's writeJSON
// takes nothing else), and every type a Shape holds, down to its leaves, is declared in
// this package: a struct declared elsewhere (an engine's type with its own json tags)
// fails, but for time.Time and netip.Prefix, which write themselves as text.
func TestShapesAreDeclaredHere(t *testing.T) {
	var listed []string
	for _, s := range shapes {
		listed = append(listed, reflect.TypeOf(s).Name())
	}
	slices.Sort(listed)
	if declared := shapeMethods(t); !slices.Equal(listed, declared) {
		t.Errorf("the shapes listed here are %v, those declared (func (T) shape()) %v: want the same", listed, declared)
	}
	here := reflect.TypeOf(Status{}).PkgPath()
	allowed := map[string]bool{"time.Time": true, "netip.Prefix": true}
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(typ.Elem(), path+"[]")
		case reflect.Map:
			walk(typ.Key(), path+"{key}")
			walk(typ.Elem(), path+"{}")
		case reflect.Struct:
			if allowed[typ.String()] {
				return
			}
			if typ.Name() != "" && typ.PkgPath() != here {
				t.Errorf("%s is %s, a struct declared in %s: the API's shapes are declared in %s", path, typ, typ.PkgPath(), here)
				return
			}
			for i := 0; i < typ.NumField(); i++ {
				if f := typ.Field(i); f.IsExported() {
					walk(f.Type, path+"."+f.Name)
				}
			}
		case reflect.Interface:
			t.Errorf("%s is an interface: a shape is concrete, so that its JSON is known", path)
		}
	}
	for _, s := range shapes {
		walk(reflect.TypeOf(s), reflect.TypeOf(s).Name())
	}
}
