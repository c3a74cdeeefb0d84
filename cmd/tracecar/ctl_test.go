package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
)

// sidecar is a live admin API with a real tracer and logger registry.
type ctlSidecar struct {
	addr string
	tr   *tracing.Tracer
	logs *logs.Registry
}

// mustSidecar serves an admin API on 127.0.0.1:0 until the test ends.
func mustCtlSidecar(tb testing.TB, token string) *ctlSidecar {
	tb.Helper()
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	tr := tracing.New(tracing.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := admin.New(admin.Config{Token: token, Tracer: tr, Loggers: reg})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		tr.Close(context.Background())
	})
	return &ctlSidecar{addr: ln.Addr().String(), tr: tr, logs: reg}
}

// deadAddr returns a loopback address where nothing listens.
func ctlDeadAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// run runs ctl and returns its exit code, stdout and stderr.
func runCtlArgs(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"ctl"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// row returns the table row of host, or "".
func ctlRow(out, host string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, host+" ") {
			return l
		}
	}
	return ""
}

// TestFanOutOneDown applies a change to three hosts, one of which is down: the two live
// ones get it, the dead one is reported, and the exit code is 1.
func TestCtlFanOutOneDown(t *testing.T) {
	a, b := mustCtlSidecar(t, ""), mustCtlSidecar(t, "")
	dead := ctlDeadAddr(t)
	code, out, errOut := runCtlArgs("--hosts", a.addr+","+dead+","+b.addr,
		"slow-query", "--enable", "--fast", "--threshold", "200ms", "--ttl", "1h")
	if code != 1 {
		t.Fatalf("exit %d; want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	want := tracing.Config{Enable: true, Fast: true, ThresholdMicros: 200000, TTLSeconds: 3600}
	for _, s := range []*ctlSidecar{a, b} {
		if got := s.tr.Config(); got != want {
			t.Errorf("%s config %+v; want %+v", s.addr, got, want)
		}
		if r := ctlRow(out, s.addr); !strings.Contains(r, " ok ") || !strings.Contains(r, "enable=true fast=true threshold=200ms ttl=1h0m0s") {
			t.Errorf("row of %s = %q; want ok with the new settings", s.addr, r)
		}
	}
	if r := ctlRow(out, dead); !strings.Contains(r, " error ") || !strings.Contains(r, "refused") {
		t.Errorf("row of dead host = %q; want error, connection refused", r)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "HOST") || !strings.HasPrefix(lines[1], a.addr) ||
		!strings.HasPrefix(lines[2], dead) || !strings.HasPrefix(lines[3], b.addr) {
		t.Errorf("table not one header and a row per host, in --hosts order:\n%s", out)
	}
}

// TestCommands runs each command against two live hosts.
func TestCtlCommands(t *testing.T) {
	a, b := mustCtlSidecar(t, ""), mustCtlSidecar(t, "")
	hosts := a.addr + "," + b.addr
	tests := []struct {
		name    string
		args    []string
		wantOut string                     // in every host's row
		check   func(s *ctlSidecar) string // "" when the host's state is right
	}{
		{"show slow-query", []string{"slow-query"}, "enable=false fast=false threshold=500ms ttl=24h0m0s", nil},
		{"full mode", []string{"slow-query", "--enable", "--full"}, "enable=true fast=false", func(s *ctlSidecar) string {
			if c := s.tr.Config(); !c.Enable || c.Fast || c.ThresholdMicros != 500000 {
				return "config " + c.Mode()
			}
			return ""
		}},
		{"disable, flags after the command", []string{"slow-query", "--hosts", hosts, "--disable"}, "enable=false", func(s *ctlSidecar) string {
			if s.tr.Config().Enable {
				return "still enabled"
			}
			return ""
		}},
		{"threshold 0", []string{"slow-query", "--threshold", "0s"}, "threshold=0s", nil},
		{"set probability", []string{"trace-probability", "0.25"}, "probability=0.25", func(s *ctlSidecar) string {
			if p := s.tr.Config().Probability; p != 0.25 {
				return "probability wrong"
			}
			return ""
		}},
		{"show probability", []string{"trace-probability"}, "probability=0.25", nil},
		{"set logger", []string{"logger", "sidecar", "DEBUG"}, "sidecar=debug", func(s *ctlSidecar) string {
			if l, _ := s.logs.Level("sidecar"); l != "debug" {
				return "level " + l
			}
			return ""
		}},
		{"show logger", []string{"logger", "sidecar"}, "sidecar=debug", nil},
		{"show all loggers", []string{"logger"}, "sidecar=debug tracing=info", nil},
		{"status", []string{"status"}, "mode=sampled requests=0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCtlArgs(append([]string{"--hosts", hosts}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for _, s := range []*ctlSidecar{a, b} {
				if r := ctlRow(out, s.addr); !strings.Contains(r, " ok ") || !strings.Contains(r, tt.wantOut) {
					t.Errorf("row of %s = %q; want ok and %q", s.addr, r, tt.wantOut)
				}
				if tt.check != nil {
					if msg := tt.check(s); msg != "" {
						t.Errorf("%s: %s", s.addr, msg)
					}
				}
			}
		})
	}
}

