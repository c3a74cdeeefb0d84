package statements

import (
	"cmp"
	"slices"
	"time"
)

// The trace floor: every statement gets at least one full trace per interval, whatever the
// trace probability, at most MaxPerSecond traces a second over all statements.
//
// The data path does not choose: once a second, on the wall clock's whole second, arm picks
// the statements that are due (seen since their last floor trace, and not traced for an
// interval), least recently traced first, and arms at most MaxPerSecond of them. A request
// of an armed statement disarms it with one compare-and-swap and is traced; a statement
// armed and not seen within its second is disarmed at the next one and waits an interval,
// as if it had been traced, so that statements no longer sent never hold the floor's
// places. The requests of one wall-clock second can therefore take at most MaxPerSecond
// floor traces, and a statement that keeps being sent is traced within
// (due statements / MaxPerSecond) seconds of becoming due.

// SetFloor installs the trace floor's setting: Interval 0 turns it off, and disarms every
// statement. It is safe for concurrent use.
func (s *Stats) SetFloor(c FloorConfig) {
	if c.MaxPerSecond <= 0 {
		c.MaxPerSecond = DefaultFloorMaxPerSecond
	}
	if !c.On() {
		c = FloorConfig{}
	}
	f := &s.floor
	f.mu.Lock()
	stop, done := f.stop, f.done
	f.stop, f.done = nil, nil
	f.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg = c
	f.on.Store(c.On())
	if !c.On() {
		s.disarmAll()
		return
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go s.runFloor(c, f.stop, f.done)
}

// Floor returns the trace floor's setting. It is safe for concurrent use.
func (s *Stats) Floor() FloorConfig {
	s.floor.mu.Lock()
	defer s.floor.mu.Unlock()
	return s.floor.cfg
}

// Active reports whether Request must see QUERY, EXECUTE and BATCH requests: statistics
// are on, or the trace floor is.
func (s *Stats) Active() bool { return s.on.Load() || s.floor.on.Load() }

// runFloor arms statements on every whole second of the wall clock until stop.
func (s *Stats) runFloor(c FloorConfig, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(untilNextSecond(time.Now()))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.arm(c, s.now())
		t.Reset(untilNextSecond(time.Now()))
	}
}

func untilNextSecond(now time.Time) time.Duration {
	return now.Truncate(time.Second).Add(time.Second).Sub(now)
}

// arm disarms the statements armed at the last round and not traced since (they count as
// tried now), then arms the due statements, least recently tried first, at most
// c.MaxPerSecond. now is the monotonic clock of Options.Now.
func (s *Stats) arm(c FloorConfig, now int64) {
	s.mu.RLock()
	due := make([]*Entry, 0, 64)
	for _, e := range s.entries {
		if e.floor.armed.CompareAndSwap(true, false) {
			e.floor.tried.Store(now)
			continue
		}
		if e.shape.system {
			continue // the drivers' own reads of the system tables
		}
		tried := e.floor.tried.Load()
		if e.last.Load() > tried && (tried == 0 || now-tried >= int64(c.Interval)) {
			due = append(due, e)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(due, func(a, b *Entry) int {
		x, y := a.floor.tried.Load(), b.floor.tried.Load()
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return cmp.Compare(a.first.Load(), b.first.Load()) // older statements first: a stable order
	})
	if len(due) > c.MaxPerSecond {
		due = due[:c.MaxPerSecond]
	}
	for _, e := range due {
		e.floor.armed.Store(true)
	}
}

func (s *Stats) disarmAll() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, e := range s.entries {
		e.floor.armed.Store(false)
	}
}

// take reports whether this request of e takes e's floor trace, and disarms it: one atomic
// load for a statement not armed.
func (e *Entry) take(now int64) bool {
	if !e.floor.armed.Load() || !e.floor.armed.CompareAndSwap(true, false) {
		return false
	}
	e.floor.tried.Store(now)
	return true
}

// FloorTraced notes the id and the start of the floor trace a request of e was given,
// once its session is recorded. It is safe for concurrent use.
func (e *Entry) FloorTraced(id string, start time.Time) {
	e.floor.traceID.Store(&id)
	e.floor.traceAt.Store(start.UnixNano())
}

// lastTrace returns the id and start of e's last floor trace, or "" and nil.
func (e *Entry) lastTrace() (string, *time.Time) {
	p := e.floor.traceID.Load()
	if p == nil {
		return "", nil
	}
	at := time.Unix(0, e.floor.traceAt.Load()).UTC()
	return *p, &at
}
