package loadcheck

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/tracecar/tracecar/loadcheck/stats"
)

// Op performs one operation against the target and returns the number of rows it read or
// wrote. Each worker owns its Op, so an Op is never called concurrently with itself.
type Op func(ctx context.Context) (rows int, err error)

// Histograms record microseconds, from 1 µs to one hour, with 3 significant digits.
const (
	histMax    = int64(time.Hour / time.Microsecond)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMax, histDigits) }

// micros converts d to a recordable number of microseconds.
func micros(d time.Duration) int64 {
	v := int64(d / time.Microsecond)
	if v < 0 {
		return 0
	}
	if v > histMax {
		return histMax
	}
	return v
}

// clock is the scheduler's time source. Times are offsets from an arbitrary origin.
// Tests use a fake clock to check the schedule without depending on real time.
type clock interface {
	now() time.Duration
	// sleepUntil returns when now() ≥ t, or with ctx's error when ctx ends first.
	sleepUntil(ctx context.Context, t time.Duration) error
}

type realClock struct{ origin time.Time }

func newRealClock() *realClock { return &realClock{origin: time.Now()} }

func (c *realClock) now() time.Duration { return time.Since(c.origin) }

func (c *realClock) sleepUntil(ctx context.Context, t time.Duration) error {
	d := t - c.now()
	if d <= 0 {
		return nil
	}
	// time.Sleep reuses the goroutine's own timer, so short sleeps do not allocate.
	// Long ones watch ctx so that a cancelled run stops promptly.
	if d < 20*time.Millisecond {
		time.Sleep(d)
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// phase describes one stretch of load: a warmup or a measured run.
type phase struct {
	clock    clock
	workers  int
	rate     float64       // total target op/s; 0 runs a closed loop
	duration time.Duration // 0 when ops limits the phase
	ops      int64         // 0 when duration limits the phase
	interval time.Duration // reporting interval; 0 reports only at the end
	// onInterval, when set, is called from one goroutine after each interval with the
	// interval's figures and histograms, which are reused after it returns.
	onInterval func(iv Interval, resp, svc *hdrhistogram.Histogram)
	// schedule, when set, replaces the workers' ops and the rate: operation i is
	// schedule.ops[w](ctx, i), on the worker w that takes it (see replay_run.go).
	schedule *schedule
}

// indexedOp performs operation i of a schedule.
type indexedOp func(ctx context.Context, i int64) (rows int, err error)

// schedule is a phase of numbered operations, each at its own intended time: the
// recorded timing of a replay, as open-loop and coordinated-omission-correct as a fixed
// rate. With at nil, the n operations run as fast as the workers go (a closed loop).
type schedule struct {
	at  []time.Duration // operation i's intended start, from the phase's start
	n   int64           // the operations, when at is nil
	ops []indexedOp     // by worker
}

func (s *schedule) len() int64 {
	if s.at != nil {
		return int64(len(s.at))
	}
	return s.n
}

// phaseResult holds the figures of one phase. Response time runs from the intended start
// of an operation (its slot in the fixed schedule at a fixed rate; the actual send in a
// closed loop) to its completion; service time runs from the actual send.
type phaseResult struct {
	ops, rows, errs int64
	// unsent counts the operations scheduled before the deadline at a fixed rate that
	// were not sent because the target fell behind.
	unsent    int64
	elapsed   time.Duration
	resp, svc *hdrhistogram.Histogram
	firstErr  error
	intervals []Interval
}

// stripe is a shard of the recording state. Workers share a few stripes rather than
// owning one each, which bounds memory at high concurrency; the lock is uncontended in
// practice and is taken by the collector once per interval.
type stripe struct {
	mu              sync.Mutex
	resp, svc       *hdrhistogram.Histogram
	ops, rows, errs int64
	firstErr        error
	_               [64]byte // keep stripes on separate cache lines
}

func (s *stripe) record(resp, svc time.Duration, rows int, err error) {
	s.mu.Lock()
	if err != nil {
		s.errs++
		if s.firstErr == nil {
			s.firstErr = err
		}
	} else {
		s.ops++
		s.rows += int64(rows)
		s.resp.RecordValue(micros(resp))
		s.svc.RecordValue(micros(svc))
	}
	s.mu.Unlock()
}

// runner is the state shared by the workers of one phase.
type runner struct {
	phase
	stop atomic.Bool
	// lastSent is the latest actual start of an operation of a schedule.
	lastSent atomic.Int64
	next     atomic.Int64
	start    time.Duration
	end      time.Duration // 0: no deadline
	period   float64       // ns between scheduled operations; 0: closed loop
	stripes  []*stripe
}

// runPhase runs ops[i] on worker i until the phase's duration or operation count is
// reached or ctx ends, and returns what was recorded. Operations cut short by ctx are
// not counted.
func runPhase(ctx context.Context, p phase, ops []Op) *phaseResult {
	if p.workers <= 0 || p.workers > len(ops) {
		p.workers = len(ops)
	}
	r := &runner{phase: p}
	n := min(p.workers, max(4, 2*runtime.GOMAXPROCS(0)))
	r.stripes = make([]*stripe, n)
	for i := range r.stripes {
		r.stripes[i] = &stripe{resp: newHist(), svc: newHist()}
	}
	if p.rate > 0 && p.schedule == nil {
		r.period = float64(time.Second) / p.rate
	}

	stopWatch := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			r.stop.Store(true)
		case <-stopWatch:
		}
	}()
	defer close(stopWatch)

	r.start = p.clock.now()
	if p.duration > 0 {
		r.end = r.start + p.duration
	}
	exits, finished := r.startWorkers(ctx, ops)
	c := newCollector(r)
	r.collectEach(c, finished)
	elapsed := r.span(exits)
	c.collect(r.start + elapsed)
	res := c.total
	res.elapsed = elapsed
	if r.period > 0 && r.end > 0 && !r.stop.Load() {
		scheduled := int64(math.Ceil(float64(p.duration) / r.period))
		res.unsent = max(0, scheduled-res.ops-res.errs)
	}
	return &res
}

