package statements

import (
	"fmt"
	"testing"
	"time"
)

// TestFloorBoundsAndFairness: 50 statements sent ten times a second, a floor of one trace
// per 2 s each at most 5 a second, and 20 statements seen once and never again. No second
// has more than 5 floor traces, every live statement is traced within 50/5 s plus one
// interval (and the stale ones' first tries), again within that after its last trace,
// and the stale ones are tried once each rather than holding the floor's places.
func TestFloorBoundsAndFairness(t *testing.T) {
	const (
		live, stale, maxPS = 50, 20, 5
		interval           = 2 * time.Second
	)
	s := New(Options{Now: func() int64 { return 0 }})
	c := FloorConfig{Interval: interval, MaxPerSecond: maxPS}
	var es []*Entry
	for i := range live + stale {
		e := s.entry(key{text: fmt.Sprintf("SELECT v FROM ks.t%d WHERE k = ?", i), prepared: true}, -1)
		e.last.Store(int64(time.Millisecond)) // seen once at the start
		es = append(es, e)
	}
	lastTrace := make([]int64, live+stale)
	worst := time.Duration(0)
	for sec := 1; sec <= 40; sec++ {
		s.arm(c, int64(sec)*int64(time.Second))
		taken := 0
		for tick := range 10 {
			now := int64(sec)*int64(time.Second) + int64(tick)*int64(100*time.Millisecond) + 1
			for i, e := range es[:live] {
				e.last.Store(now)
				if e.take(now) {
					taken++
					// Once the first two rounds are over (the stale statements tried, and the order
					// they left settled), the gaps.
					if gap := time.Duration(now - lastTrace[i]); sec > 30 && lastTrace[i] != 0 && gap > worst {
						worst = gap
					}
					lastTrace[i] = now
				}
			}
		}
		if taken > maxPS {
			t.Errorf("second %d: %d floor traces; want at most %d", sec, taken, maxPS)
		}
		// The stale statements are each armed once, and missed: they delay the first round.
		if sec == (live+stale)/maxPS+int(interval/time.Second)+1 {
			for i, at := range lastTrace[:live] {
				if at == 0 {
					t.Errorf("statement %d not traced within %d s", i, sec)
				}
			}
		}
	}
	bound := time.Duration(live/maxPS)*time.Second + interval
	if worst > bound {
		t.Errorf("a statement waited %v between two floor traces; want at most %v", worst, bound)
	}
	for i, e := range es[live:] {
		if e.floor.tried.Load() == 0 {
			t.Errorf("stale statement %d never tried", i)
		}
	}
}

// TestFloorOffDisarms: turning the floor off disarms every statement, and a statement
// armed and not sent within its second waits an interval before it is armed again.
func TestFloorOffDisarms(t *testing.T) {
	s := New(Options{Now: func() int64 { return 0 }})
	e := s.entry(key{text: "SELECT 1", prepared: false}, -1)
	e.last.Store(1)
	c := FloorConfig{Interval: 10 * time.Second, MaxPerSecond: 1}
	s.arm(c, int64(time.Second))
	if !e.floor.armed.Load() {
		t.Fatal("a statement seen and never traced is not armed")
	}
	s.arm(c, 2*int64(time.Second)) // not sent within its second
	if e.floor.armed.Load() {
		t.Fatal("still armed a second later")
	}
	e.last.Store(3 * int64(time.Second))
	s.arm(c, 4*int64(time.Second))
	if e.floor.armed.Load() {
		t.Fatal("armed again before an interval passed")
	}
	s.arm(c, 12*int64(time.Second))
	if !e.floor.armed.Load() {
		t.Fatal("not armed an interval later")
	}
	s.SetFloor(FloorConfig{Interval: time.Hour})
	if !s.Active() {
		t.Error("Active false with the floor on")
	}
	s.SetFloor(FloorConfig{})
	if e.floor.armed.Load() || s.Active() {
		t.Errorf("floor off: armed %v, Active %v", e.floor.armed.Load(), s.Active())
	}
	if e.take(13 * int64(time.Second)) {
		t.Error("a statement takes a floor trace with the floor off")
	}
}
