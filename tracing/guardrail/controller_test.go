package guardrail

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tracecar/tracecar/tracing"
)

// countingSource counts the samples taken: Run takes one per window it evaluates.
type countingSource struct{ n *atomic.Int64 }

func (s countingSource) Sample() Sample { s.n.Add(1); return Sample{} }

// TestRunSleepsWithoutABudget checks that Run wakes no idle sidecar while no budget is set,
// and evaluates once per window once one is: an hour of the bubble's clock without a
// budget takes no sample (it took 360, one per 10 s window, before), and a budget with a
// 1 s window takes one a second.
func TestRunSleepsWithoutABudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		tr := tracing.New(tracing.Options{})
		c := NewController(Config{Tracer: tr, Source: countingSource{&n}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.Run(ctx); close(done) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := n.Load(); got != 0 {
			t.Fatalf("an hour without a budget took %d samples; want 0 (no timer while there is nothing to guard)", got)
		}
		if err := c.SetBudget(Budget{CPUPercent: 5, Window: time.Second}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		n.Store(0)
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if got := n.Load(); got != 10 {
			t.Fatalf("10 s with a 1 s window took %d samples; want 10", got)
		}
		if err := c.SetBudget(Budget{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		n.Store(0)
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := n.Load(); got != 0 {
			t.Fatalf("an hour after the budget was removed took %d samples; want 0", got)
		}
		cancel()
		<-done
	})
}