// TestUsage checks that bad command lines exit 2 with a message, and change nothing.
func TestCtlUsage(t *testing.T) {
	s := mustCtlSidecar(t, "")
	tests := []struct {
		name  string
		args  []string
		inErr string
	}{
		{"no command", nil, "no command"},
		{"unknown command", []string{"drain"}, `unknown command "drain"`},
		{"enable and disable", []string{"slow-query", "--enable", "--disable"}, "contradict"},
		{"fast and full", []string{"slow-query", "--fast", "--full"}, "contradict"},
		{"threshold not a duration", []string{"slow-query", "--enable", "--threshold", "abc"}, "--threshold"},
		{"threshold without unit", []string{"slow-query", "--threshold", "500"}, "such as 500ms"},
		{"negative ttl", []string{"slow-query", "--ttl", "-1h"}, "--ttl"},
		{"ttl below a second", []string{"slow-query", "--ttl", "1500ms"}, "whole seconds"},
		{"slow-query argument", []string{"slow-query", "on"}, "only flags"},
		{"unknown flag", []string{"slow-query", "--turbo"}, "turbo"},
		{"probability 1.5", []string{"trace-probability", "1.5"}, "from 0 to 1"},
		{"probability words", []string{"trace-probability", "half"}, "from 0 to 1"},
		{"two probabilities", []string{"trace-probability", "0.1", "0.2"}, "one number"},
		{"level loud", []string{"logger", "sidecar", "loud"}, "error, warn, info, debug, trace"},
		{"logger extra", []string{"logger", "a", "debug", "x"}, "NAME and LEVEL"},
		{"status argument", []string{"status", "now"}, "no arguments"},
		{"for not a duration", []string{"slow-query", "--enable", "--for", "abc"}, "--for"},
		{"for 0", []string{"trace-probability", "0.1", "--for", "0"}, "more than 0"},
		{"for over a week", []string{"logger", "sidecar", "debug", "--for", "169h"}, "168h"},
		{"for without a change", []string{"slow-query", "--for", "10m"}, "needs a change"},
		{"for on a shown filter", []string{"trace-filter", "--for", "10m"}, "needs a change"},
		{"statements sort", []string{"statements", "--sort", "slowest"}, "--sort"},
		{"statements limit", []string{"statements", "--limit", "0"}, "--limit"},
		{"trace-filter clear and table", []string{"trace-filter", "--clear", "--table", "t"}, "--clear takes no filter flags"},
		{"trace-filter argument", []string{"trace-filter", "t1"}, "only flags"},
		{"empty hosts", []string{"--hosts", " , ", "status"}, "--hosts is empty"},
		{"bad host", []string{"--hosts", "ftp://x:1", "status"}, "not host:port"},
		{"host with path", []string{"--hosts", "http://x:1/api", "status"}, "not host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.tr.Config()
			args := tt.args
			if len(args) == 0 || args[0] != "--hosts" {
				args = append([]string{"--hosts", s.addr}, args...)
			}
			code, out, errOut := runCtlArgs(args...)
			if code != 2 {
				t.Fatalf("exit %d; want 2\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if !strings.Contains(errOut, tt.inErr) || !strings.Contains(errOut, "usage: tracecar ctl") {
				t.Errorf("stderr %q; want %q and the usage", errOut, tt.inErr)
			}
			if out != "" {
				t.Errorf("stdout %q; want nothing", out)
			}
			if got := s.tr.Config(); got != before {
				t.Errorf("config changed to %+v", got)
			}
		})
	}
}

// TestServerRefusal shows the API's message when a host refuses a change.
func TestCtlServerRefusal(t *testing.T) {
	s := mustCtlSidecar(t, "")
	code, out, _ := runCtlArgs("--hosts", s.addr, "logger", "nope", "debug")
	if code != 1 || !strings.Contains(ctlRow(out, s.addr), "HTTP 400: unknown logger \"nope\"") {
		t.Errorf("exit %d, out:\n%s\nwant 1 and the API's message", code, out)
	}
}

func TestCtlToken(t *testing.T) {
	s := mustCtlSidecar(t, "tok")
	tests := []struct {
		name     string
		env      string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"no token", "", nil, 1, "HTTP 401"},
		{"wrong token", "", []string{"--token", "nope"}, 1, "HTTP 401"},
		{"right token", "", []string{"--token", "tok"}, 0, "enable=true"},
		{"token from the environment", "tok", nil, 0, "enable=true"},
		{"flag beats the environment", "tok", []string{"--token", "nope"}, 1, "HTTP 401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TRACECAR_ADMIN_TOKEN", tt.env)
			args := append(append([]string{"--hosts", s.addr}, tt.args...), "slow-query", "--enable")
			code, out, errOut := runCtlArgs(args...)
			if code != tt.wantCode || !strings.Contains(ctlRow(out, s.addr), tt.wantOut) {
				t.Errorf("exit %d, out:\n%s%s\nwant %d and %q", code, out, errOut, tt.wantCode, tt.wantOut)
			}
		})
	}
}
