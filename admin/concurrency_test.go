package admin_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
)

// TestConcurrentToggles has 8 goroutines POST correlated (enable, fast, threshold) triples
// while others read, and checks that the tracer never holds a triple that no single POST
// sent. It runs against the fake (which has no UpdateConfig, so the server's lock is used)
// and against the real tracing.Tracer (whose UpdateConfig is used). Run it with -race.
func TestConcurrentToggles(t *testing.T) {
	real := tracing.New(tracing.Options{})
	t.Cleanup(func() { real.Close(context.Background()) })
	fake := newFakeTracer()
	fake.check = correlated
	tracers := []struct {
		name string
		tr   admin.Tracer
	}{
		{"fake", fake},
		{"tracing.Tracer", real},
	}
	for _, tt := range tracers {
		t.Run(tt.name, func(t *testing.T) {
			f := mustServe(t, admin.Config{Tracer: tt.tr})
			const writers, posts = 8, 25
			var wg sync.WaitGroup
			var torn atomic.Int64
			stop := make(chan struct{})
			// A reader that watches the tracer's config directly, as the data path does.
			var readers sync.WaitGroup
			readers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					c := tt.tr.Config()
					if c.ThresholdMicros != tracing.DefaultThresholdMicros && correlated(c) != nil {
						torn.Add(1)
					}
					runtime.Gosched() // leave the lock to the writers
				}
			})
			for w := range writers {
				wg.Go(func() {
					for i := range posts {
						enable, fast := (w+i)%2 == 0, (w+i)%3 == 0
						c := tracing.Config{Enable: enable, Fast: fast, ThresholdMicros: int64(1000*(w*posts+i+1)) + b2i(enable)*10 + b2i(fast)}
						path := fmt.Sprintf("/storage_service/slow_query?enable=%v&fast=%v&threshold=%d", enable, fast, c.ThresholdMicros)
						if i%2 == 1 { // also toggle the probability and a logger, on the side
							do(t, client, f.url, request{method: "POST", path: "/storage_service/trace_probability", body: fmt.Sprintf("probability=0.%d", i%10)})
							do(t, client, f.url, request{method: "POST", path: "/system/logger/sidecar?level=" + admin.Levels[i%len(admin.Levels)]})
						}
						if status, body := do(t, client, f.url, request{method: "POST", path: path}); status != 200 {
							t.Errorf("%s: %d %s", path, status, body)
						}
						do(t, client, f.url, request{method: "GET", path: "/storage_service/slow_query"})
					}
				})
			}
			wg.Wait()
			close(stop)
			readers.Wait()
			if n := torn.Load(); n > 0 {
				t.Errorf("reader saw %d torn configs", n)
			}
			if err := correlated(tt.tr.Config()); err != nil {
				t.Errorf("final config: %v", err)
			}
		})
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, err := range fake.bad {
		t.Errorf("fake tracer was given: %v", err)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
