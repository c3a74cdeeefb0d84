package admin

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fill sets every exported field of the value v points to, recursively, to a value that
// is not its zero (distinct per field, so that a field moved to another's name shows), so
// that a conversion which loses a field, or a shape that drops one, writes other JSON.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		switch v.Addr().Interface().(type) {
		case *time.Time:
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, *n*1000, time.UTC)))
			return
		case *netip.Prefix:
			v.Set(reflect.ValueOf(netip.MustParsePrefix("10.0.0.0/8")))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), n)
		fill(v.Index(1), n)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), n)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	}
}

// filled returns a T with every exported field set (fill).
func filled[T any]() T {
	var v T
	n := 0
	fill(reflect.ValueOf(&v).Elem(), &n)
	return v
}

// sameJSON checks that the engine's value and its shape in package adminapi write the
// same bytes, for a value with every field set and for the zero value: the shape holds
// every field the engine's type writes, with the same names, order and omission, so that
// the API's JSON is what it was when the server wrote the engine's types.
func sameJSON[E, S any](t *testing.T, name string, conv func(E) S) {
	t.Helper()
	var zero E
	for _, e := range []E{filled[E](), zero} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(conv(e))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the API's shape writes\n%s\nthe engine's type\n%s", name, got, want)
		}
	}
}

// TestShapesWriteWhatTheEngineWrote: each conversion of an engine's value into its shape
// in adminapi writes the bytes the engine's own type writes. A field added to the engine's
// type and not to the shape (or not copied) fails here.
func TestShapesWriteWhatTheEngineWrote(t *testing.T) {
	sameJSON(t, "tracing.Session", sessionOf)
	sameJSON(t, "[]tracing.Session", sessionsOf)
	sameJSON(t, "[]statements.Statement", statementsOf)
	sameJSON(t, "guardrail.Status", guardrailOf)
	sameJSON(t, "capture.Status", captureOf)
	sameJSON(t, "audit.Status", auditOf)
	sameJSON(t, "tracing.Filter", filterOf)
}

// bodyWriters are the functions of this package allowed to write a body or JSON other
// than through writeJSON, and why.
var bodyWriters = map[string]string{
	"writeJSON":   "writes every JSON body, a shape of package adminapi",
	"getMetrics":  "writes /metrics in the Prometheus text format, not JSON",
	"ExportState": "writes the toggles' timers for a handover, not an answer of the API",
}

// TestBodiesAreShapes: the API writes its JSON bodies only through writeJSON, which takes
// only a shape of package adminapi, so that no JSON shape of the API is declared outside
// adminapi. A call that writes a body or encodes JSON anywhere else fails here, with the
// function's name.
func TestBodiesAreShapes(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]bool{"SetBody": true, "SetBodyString": true, "SetBodyStream": true, "AppendBody": true,
		"AppendBodyString": true, "SetBodyRaw": true, "Marshal": true, "MarshalIndent": true, "NewEncoder": true, "Write": true}
	for _, f := range pkgs["admin"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if ok && writes[sel.Sel.Name] && bodyWriters[fd.Name.Name] == "" {
					t.Errorf("%s: %s calls %s: write JSON bodies with writeJSON and a shape of adminapi", fset.Position(call.Pos()), fd.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
