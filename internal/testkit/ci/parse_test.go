package ci_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// readersOfParameters are the names in package cql by which code reads <query_parameters>
// or a BATCH body on its own: the flags that say which fields follow, and the decoders
// that walk them; decoderMethods are the cql.Decoder methods that read them.
var (
	readersOfParameters = map[string]bool{
		"QueryValues": true, "QueryPageSize": true, "QueryPagingState": true, "QuerySerialConsistency": true,
		"QueryNamedValues": true, "QueryDefaultTimestamp": true, "QueryWithKeyspace": true, "QueryNowInSeconds": true,
		"DecodeQuery": true, "DecodeExecute": true, "DecodeExecuteInto": true, "DecodeBatch": true,
	}
	decoderMethods = map[string]bool{"QueryFlags": true, "QueryParams": true}
)

// TestRequestParsedInCQLOnly: the product code of tracing/ and sidecar/ reads a request's
// parameters and a BATCH only through cql.Frame.Request, the one reader (issue 40): none
// of its files names a query flag or a decoder of parameters. A reader written again
// (the capture's reader of v5's [int] flags as a byte was one) fails it.
func TestRequestParsedInCQLOnly(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, dir := range []string{"tracing", "sidecar"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			ast.Inspect(f, func(n ast.Node) bool {
				var name string
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "cql" && readersOfParameters[n.Sel.Name] {
						name = "cql." + n.Sel.Name
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && decoderMethods[sel.Sel.Name] {
						name = sel.Sel.Name + "()"
					}
				}
				if name != "" {
					t.Errorf("%s:%d: %s reads a request's parameters itself; read them from cql.Frame.Request",
						rel, fset.Position(n.Pos()).Line, name)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readersOfResponses are the names in package cql by which code reads a response's message
// on its own rather than through cql.Frame.Response (or Frame.Result).
var readersOfResponses = map[string]bool{
	"RowsCount": true, "RowsPage": true, "ReadPrepared": true, "SkipResponsePrefix": true,
	"DecodeResult": true, "DecodeError": true,
}

// TestResponseReadInCQLOnly: the product code of tracing/ and sidecar/ reads a response
// (an ERROR's code, a RESULT's kind, rows, prepared id) only through cql.Frame.Response,
// which reads it once for every reader (issue 59): none of its files names a reader of a
// response's message, and none of tracing/ and sidecar/internal/pipeline/ reads the wire's numbers
// with encoding/binary's BigEndian.
func TestResponseReadInCQLOnly(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, dir := range []string{"tracing", "sidecar"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			bigEndianBanned := dir == "tracing" || strings.HasPrefix(filepath.ToSlash(rel), "sidecar/internal/pipeline/")
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				switch {
				case !ok:
				case x.Name == "cql" && readersOfResponses[sel.Sel.Name]:
					t.Errorf("%s:%d: cql.%s reads a response itself; read it from cql.Frame.Response",
						rel, fset.Position(n.Pos()).Line, sel.Sel.Name)
				case x.Name == "binary" && sel.Sel.Name == "BigEndian" && bigEndianBanned:
					t.Errorf("%s:%d: binary.BigEndian reads the wire by hand; read it through internal/cql",
						rel, fset.Position(n.Pos()).Line)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
