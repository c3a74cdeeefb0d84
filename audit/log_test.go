package audit

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type memSink struct {
	mu   sync.Mutex
	recs []Record
	gate chan struct{}
}

func (m *memSink) Name() string { return "mem" }
func (m *memSink) Write(_ context.Context, recs []Record) error {
	if m.gate != nil {
		<-m.gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, recs...)
	return nil
}
func (m *memSink) Sync(context.Context) error  { return nil }
func (m *memSink) Close(context.Context) error { return nil }

func TestWantsFilters(t *testing.T) {
	l := New(Block, 8)
	defer l.Close(context.Background())
	if l.Enabled() || l.Wants(DML, "ks", "t", "u") {
		t.Fatal("a new log audits something")
	}
	l.Set(Settings{Enabled: true, Categories: 1<<DML | 1<<AUTH, Tables: map[string]bool{"ks.t": true},
		ExcludeUsers: map[string]bool{"bob": true}})
	for _, c := range []struct {
		cat       Category
		ks, table string
		user      string
		want      bool
	}{
		{DML, "ks", "t", "alice", true},
		{DML, "ks", "u", "alice", false},
		{DML, "ks", "t", "bob", false},
		{QUERY, "ks", "t", "alice", false},
		{AUTH, "", "", "alice", true},
	} {
		if got := l.Wants(c.cat, c.ks, c.table, c.user); got != c.want {
			t.Errorf("Wants(%v, %s.%s, %s) = %v, want %v", c.cat, c.ks, c.table, c.user, got, c.want)
		}
	}
}

func TestDropCountsAndCloseWrites(t *testing.T) {
	m := &memSink{gate: make(chan struct{})}
	l := New(Drop, 2, m)
	for range 10 {
		l.Add(Record{Operation: "x"})
	}
	// The worker holds at most one batch at the gate (what was queued when it woke, at most
	// three) and the queue two more records.
	if d := l.Dropped(); d < 5 {
		t.Errorf("dropped %d of 10 with a queue of 2 and a stuck sink; want at least 5", d)
	}
	close(m.gate)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := uint64(len(m.recs)) + l.Dropped(); got != 10 {
		t.Errorf("written %d + dropped %d != 10", len(m.recs), l.Dropped())
	}
}

// TestCloseRacingAdds: records added by many goroutines while Close runs are each either
// written or counted as dropped, under both policies, with a queue small enough that adds
// wait for room (Block) or drop (Drop) all along: none is left behind in a queue that the
// writer no longer drains, and none waits for ever.
func TestCloseRacingAdds(t *testing.T) {
	for _, p := range []Policy{Block, Drop} {
		t.Run(p.String(), func(t *testing.T) {
			for range 20 {
				c := &countingSink{}
				l := Open(Config{Policy: p, Queue: 16, Sinks: []Sink{c}})
				var added atomic.Int64
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						for i := range 2000 {
							l.Add(rec(i))
							added.Add(1)
						}
					})
				}
				for added.Load() < 500 {
					runtime.Gosched()
				}
				if err := l.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				if w, d := uint64(c.records.Load()), l.Dropped(); w+d != 8*2000 {
					t.Fatalf("written %d + dropped %d = %d; want %d", w, d, w+d, 8*2000)
				}
			}
		})
	}
}

// chainSink adds a record to its Log from each of its first writes, as requests do while
// the writer writes, and notes when each write came.
type chainSink struct {
	l     *Log
	mu    sync.Mutex
	at    []time.Time
	sizes []int
}

func (c *chainSink) Name() string { return "chain" }
func (c *chainSink) Write(_ context.Context, recs []Record) error {
	c.mu.Lock()
	c.at, c.sizes = append(c.at, time.Now()), append(c.sizes, len(recs))
	n := len(c.at)
	c.mu.Unlock()
	if n < 4 {
		c.l.Add(rec(n))
	}
	return nil
}
func (c *chainSink) Sync(context.Context) error  { return nil }
func (c *chainSink) Close(context.Context) error { return nil }

// TestRecordsQueuedWhileWritingWaitForTheNextRound: a record queued while the writer writes
// goes in its next round, after the gathering time (a timer, which never fires early), not
// in a tail of small writes at once: one wake-up and one write per round.
func TestRecordsQueuedWhileWritingWaitForTheNextRound(t *testing.T) {
	c := &chainSink{}
	l := Open(Config{Sinks: []Sink{c}, Sync: time.Hour})
	c.l = l
	l.Add(rec(0))
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.at) == 4 })
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(c.at); i++ {
		if gap := c.at[i].Sub(c.at[i-1]); gap < flushDelay || c.sizes[i] != 1 {
			t.Errorf("write %d: %d records, %v after the last; want 1, in the next round (%v or more)", i, c.sizes[i], gap, flushDelay)
		}
	}
}

// TestGatherTimeWithinSync: a writer lets records gather for flushDelay, but never for more
// than half a sync interval, so that with a short --audit-fsync too a record is in the
// sink's hands well within one interval.
func TestGatherTimeWithinSync(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sync, want time.Duration
	}{
		{"default", DefaultSync, flushDelay},
		{"just over twice", 2*flushDelay + time.Millisecond, flushDelay},
		{"short", 20 * time.Millisecond, 10 * time.Millisecond},
		{"very short", time.Millisecond, 500 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gatherTime(tc.sync); got != tc.want {
				t.Errorf("gatherTime(%v) = %v; want %v", tc.sync, got, tc.want)
			}
		})
	}
}
