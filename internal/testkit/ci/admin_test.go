package ci_test

import (
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
