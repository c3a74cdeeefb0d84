package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/sidecar/handover"
)

func TestHandoverFlags(t *testing.T) {
	long := "/" + strings.Repeat("x", 120)
	tests := []struct {
		name     string
		flags    handoverFlags
		listen   string
		node     string
		wantPath string
		wantErr  string
	}{
		{name: "default from --listen", listen: "127.0.0.1:9043", node: "n:9042", wantPath: handover.DefaultControlPath("127.0.0.1:9043")},
		{name: "port 0: named after the port bound, later", listen: "127.0.0.1:0", node: "n:9042"},
		{name: "explicit", flags: handoverFlags{controlSocket: "/run/t.sock", takeover: true}, listen: "127.0.0.1:0", node: "n:9042", wantPath: "/run/t.sock"},
		{name: "none", flags: handoverFlags{controlSocket: "none"}, listen: "127.0.0.1:9043"},
		{name: "takeover with none", flags: handoverFlags{controlSocket: "none", takeover: true}, listen: "127.0.0.1:9043", node: "n:9042", wantErr: "needs a --control-socket"},
		{name: "takeover of an embedded node", flags: handoverFlags{takeover: true}, listen: "127.0.0.1:9043", wantErr: "needs --node"},
		{name: "takeover on port 0", flags: handoverFlags{takeover: true}, listen: "127.0.0.1:0", node: "n:9042", wantErr: "needs --control-socket"},
		{name: "too long", flags: handoverFlags{controlSocket: long}, listen: "127.0.0.1:9043", wantErr: "at most 107 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := stackConfig{Listen: tt.listen, Node: tt.node}
			err := tt.flags.check(&cfg)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("check: %v; want a usage error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || cfg.controlSocket != tt.wantPath {
				t.Errorf("check: %q, %v; want %q", cfg.controlSocket, err, tt.wantPath)
			}
		})
	}
	if got := handover.DefaultControlPath("[::1]:9043"); !strings.HasSuffix(got, "tracecar-__1-9043.sock") {
		t.Errorf("handover.DefaultControlPath([::1]:9043) = %q; want …/tracecar-__1-9043.sock", got)
	}
}

func TestConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sidecar.conf")
	os.WriteFile(path, []byte("# comment\n\nlog-format json\n--drain-timeout=3s\nstatement-stats\nlisten 127.0.0.1:1\n"), 0o600)
	fs := newFlagSet("sidecar", &strings.Builder{})
	format := fs.String("log-format", "console", "")
	drain := fs.Duration("drain-timeout", 0, "")
	stats := fs.Bool("statement-stats", false, "")
	listen := fs.String("listen", "", "")
	cf, err := parseSidecarFlags(fs, []string{"--config", path, "--listen", "127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	if *format != "json" || drain.String() != "3s" || !*stats || *listen != "127.0.0.1:2" {
		t.Errorf("format %q, drain %v, stats %v, listen %q; want the file's, and the command line's listen", *format, *drain, *stats, *listen)
	}
	if !cf.cmdline["listen"] || cf.cmdline["log-format"] {
		t.Errorf("command line flags %v; want listen (and config) only", cf.cmdline)
	}
	os.WriteFile(path, []byte("nope 1\n"), 0o600)
	if _, err := parseSidecarFlags(newFlagSet("sidecar", &strings.Builder{}), []string{"--config=" + path}); err == nil || !errors.Is(err, errUsage) {
		t.Errorf("unknown flag in the file: %v; want a usage error", err)
	}
}
