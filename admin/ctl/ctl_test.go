package ctl_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/admin/ctl"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
)

// mustAdmin serves a live admin API on 127.0.0.1:0 until the test ends and returns its
// base URL and tracer. The command line is tested in cmd/tracecar.
func mustAdmin(tb testing.TB) (string, *tracing.Tracer) {
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
	s := admin.New(admin.Config{Tracer: tr, Loggers: reg})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		tr.Close(context.Background())
	})
	return "http://" + ln.Addr().String(), tr
}

func TestRun(t *testing.T) {
	a, tra := mustAdmin(t)
	b, trb := mustAdmin(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()

	var out bytes.Buffer
	cfg := ctl.Config{Hosts: []string{a, dead, b}, Command: ctl.Command{Name: ctl.SlowQuery,
		Change: url.Values{"enable": {"true"}, "fast": {"true"}, "threshold": {"200000"}}}}
	err := ctl.Run(context.Background(), cfg, &out)
	if !errors.Is(err, ctl.ErrHostFailed) {
		t.Errorf("Run = %v; want ErrHostFailed for the dead host", err)
	}
	for _, tr := range []*tracing.Tracer{tra, trb} {
		if c := tr.Config(); !c.Enable || !c.Fast || c.ThresholdMicros != 200000 {
			t.Errorf("a live host has %+v; want fast mode on", c)
		}
	}
	if !strings.Contains(out.String(), "enable=true fast=true threshold=200ms") {
		t.Errorf("table lacks the read-back state:\n%s", out.String())
	}

	out.Reset()
	err = ctl.Run(context.Background(), ctl.Config{Hosts: []string{a}, Command: ctl.Command{Name: ctl.Status}}, &out)
	if err != nil || !strings.Contains(out.String(), "mode=fast") {
		t.Errorf("status: %v\n%s", err, out.String())
	}
	out.Reset()
	err = ctl.Run(context.Background(), ctl.Config{Hosts: []string{a, dead}, Command: ctl.Command{Name: ctl.Ready}}, &out)
	if !errors.Is(err, ctl.ErrHostFailed) || !strings.Contains(out.String(), "ready") {
		t.Errorf("ready with a dead host: %v\n%s", err, out.String())
	}
	if err := ctl.Run(context.Background(), ctl.Config{Hosts: []string{a}, Command: ctl.Command{Name: ctl.Ready}}, io.Discard); err != nil {
		t.Errorf("ready: %v", err)
	}
	if err := ctl.Run(context.Background(), ctl.Config{Hosts: []string{a}, Command: ctl.Command{Name: "drain"}}, io.Discard); err == nil {
		t.Error("Run accepted an unknown command")
	}
}
