package guardrail

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Meter counts the CPU time of the work tracing adds, where it happens: the tracer calls
// Begin and End around building a recorded session, each sink write and each node-event
// fetch (tracing.Options.Work). Between the two the goroutine is locked to its OS thread,
// and the thread's CPU clock is read at both ends, so that what is counted is CPU, not
// the time spent waiting. On a platform without a thread CPU clock it counts nothing and
// OK reports false. The zero Meter is ready; it is safe for concurrent use and does not
// allocate.
type Meter struct {
	ns   atomic.Int64
	ops  atomic.Uint64
	fail atomic.Bool
}

// Begin locks the goroutine to its thread and returns the thread's CPU clock.
func (m *Meter) Begin() int64 {
	runtime.LockOSThread()
	t, ok := threadCPU()
	if !ok {
		m.fail.Store(true)
		return -1
	}
	return t
}

// End adds the thread's CPU time since mark, and unlocks the goroutine from its thread.
func (m *Meter) End(mark int64) {
	defer runtime.UnlockOSThread()
	if mark < 0 {
		return
	}
	if t, ok := threadCPU(); ok && t >= mark {
		m.ns.Add(t - mark)
		m.ops.Add(1)
	}
}

// CPU returns the CPU time counted so far and the number of pieces of work, and false
// when the platform has no thread CPU clock.
func (m *Meter) CPU() (time.Duration, uint64, bool) {
	return time.Duration(m.ns.Load()), m.ops.Load(), !m.fail.Load() && threadCPUOK
}
