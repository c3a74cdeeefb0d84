// Package buildinfo tells which tracecar this is: its module version, the VCS revision it
// was built from, and the Go version that built it, as the Go toolchain records them in
// the binary.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is a build's identity. Fields the build did not record are "" (a binary built
// outside a VCS checkout has no revision; `go run` reports the version "(devel)").
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`     // the revision's commit time, RFC 3339
	Modified  bool   `json:"modified,omitempty"` // the checkout had uncommitted changes
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's Info. It is safe for concurrent use.
func Read() Info {
	i := Info{Version: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// ShortRevision returns the first 12 digits of the revision, or "".
func (i Info) ShortRevision() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}

// String is the one line `tracecar version` prints: "tracecar VERSION (revision REV[,
// modified], TIME) GOVERSION".
func (i Info) String() string {
	s := "tracecar " + i.Version
	if i.Revision != "" {
		s += " (revision " + i.ShortRevision()
		if i.Modified {
			s += ", modified"
		}
		if i.Time != "" {
			s += ", " + i.Time
		}
		s += ")"
	}
	return s + " " + i.GoVersion
}
