package loadcheck

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// fakeClock is a virtual clock: sleeping jumps to the wake-up time, and operations advance
// it by their service time. With one worker the schedule is fully deterministic.
type fakeClock struct {
	mu sync.Mutex
	t  time.Duration
}

func (c *fakeClock) now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleepUntil(ctx context.Context, t time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t > c.t {
		c.t = t
	}
	return ctx.Err()
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t += d
	c.mu.Unlock()
}

// stallOnce returns an Op that takes 1 ms, except call number stallAt, which takes stall.
func stallOnce(clk *fakeClock, stallAt int, stall time.Duration) Op {
	n := 0
	return func(context.Context) (int, error) {
		if n == stallAt {
			clk.advance(stall)
		} else {
			clk.advance(time.Millisecond)
		}
		n++
		return 1, nil
	}
}

// countAtOrAbove counts the recorded values ≥ us.
func countAtOrAbove(h *hdrhistogram.Histogram, us int64) int64 {
	var n int64
	for _, b := range h.Distribution() {
		if b.From >= us {
			n += b.Count
		}
	}
	return n
}

func TestCoordinatedOmission(t *testing.T) {
	// 300 operations at 100 op/s on one worker; the 11th stalls for 1 s. At a fixed rate,
	// op 10 is due at 100 ms and ends at 1100 ms; the ops due at 110, 120, … ms queue
	// behind it and go out back to back, 1 ms apart, so op 10+k waits 1000−9k ms
	// (k = 1…111) before the schedule catches up. Of those, k ≤ 55 wait ≥ 500 ms: with the
	// stalled op itself, 56 response times ≥ 500 ms, but only one service time.
	// A closed loop (rate 0) never sends the queued ops late, so it sees one slow op.
	tests := []struct {
		name                 string
		rate                 float64
		wantRespSlow         int64
		wantSvcSlow          int64
		wantElapsed          time.Duration
		wantRespMaxMsAtLeast float64
	}{
		{"fixed rate", 100, 56, 1, 2991 * time.Millisecond, 999},
		{"closed loop", 0, 1, 1, 1299 * time.Millisecond, 999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{}
			res := runPhase(context.Background(), phase{clock: clk, workers: 1, rate: tt.rate, ops: 300},
				[]Op{stallOnce(clk, 10, time.Second)})
			if res.ops != 300 || res.rows != 300 || res.errs != 0 {
				t.Fatalf("ops, rows, errs = %d, %d, %d; want 300, 300, 0", res.ops, res.rows, res.errs)
			}
			if got := res.resp.TotalCount(); got != 300 {
				t.Errorf("response count = %d; want 300", got)
			}
			if got := countAtOrAbove(res.resp, 500_000); got != tt.wantRespSlow {
				t.Errorf("response times ≥ 500 ms = %d; want %d", got, tt.wantRespSlow)
			}
			if got := countAtOrAbove(res.svc, 500_000); got != tt.wantSvcSlow {
				t.Errorf("service times ≥ 500 ms = %d; want %d", got, tt.wantSvcSlow)
			}
			if res.elapsed != tt.wantElapsed {
				t.Errorf("elapsed = %v; want %v", res.elapsed, tt.wantElapsed)
			}
			if l := latencyOf(res.resp); l.MaxMs < tt.wantRespMaxMsAtLeast {
				t.Errorf("response max = %v ms; want ≥ %v", l.MaxMs, tt.wantRespMaxMsAtLeast)
			}
			if l := latencyOf(res.svc); l.P99Ms > 1.01 {
				t.Errorf("service p99 = %v ms; want 1 ms", l.P99Ms)
			}
		})
	}
}

func TestCoordinatedOmissionQueue(t *testing.T) {
	// The queued response times are exactly 1000−9k ms for k = 1…111 (to HDR precision).
	clk := &fakeClock{}
	res := runPhase(context.Background(), phase{clock: clk, workers: 1, rate: 100, ops: 300},
		[]Op{stallOnce(clk, 10, time.Second)})
	want := newHist()
	want.RecordValue(1_000_000)
	for k := int64(1); k <= 111; k++ {
		want.RecordValue((1000 - 9*k) * 1000)
	}
	want.RecordValues(1000, 300-112)
	if !res.resp.Equals(want) {
		t.Errorf("response histogram differs: got p50 %d p90 %d max %d; want p50 %d p90 %d max %d",
			res.resp.ValueAtQuantile(50), res.resp.ValueAtQuantile(90), res.resp.Max(),
			want.ValueAtQuantile(50), want.ValueAtQuantile(90), want.Max())
	}
}

