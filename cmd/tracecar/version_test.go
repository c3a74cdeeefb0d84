package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
)

// TestVersion: `tracecar version` and `tracecar --version` print the version, the VCS
// revision the binary was built from and the Go version, from the build info of a binary
// built as a user builds it; /tracecar/status, `ctl status` and the tracecar_build_info
// metric name the same build (issue 47, finding 5).
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "tracecar")
	build := exec.Command("go", "build", "-o", bin, ".")
	// As a user's checkout builds it: the revision stamped when the source is a git
	// checkout (this machine's GOFLAGS may turn stamping off).
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var rev string
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))[:12]
	}
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		line := strings.TrimSpace(string(out))
		if err != nil || !strings.HasPrefix(line, "tracecar ") || !strings.HasSuffix(line, runtime.Version()) {
			t.Errorf("tracecar %s: %q, %v; want tracecar VERSION … %s", arg, line, err, runtime.Version())
		}
		if rev != "" && !strings.Contains(line, "(revision "+rev) {
			t.Errorf("tracecar %s: %q; want revision %s (git rev-parse HEAD)", arg, line, rev)
		}
	}
	if err := exec.Command(bin, "version", "extra").Run(); err == nil {
		t.Errorf("tracecar version extra: exit 0; want a usage error")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage {
		t.Errorf("tracecar version extra: %v; want exit %d", err, exitUsage)
	}

	st := mustStack(t, stackConfig{})
	resp, err := http.Get(st.Admin + "/tracecar/status")
	if err != nil {
		t.Fatal(err)
	}
	var status admin.Status
	err = json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if err != nil || status.Process == nil || status.Process.Build.GoVersion != runtime.Version() || status.Process.Build.Version == "" {
		t.Fatalf("/tracecar/status process %+v (%v); want its build", status.Process, err)
	}
	series := scrape(t, st.Admin, "tracecar_build_info")
	found := false
	for labels, v := range series {
		found = found || v == 1 && strings.Contains(labels, `goversion="`+runtime.Version()+`"`)
	}
	if !found {
		t.Errorf("tracecar_build_info: %v; want 1 with goversion=%q", series, runtime.Version())
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"ctl", "--hosts", strings.TrimPrefix(st.Admin, "http://"), "status"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), " go="+runtime.Version()) || !strings.Contains(out.String(), " version=") {
		t.Errorf("ctl status: exit %d, %q %q; want version= and go=%s", code, out.String(), errOut.String(), runtime.Version())
	}
}
