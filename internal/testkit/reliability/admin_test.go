package reliability

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// TestAdminTogglesDuringLoad flips the tracing configuration 1,000 times through the admin
// API, between two complete configurations and the logger levels, while a driver runs load
// through the sidecar. Run under -race: no race, every configuration read is one of the
// two written (never a mix), and no request fails.
func TestAdminTogglesDuringLoad(t *testing.T) {
	const toggles = 1000
	n := startNode(t, node.Config{})
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	tr := tracing.New(tracing.Options{SlowLog: reg.Logger(logs.SlowLog)})
	t.Cleanup(func() { tr.Close(t.Context()) })
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr, Logger: reg.Logger(logs.Sidecar)}, tr)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := admin.New(admin.Config{Addr: ln.Addr().String(), Tracer: tr, Loggers: reg})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + ln.Addr().String()

	configs := []tracing.Config{
		{Enable: true, Fast: true, ThresholdMicros: 1000, TTLSeconds: 100},
		{Enable: true, Fast: false, ThresholdMicros: 0, TTLSeconds: 200},
	}
	initial := tr.Config()
	var torn atomic.Int64
	var tornSeen atomic.Pointer[tracing.Config]
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			c := tr.Config()
			if c != initial && c != configs[0] && c != configs[1] {
				torn.Add(1)
				tornSeen.CompareAndSwap(nil, &c)
			}
		}
	}()

	s := session(t, sc.addr)
	probe := startProber(s)
	client := &http.Client{}
	for i := range toggles {
		c := configs[i%2]
		url := fmt.Sprintf("%s/storage_service/slow_query?enable=%t&fast=%t&threshold=%d&ttl=%d", base, c.Enable, c.Fast, c.ThresholdMicros, c.TTLSeconds)
		if i%10 == 9 {
			url = base + "/system/logger/sidecar?level=" + []string{"debug", "info"}[i/10%2]
		}
		resp, err := client.Post(url, "", nil)
		if err != nil {
			t.Fatalf("toggle %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("toggle %d: %s: status %d", i, url, resp.StatusCode)
		}
	}
	probe.finish(t)
	close(stopWatch)
	<-watched
	t.Logf("FIGURE admin toggles: %d toggles (900 slow_query, 100 logger levels) during load; driver requests %d ok, %d failed; torn configurations seen: %d; sessions recorded %d",
		toggles, probe.ok.Load(), probe.failed.Load(), torn.Load(), tr.Stats().SlowSessions)
	if c := tornSeen.Load(); c != nil {
		t.Errorf("a reader saw a torn configuration %+v %d times", *c, torn.Load())
	}
	// The last toggle sets a logger level; the one before, number 998, configs[0].
	if got := tr.Config(); got != configs[0] {
		t.Errorf("final configuration %+v, want %+v", got, configs[0])
	}
}
