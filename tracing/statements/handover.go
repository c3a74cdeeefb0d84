package statements

import (
	"encoding/json"
	"slices"
	"time"
)

// Prepared is a prepared statement's text as statement statistics learnt it, for a
// handover to another process.
type Prepared struct {
	ID   []byte `json:"id"`
	Text string `json:"text"`
	Cols int    `json:"cols"`
}

// PreparedStatements returns the prepared statements learnt, oldest first. It is safe for
// concurrent use.
func (s *Stats) PreparedStatements() []Prepared {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Prepared, 0, len(s.prepList))
	for i := range s.prepList {
		k := s.prepList[(s.prepHead+i)%len(s.prepList)]
		if p := s.prep[k]; p != nil {
			out = append(out, Prepared{ID: []byte(k), Text: p.text, Cols: p.cols})
		}
	}
	return out
}

// LearnPrepared learns the statements that another process had learnt, as if their
// PREPAREs had been seen here: an EXECUTE of one then counts under its text. It is safe
// for concurrent use.
func (s *Stats) LearnPrepared(ps []Prepared) {
	for _, p := range ps {
		s.learn(p.ID, p.Text, p.Cols)
	}
}

// Import adds the statistics that another process gathered, as its List with histograms
// gives them, to this one's: each statement's counts, latency histogram, rows, errors,
// consistency levels, first and last times and the anti-pattern kinds its requests showed
// go to the entry of the same text, made if needed. The anti-pattern counters are not
// carried: they are Prometheus counters of their process. Import the prepared statements first (LearnPrepared), so that a prepared
// statement's entry knows its columns. It is safe for concurrent use.
func (s *Stats) Import(sts []Statement) {
	cols := map[string]int{}
	s.mu.RLock()
	for _, p := range s.prep {
		cols[p.text] = p.cols
	}
	s.mu.RUnlock()
	mono := func(t time.Time) int64 { return s.baseMono + int64(t.Sub(s.baseWall)) }
	for _, st := range sts {
		c, ok := cols[st.Statement]
		if !ok || !st.Prepared {
			c = -1
		}
		e := s.entry(key{st.Statement, st.Prepared}, c)
		fresh := e.calls.Load() == 0 // made now: its times are the imported ones
		e.calls.Add(st.Calls)
		e.totalUS.Add(st.TotalTimeUS)
		for {
			old := e.maxUS.Load()
			if st.MaxUS <= old || e.maxUS.CompareAndSwap(old, st.MaxUS) {
				break
			}
		}
		e.rows.Add(st.Rows)
		for name, n := range st.Errors {
			if i := slices.Index(errNames[:], name); i >= 0 {
				e.errs[i].Add(n)
			}
		}
		for i := range e.cls {
			e.cls[i].Add(st.Consistency[clName(i)])
		}
		for _, b := range st.Histogram {
			if b[0] < NumBuckets {
				e.hist[b[0]].Add(b[1])
			}
		}
		if f := mono(st.FirstSeen); !st.FirstSeen.IsZero() && (fresh || f < e.first.Load()) {
			e.first.Store(f)
		}
		if l := mono(st.LastSeen); fresh || l > e.last.Load() {
			e.last.Store(l)
		}
		if at := st.LastTraceAt; at != nil && at.UnixNano() > e.floor.traceAt.Load() {
			e.FloorTraced(st.LastTraceID, *at)
			e.floor.tried.Store(mono(*at))
		}
		for _, k := range st.AntiPatterns {
			if i := slices.Index(AntiPatternKinds[:], k); i >= 0 {
				e.seen.bits.Or(uint32(1) << i)
			}
		}
	}
}

// statsState is the statistics' part of a handover (Stats.ExportState).
type statsState struct {
	Enabled  bool       `json:"enabled"`
	Prepared []Prepared `json:"prepared,omitempty"`
}

// ExportState returns the statistics' part of a handover: whether they are gathered, and
// the prepared statements learnt (package sidecar/handover's Part). What they counted goes
// at the end of the handover (Import).
func (s *Stats) ExportState() (json.RawMessage, error) {
	return json.Marshal(statsState{Enabled: s.Enabled(), Prepared: s.PreparedStatements()})
}

// RestoreState installs what another process's statistics exported (ExportState).
func (s *Stats) RestoreState(b json.RawMessage) error {
	var st statsState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	s.SetEnabled(st.Enabled)
	s.LearnPrepared(st.Prepared)
	return nil
}