func TestPhaseLimits(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		p         phase
		failEvery int
		wantOps   int64
		wantErrs  int64
		wantEl    time.Duration
	}{
		{"ops closed", phase{ops: 50}, 0, 50, 0, 50 * time.Millisecond},
		{"duration closed", phase{duration: 40 * time.Millisecond}, 0, 40, 0, 40 * time.Millisecond},
		{"duration fixed rate", phase{duration: time.Second, rate: 10}, 0, 10, 0, time.Second},
		{"errors", phase{ops: 30}, 3, 20, 10, 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{}
			n := 0
			op := func(context.Context) (int, error) {
				clk.advance(time.Millisecond)
				n++
				if tt.failEvery > 0 && n%tt.failEvery == 0 {
					return 0, errBoom
				}
				return 1, nil
			}
			p := tt.p
			p.clock, p.workers = clk, 1
			res := runPhase(context.Background(), p, []Op{op})
			if res.ops != tt.wantOps || res.errs != tt.wantErrs || res.elapsed != tt.wantEl {
				t.Errorf("ops, errs, elapsed = %d, %d, %v; want %d, %d, %v", res.ops, res.errs, res.elapsed, tt.wantOps, tt.wantErrs, tt.wantEl)
			}
			if tt.wantErrs > 0 && !errors.Is(res.firstErr, errBoom) {
				t.Errorf("firstErr = %v; want %v", res.firstErr, errBoom)
			}
		})
	}
}

func TestPhaseManyWorkers(t *testing.T) {
	// Eight workers share the operation budget exactly, on the real clock.
	ops := make([]Op, 8)
	for i := range ops {
		ops[i] = func(context.Context) (int, error) { return 2, nil }
	}
	res := runPhase(context.Background(), phase{clock: newRealClock(), workers: 8, ops: 10_000}, ops)
	if res.ops != 10_000 || res.rows != 20_000 || res.resp.TotalCount() != 10_000 {
		t.Errorf("ops, rows, count = %d, %d, %d; want 10000, 20000, 10000", res.ops, res.rows, res.resp.TotalCount())
	}
}

func TestPhaseCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	op := func(ctx context.Context) (int, error) {
		n++
		if n == 100 {
			cancel()
			return 0, ctx.Err()
		}
		return 1, nil
	}
	res := runPhase(ctx, phase{clock: newRealClock(), workers: 1, duration: time.Hour}, []Op{op})
	if res.ops != 99 || res.errs != 0 {
		t.Errorf("ops, errs = %d, %d; want 99, 0 (the cancelled op is not an error)", res.ops, res.errs)
	}
}

func TestPhaseIntervals(t *testing.T) {
	// With a reporting interval, the intervals add up to the totals.
	clk := newRealClock()
	var calls int
	op := func(context.Context) (int, error) { return 1, nil }
	p := phase{clock: clk, workers: 1, ops: 50_000, interval: time.Millisecond,
		onInterval: func(Interval, *hdrhistogram.Histogram, *hdrhistogram.Histogram) { calls++ }}
	res := runPhase(context.Background(), p, []Op{op})
	var sum int64
	for _, iv := range res.intervals {
		sum += iv.Ops
	}
	if sum != res.ops || len(res.intervals) != calls || len(res.intervals) == 0 {
		t.Errorf("interval ops sum %d, intervals %d, callbacks %d; want %d ops and one callback per interval", sum, len(res.intervals), calls, res.ops)
	}
	if last := res.intervals[len(res.intervals)-1]; last.TotalOps != res.ops {
		t.Errorf("last interval total_ops = %d; want %d", last.TotalOps, res.ops)
	}
}

func TestFixedRateBehind(t *testing.T) {
	// At 1000 op/s for 100 ms, 100 operations are due; each takes 2 ms, so one worker sends
	// 50 by the deadline and the other 50 stay unsent rather than stretching the run.
	clk := &fakeClock{}
	op := func(context.Context) (int, error) {
		clk.advance(2 * time.Millisecond)
		return 1, nil
	}
	res := runPhase(context.Background(), phase{clock: clk, workers: 1, rate: 1000, duration: 100 * time.Millisecond}, []Op{op})
	if res.ops != 50 || res.unsent != 50 || res.elapsed != 100*time.Millisecond {
		t.Errorf("ops, unsent, elapsed = %d, %d, %v; want 50, 50, 100ms", res.ops, res.unsent, res.elapsed)
	}
	// The last one sent was due at 49 ms and left at 98 ms: it waited 49 ms.
	if got := res.resp.Max(); got < 49_000 || got > 51_100 {
		t.Errorf("max response = %d µs; want about 51000 (49 ms queued + 2 ms service)", got)
	}
}
