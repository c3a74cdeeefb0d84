package ci_test

import (
	"go/types"
	"os/exec"
	"strings"
	"testing"
)

// TestAdminClientsImportNoEngine: tracecar ctl and the API's shapes (admin/adminapi) read
// the admin API through the shapes declared in adminapi, never the engine's types: no
// package of tracing/ (nor the server, admin) is among their dependencies.
func TestAdminClientsImportNoEngine(t *testing.T) {
	for _, pkg := range []string{"admin/ctl", "admin/adminapi"} {
		out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if r := strings.TrimPrefix(dep, module); r == "tracing" || strings.HasPrefix(r, "tracing/") || r == "admin" {
				t.Errorf("%s depends on %s: read the admin API through the shapes of admin/adminapi", pkg, dep)
			}
		}
	}
}

// adminDirs are the admin API's packages, from this package's folder.
var adminDirs = map[string]string{module + "admin": "../../../admin", module + "admin/adminapi": "../../../admin/adminapi", module + "admin/ctl": "../../../admin/ctl"}

// TestAdminTypesAreSmall: no type of the admin API's packages has more than maxMethods
// methods, those it gets from the types it embeds counted (its pointer's method set):
// admin.Server had 60, every endpoint's handler on it; its handlers are grouped by concern
// in types that hold what they need.
func TestAdminTypesAreSmall(t *testing.T) {
	for path, dir := range adminDirs {
		_, _, pkg, _ := typeCheck(t, dir, path)
		for _, name := range pkg.Scope().Names() {
			tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			if _, isIface := tn.Type().Underlying().(*types.Interface); isIface {
				continue
			}
			if n := types.NewMethodSet(types.NewPointer(tn.Type())).Len(); n > maxMethods {
				t.Errorf("%s.%s has %d methods, embedded ones counted; want at most %d: split it by concern", path, name, n, maxMethods)
			}
		}
	}
}
