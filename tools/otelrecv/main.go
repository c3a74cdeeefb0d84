// Command otelrecv runs the OpenTelemetry Collector's own OTLP receiver (otlpreceiver) with
// gRPC only, on a free loopback port, and writes every span it receives to stdout as one
// JSON line: {"service":…,"name":…,"kind":…,"attributes":{…},"events":[…]}. Its first line
// is "listening ADDR", once the receiver accepts connections. The tests use it to prove
// that tracecar's gRPC exporter talks to a real collector.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

type span struct {
	Service    string         `json:"service"`
	Name       string         `json:"name"`
	Kind       string         `json:"kind"`
	Attributes map[string]any `json:"attributes"`
	Events     []event        `json:"events"`
}

type event struct {
	Name       string         `json:"name"`
	TimeUnixNS int64          `json:"time_unix_ns"`
	Attributes map[string]any `json:"attributes"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "otelrecv:", err)
		os.Exit(1)
	}
}

// freePort returns a loopback port that was free a moment ago: the receiver binds its own
// listener from an address, so the port is chosen here and the bind is retried.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	sink, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range td.ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out := span{Service: svc.AsString(), Name: sp.Name(), Kind: sp.Kind().String(), Attributes: sp.Attributes().AsRaw()}
					for _, e := range sp.Events().All() {
						out.Events = append(out.Events, event{Name: e.Name(), TimeUnixNS: int64(e.Timestamp()), Attributes: e.Attributes().AsRaw()})
					}
					if err := enc.Encode(out); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	f := otlpreceiver.NewFactory()
	var lastErr error
	for try := 0; try < 5; try++ {
		addr, err := freePort()
		if err != nil {
			return err
		}
		cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
		cfg.HTTP = configoptional.None[otlpreceiver.HTTPConfig]()
		g := cfg.GRPC.GetOrInsertDefault()
		g.NetAddr.Endpoint = addr
		cfg.GRPC = configoptional.Some(*g)
		r, err := f.CreateTraces(ctx, receivertest.NewNopSettings(f.Type()), cfg, sink)
		if err != nil {
			return err
		}
		if err := r.Start(ctx, componenttest.NewNopHost()); err != nil {
			lastErr = err
			continue
		}
		mu.Lock()
		fmt.Printf("listening %s\n", addr)
		mu.Unlock()
		<-ctx.Done()
		return r.Shutdown(context.Background())
	}
	return fmt.Errorf("start the OTLP receiver: %w", lastErr)
}
