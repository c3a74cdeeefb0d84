package reliability

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/audit"
)

// TestHandoverCarriesAudit: the audit settings changed through the admin API move to the
// successor of a takeover, as the tracing settings do, and both processes write to the same
// --audit-dir, each its own files: every admin change is recorded once, by the process
// that made it, the old one's records complete (it syncs and closes its file as it stops).
func TestHandoverCarriesAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	dir := filepath.Join(t.TempDir(), "audit")
	c := startCluster(t, nil, []string{"--audit-dir", dir, "--audit-enable=false"})
	c.post(t, "/tracecar/audit?enable=true&categories=DDL,DML,ADMIN&keyspaces=shop&tables=shop.carts&exclude_users=bob")
	c.post(t, "/storage_service/trace_probability?probability=0.001")
	before := string(c.get(t, "/tracecar/audit"))
	var st audit.Status
	if err := json.Unmarshal([]byte(before), &st); err != nil {
		t.Fatal(err)
	}
	c.takeover(t)
	var after audit.Status
	if err := json.Unmarshal(c.get(t, "/tracecar/audit"), &after); err != nil {
		t.Fatal(err)
	}
	if b, a := mustJSON(t, st.View), mustJSON(t, after.View); a != b || !after.Enabled {
		t.Errorf("audit settings after the takeover: %s; want as before: %s", a, b)
	}
	c.post(t, "/storage_service/trace_probability?probability=0.002")
	c.post(t, "/tracecar/audit?enable=false")
	c.sc.stop()
	var ops []string
	files, err := audit.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r audit.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %q: %v", name, sc.Text(), err)
			}
			if r.Category == "ADMIN" {
				ops = append(ops, r.Operation)
			}
		}
		f.Close()
	}
	want := []string{
		"POST /tracecar/audit?categories=DDL,DML,ADMIN&enable=true&exclude_users=bob&keyspaces=shop&tables=shop.carts",
		"POST /storage_service/trace_probability?probability=0.001",
		"POST /storage_service/trace_probability?probability=0.002",
		"POST /tracecar/audit?enable=false",
	}
	if strings.Join(ops, "\n") != strings.Join(want, "\n") {
		t.Errorf("ADMIN records across the takeover, in %d files:\n%s\nwant each change once, in order:\n%s", len(files), strings.Join(ops, "\n"), strings.Join(want, "\n"))
	}
	if len(files) != 2 {
		t.Errorf("%d audit files; want 2, one per process", len(files))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
