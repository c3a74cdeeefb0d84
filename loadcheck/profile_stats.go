package loadcheck

import (
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The counts of a profile's operations during a run, per operation.

// opStats counts one operation of a run. Safe for concurrent use.
type opStats struct {
	mu                      sync.Mutex
	count, rows, parts, err int64
	hist                    *hdrhistogram.Histogram
}

func (s *opStats) record(d time.Duration, rows, parts int64, err error) {
	s.mu.Lock()
	if err != nil {
		s.err++
	} else {
		s.count++
		s.rows += rows
		s.parts += parts
		s.hist.RecordValue(micros(d))
	}
	s.mu.Unlock()
}

// profileStats are the per-operation counts of one run, by index in the mix, and the
// run's next slot in the mix's cycle.
type profileStats struct {
	ops  []*opStats
	next atomic.Int64
}

func newProfileStats(p *profile) *profileStats {
	s := &profileStats{ops: make([]*opStats, len(p.mix))}
	for i := range s.ops {
		s.ops[i] = &opStats{hist: newHist()}
	}
	return s
}

// reset forgets the warmup.
func (s *profileStats) reset() {
	for _, o := range s.ops {
		o.mu.Lock()
		o.count, o.rows, o.parts, o.err = 0, 0, 0, 0
		o.hist.Reset()
		o.mu.Unlock()
	}
}

// results returns the run's figures over elapsed, and its partitions.
func (s *profileStats) results(p *profile, elapsed time.Duration) ([]OpResult, int64) {
	out := make([]OpResult, len(s.ops))
	var parts int64
	for i, o := range s.ops {
		o.mu.Lock()
		h := hdrhistogram.Import(o.hist.Export())
		out[i] = OpResult{Name: p.mix[i].name, Count: o.count, Rows: o.rows, Partitions: o.parts, Errors: o.err, hist: h}
		o.mu.Unlock()
		parts += out[i].Partitions
		out[i].finish(elapsed.Seconds())
	}
	return out, parts
}
