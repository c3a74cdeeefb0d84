package ci_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tracecar/tracecar/"

// goPackage is what `go list -json` says of a package that this test reads.
type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// listPackages returns every package of the module, as `go list ./...` sees them.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "github.com/tracecar/tracecar/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// room returns the top folder of a package of the module.
func room(path string) string {
	r, _, _ := strings.Cut(strings.TrimPrefix(path, module), "/")
	return r
}

// TestLayoutShowsTheRooms: outside internal/ and cmd/ there are only the product's four
// rooms and the audit log, and the imports of product code point one way: no test helper
// is imported by product code, nothing under internal/ imports a room, tracing imports
// neither the transport nor the API, the API and the load checker not the transport, and
// the audit log (which the transport and the API write to) imports no room.
func TestLayoutShowsTheRooms(t *testing.T) {
	rooms := map[string]bool{"sidecar": true, "tracing": true, "admin": true, "loadcheck": true, "cmd": true, "internal": true, "audit": true}
	// may[r] lists the rooms that room r may import, besides internal/ and itself.
	may := map[string][]string{
		"cmd":       {"sidecar", "tracing", "admin", "loadcheck", "audit"},
		"sidecar":   {"tracing", "audit"},
		"admin":     {"tracing", "audit"},
		"audit":     nil,
		"loadcheck": {"admin"}, // admin/adminapi, the client it shares with ctl
		"tracing":   nil,
		"internal":  nil,
	}
	for _, p := range listPackages(t) {
		r := room(p.ImportPath)
		if !rooms[r] {
			t.Errorf("package %s is outside the rooms (sidecar, tracing, admin, loadcheck, audit) and internal/, cmd/", p.ImportPath)
			continue
		}
		testkit := strings.HasPrefix(p.ImportPath, module+"internal/testkit/")
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			ir := room(imp)
			switch {
			case strings.HasPrefix(imp, module+"internal/testkit/") && !testkit:
				t.Errorf("product package %s imports the test helper %s", p.ImportPath, imp)
			case testkit || ir == r || ir == "internal":
			case !contains(may[r], ir):
				t.Errorf("%s imports %s: an arrow from %s/ to %s/ points the wrong way", p.ImportPath, imp, r, ir)
			}
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
