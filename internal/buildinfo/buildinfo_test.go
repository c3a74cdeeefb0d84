package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Version == "" {
		t.Errorf("Read() = %+v; want this Go's version and a version", i)
	}
	s := i.String()
	if !strings.HasPrefix(s, "tracecar "+i.Version) || !strings.HasSuffix(s, runtime.Version()) {
		t.Errorf("String() = %q", s)
	}
}

func TestString(t *testing.T) {
	for _, tt := range []struct {
		i    Info
		want string
	}{
		{Info{Version: "v1.2.3", GoVersion: "go1.26.8"}, "tracecar v1.2.3 go1.26.8"},
		{Info{Version: "(devel)", Revision: "0123456789abcdef0123", Time: "2026-12-06T15:00:00Z", Modified: true, GoVersion: "go1.26.8"},
			"tracecar (devel) (revision 0123456789ab, modified, 2026-12-06T15:00:00Z) go1.26.8"},
	} {
		if got := tt.i.String(); got != tt.want {
			t.Errorf("%+v: %q; want %q", tt.i, got, tt.want)
		}
	}
}
