package ctl_test

import (
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

// TestTraceFilter sets the filter on two sidecars, shows it, refuses a bad CIDR on both,
// and clears it.
func TestTraceFilter(t *testing.T) {
	var hosts []string
	var tracers []*tracing.Tracer
	for i := 0; i < 2; i++ {
		reg, err := logs.New(logs.Config{Writer: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		tr := tracing.New(tracing.Options{})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := admin.New(admin.Config{Tracer: tr, Loggers: reg, TraceFilter: tr})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		t.Cleanup(func() { cancel(); <-done; tr.Close(context.Background()) })
		hosts = append(hosts, "http://"+ln.Addr().String())
		tracers = append(tracers, tr)
	}
	run := func(cmd ctl.Command) (string, error) {
		var out strings.Builder
		err := ctl.Run(context.Background(), ctl.Config{Hosts: hosts, Command: cmd}, &out)
		return out.String(), err
	}
	out, err := run(ctl.Command{Name: ctl.TraceFilter, Change: url.Values{"table": {"t1"}, "client": {"10.0.0.0/8"}}})
	if err != nil || strings.Count(out, "client=10.0.0.0/8 table=t1") != 2 {
		t.Fatalf("set: %v\n%s", err, out)
	}
	for _, tr := range tracers {
		if f := tr.Filter(); f.Table != "t1" || f.Client.String() != "10.0.0.0/8" {
			t.Errorf("filter %+v", f)
		}
	}
	out, err = run(ctl.Command{Name: ctl.TraceFilter, Change: url.Values{"client": {"10.0.0.300"}}})
	if !errors.Is(err, ctl.ErrHostFailed) || strings.Count(out, "bad client") != 2 {
		t.Errorf("bad CIDR: %v\n%s", err, out)
	}
	out, err = run(ctl.Command{Name: ctl.TraceFilter, Clear: true})
	if err != nil || strings.Count(out, "no filter") != 2 || !tracers[0].Filter().IsZero() || !tracers[1].Filter().IsZero() {
		t.Errorf("clear: %v\n%s", err, out)
	}
}