// startWorkers starts the phase's workers, each running its op, and returns where each
// will record the time it left and a channel closed once all have.
func (r *runner) startWorkers(ctx context.Context, ops []Op) ([]time.Duration, <-chan struct{}) {
	exits := make([]time.Duration, r.workers)
	var wg sync.WaitGroup
	for w := 0; w < r.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exits[w] = r.work(ctx, r.stripes[w%len(r.stripes)], ops[w], w)
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	return exits, finished
}

// collectEach has c collect an interval each --interval until finished is closed (at
// once without an interval), leaving the last, short of half an interval, to the final
// collection.
func (r *runner) collectEach(c *collector, finished <-chan struct{}) {
	if r.interval <= 0 {
		<-finished
		return
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			now := r.clock.now()
			if r.end > 0 && now+r.interval/2 > r.end {
				// The final collection takes the rest, so that the last
				// interval is not a sliver holding the stragglers alone.
				continue
			}
			c.collect(now)
		case <-finished:
			return
		}
	}
}

// span is the phase's measured span: to the last worker's exit, or to a schedule's last
// start, or the whole duration at a fixed rate.
func (r *runner) span(exits []time.Duration) time.Duration {
	last := r.start
	for _, e := range exits {
		last = max(last, e)
	}
	elapsed := last - r.start
	if s := r.schedule; s != nil && len(s.at) > 0 && !r.stop.Load() && r.end == 0 {
		// A schedule's span runs to its last operation's start, intended or actual (when
		// the target fell behind): as at a fixed rate, the op rate is what was sent, and
		// a last straggler's wait shows in the latency, not in the rate.
		elapsed = max(s.at[len(s.at)-1], time.Duration(r.lastSent.Load())-r.start)
	}
	if r.period > 0 && r.duration > elapsed && !r.stop.Load() {
		// At a fixed rate the schedule, not the last completion, defines the span:
		// a worker that finds its next slot past the deadline leaves early.
		elapsed = r.duration
	}
	return elapsed
}

