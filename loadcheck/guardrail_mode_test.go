package loadcheck

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/guardrail"
)

// TestGuardrailModeRestored applies the built-in guardrail mode to a real admin API with a
// runtime guardrail, and checks that the restore after its runs puts the budget (and the
// tracing configuration) back exactly.
func TestGuardrailModeRestored(t *testing.T) {
	tr := tracing.New(tracing.Options{})
	gc := guardrail.NewController(guardrail.Config{Tracer: tr, Source: guardrail.SourceFunc(func() guardrail.Sample { return guardrail.Sample{} })})
	initial := guardrail.Budget{AddedP99: 750 * time.Microsecond, DropsPerSec: 12.5, Window: 3 * time.Second, Cooldown: 45 * time.Second, Restore: true}
	if err := gc.SetBudget(initial); err != nil {
		t.Fatal(err)
	}
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := admin.New(admin.Config{Tracer: gc.User(tr), Loggers: reg, GuardrailControl: gc})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()

	c := newAPIClient(&Config{Admin: "http://" + ln.Addr().String()})
	steps, err := parseSpec(builtinModes["guardrail"])
	if err != nil {
		t.Fatal(err)
	}
	m := &mode{name: "guardrail", steps: steps}
	st, notes, err := c.snapshot(context.Background(), []*mode{m})
	if err != nil || len(notes) != 0 {
		t.Fatalf("snapshot: %v, notes %q; want every step restorable", err, notes)
	}
	beforeCfg := tr.Config()
	if err := c.apply(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if b := gc.Budget(); b.CPUPercent != 2 || b.Window != time.Second || tr.Config().Mode() != "full" {
		t.Fatalf("after the mode: budget %+v, mode %s; want the tight budget and full mode", b, tr.Config().Mode())
	}
	if err := c.restore(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if got := gc.Budget(); got != initial {
		t.Errorf("restored budget %+v; want %+v", got, initial)
	}
	if got := tr.Config(); got != beforeCfg {
		t.Errorf("restored config %+v; want %+v", got, beforeCfg)
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/tracecar/guardrail")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"added_p99":"750µs"`) {
		t.Errorf("GET /tracecar/guardrail = %s; want the initial budget", b)
	}
}