// work is one worker's loop. It returns the clock time at which the worker stopped.
func (r *runner) work(ctx context.Context, st *stripe, op Op, w int) time.Duration {
	clk := r.clock
	for !r.stop.Load() {
		var intended time.Duration
		idx := int64(-1)
		if s := r.schedule; s != nil {
			idx = r.next.Add(1) - 1
			if idx >= s.len() {
				break
			}
			if s.at != nil {
				intended = r.start + s.at[idx]
				if r.end > 0 && intended >= r.end {
					break
				}
				if clk.sleepUntil(ctx, intended) != nil {
					break
				}
			}
		} else if r.period > 0 {
			i := r.next.Add(1) - 1
			if r.ops > 0 && i >= r.ops {
				break
			}
			intended = r.start + time.Duration(float64(i)*r.period)
			if r.end > 0 && intended >= r.end {
				break
			}
			if clk.sleepUntil(ctx, intended) != nil {
				break
			}
			if r.end > 0 && clk.now() >= r.end {
				// Behind schedule at the deadline: the backlog is not sent, or a
				// slow target would stretch the run. runPhase counts it as unsent.
				break
			}
		} else if r.ops > 0 && r.next.Add(1) > r.ops {
			break
		}
		sent := clk.now()
		if r.period == 0 && (r.schedule == nil || r.schedule.at == nil) {
			if r.end > 0 && sent >= r.end {
				break
			}
			intended = sent
		}
		var rows int
		var err error
		if idx >= 0 {
			for {
				l := r.lastSent.Load()
				if int64(sent) <= l || r.lastSent.CompareAndSwap(l, int64(sent)) {
					break
				}
			}
			rows, err = r.schedule.ops[w](ctx, idx)
		} else {
			rows, err = op(ctx)
		}
		done := clk.now()
		if err != nil && ctx.Err() != nil {
			break
		}
		st.record(done-intended, done-sent, rows, err)
	}
	return clk.now()
}

// collector drains the stripes into interval figures and run totals.
type collector struct {
	r             *runner
	ivResp, ivSvc *hdrhistogram.Histogram
	total         phaseResult
	lastT         time.Duration
	rates         []float64
}

func newCollector(r *runner) *collector {
	return &collector{
		r: r, ivResp: newHist(), ivSvc: newHist(), lastT: r.start,
		total: phaseResult{resp: newHist(), svc: newHist()},
	}
}

func (c *collector) collect(now time.Duration) {
	var ops, rows, errs int64
	for _, s := range c.r.stripes {
		s.mu.Lock()
		c.ivResp.Merge(s.resp)
		c.ivSvc.Merge(s.svc)
		s.resp.Reset()
		s.svc.Reset()
		ops += s.ops
		rows += s.rows
		errs += s.errs
		if c.total.firstErr == nil {
			c.total.firstErr = s.firstErr
		}
		s.ops, s.rows, s.errs, s.firstErr = 0, 0, 0, nil
		s.mu.Unlock()
	}
	span := now - c.lastT
	if span <= 0 && ops == 0 && errs == 0 {
		return
	}
	c.total.ops += ops
	c.total.rows += rows
	c.total.errs += errs
	iv := Interval{
		StartS:   (c.lastT - c.r.start).Seconds(),
		TimeS:    (now - c.r.start).Seconds(),
		TotalOps: c.total.ops,
		Ops:      ops,
		Errors:   errs,
	}
	if span > 0 {
		iv.OpRate = float64(ops) / span.Seconds()
		iv.RowRate = float64(rows) / span.Seconds()
		c.rates = append(c.rates, iv.OpRate)
	}
	iv.PkRate = iv.OpRate
	iv.Latency = latencyOf(c.ivResp)
	if s := stats.Summarize(c.rates); s.Mean > 0 {
		iv.Stderr = s.Stderr / s.Mean
	}
	if c.r.onInterval != nil {
		c.r.onInterval(iv, c.ivResp, c.ivSvc)
	}
	c.total.intervals = append(c.total.intervals, iv)
	c.total.resp.Merge(c.ivResp)
	c.total.svc.Merge(c.ivSvc)
	c.ivResp.Reset()
	c.ivSvc.Reset()
	c.lastT = now
}
