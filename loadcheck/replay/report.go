package replay

import (
	"fmt"
	"sort"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/loadcheck/stats"
)

// Report is the "replay" section of the JSON report.
type Report struct {
	File        string  `json:"file"`
	Speed       string  `json:"speed"`
	Connections int     `json:"connections"`
	Records     int     `json:"records"`
	Replayed    int     `json:"replayed_per_run"`
	SpanS       float64 `json:"span_s"`
	// CapturedOpRate is the rate of the replayed requests in the capture.
	CapturedOpRate float64        `json:"captured_op_rate"`
	Skipped        map[string]int `json:"skipped"`
	Statements     []Statement    `json:"statements"`
	Keys           Keys           `json:"keys"`
	// CapturedLatency are the latency percentiles the sidecar saw in the capture, in ms,
	// to set beside each mode's.
	CapturedLatency stats.Latency `json:"captured_latency"`
	// Keyspace is the keyspace the replay owns against a deployment, "" for the embedded
	// node (the captured names).
	Keyspace string `json:"keyspace,omitempty"`
}

// Statement is one statement's count in the capture and, on average over the
// measured runs, in the replay.
type Statement struct {
	ID       uint32  `json:"id"`
	Query    string  `json:"query"`
	Prepared bool    `json:"prepared"`
	Captured int     `json:"captured"`
	Replayed float64 `json:"replayed"`
	Errors   float64 `json:"errors"`
}

// Keys compares how the hottest keys repeat in the capture and in the replay.
type Keys struct {
	Distinct int   `json:"distinct"`
	Top      []Key `json:"top"`
	// Collisions counts the captured keys whose replayed values are another's (a key of
	// a type with few values, such as tinyint); Unmatched the requests per run whose key
	// values named none of the capture's keys (0 unless the replay is broken).
	Collisions int     `json:"collisions"`
	Unmatched  float64 `json:"unmatched"`
}

// Key is one key's share of the requests that name a key, in %.
type Key struct {
	Key         string  `json:"key"`
	CapturedPct float64 `json:"captured_pct"`
	ReplayedPct float64 `json:"replayed_pct"`
}

// Report sums the measured runs, replayed over conns connections each, at rate op/s when
// the replay has no speed (Options.Rate).
func (rp *Replay) Report(rate float64, conns int, runs []*Run) *Report {
	speed := "max"
	switch {
	case rp.speed > 0:
		speed = fmt.Sprintf("%gx", rp.speed)
	case rate > 0:
		speed = fmt.Sprintf("rate %g op/s", rate)
	}
	rep := &Report{File: rp.path, Speed: speed, Connections: conns, Records: len(rp.c.Records),
		Replayed: len(rp.ops), SpanS: rp.span.Seconds(), Skipped: rp.skipped, Keyspace: rp.owned}
	if rp.span > 0 {
		rep.CapturedOpRate = float64(len(rp.ops)) / rp.span.Seconds()
	}
	cc := rp.capturedCounts()
	rep.Statements = rp.statementCounts(cc.stmts, runs)
	rep.Keys = rp.keyCounts(cc, runs)
	rep.CapturedLatency = rp.capturedLatency()
	return rep
}

// capturedCounts are the replayed requests' counts in the capture: by statement, by key,
// and how many name a key.
type capturedCounts struct {
	stmts   map[uint32]int
	keys    []int
	withKey int
}

// capturedCounts counts the replayed requests' statements and keys in the capture.
func (rp *Replay) capturedCounts() capturedCounts {
	cc := capturedCounts{stmts: map[uint32]int{}, keys: make([]int, len(rp.keys))}
	for _, op := range rp.ops {
		for j, p := range op.rec.Parts {
			cc.stmts[p.Statement]++
			if k := op.keys[j]; k >= 0 {
				cc.keys[k]++
				cc.withKey++
			}
		}
	}
	return cc
}

// statementCounts sets each statement's captured count beside its replays and errors on
// average over runs, the most captured first.
func (rp *Replay) statementCounts(captured map[uint32]int, runs []*Run) []Statement {
	var stmts []Statement
	for id, n := range captured {
		st := rp.stmts[id]
		s := Statement{ID: id, Query: st.def.Text, Prepared: st.def.Prepared, Captured: n}
		for _, r := range runs {
			s.Replayed += float64(r.stmts[id].Load())
			s.Errors += float64(r.errs[id].Load())
		}
		if len(runs) > 0 {
			s.Replayed /= float64(len(runs))
			s.Errors /= float64(len(runs))
		}
		stmts = append(stmts, s)
	}
	sort.Slice(stmts, func(i, j int) bool {
		a, b := stmts[i], stmts[j]
		return a.Captured > b.Captured || a.Captured == b.Captured && a.ID < b.ID
	})
	return stmts
}

// keyCounts compares the hottest captured keys' shares of the requests that name a key,
// in the capture and over runs.
func (rp *Replay) keyCounts(cc capturedCounts, runs []*Run) Keys {
	keys := Keys{Distinct: len(rp.keys), Collisions: rp.collisions}
	for _, r := range runs {
		keys.Unmatched += float64(r.other.Load()) / float64(len(runs))
	}
	order := make([]int, len(rp.keys))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := cc.keys[order[i]], cc.keys[order[j]]
		return a > b || a == b && keyHex(rp.keys[order[i]]) < keyHex(rp.keys[order[j]])
	})
	var replayedWithKey int64
	for _, r := range runs {
		for k := range r.keys {
			replayedWithKey += r.keys[k].Load()
		}
		replayedWithKey += r.other.Load()
	}
	for _, k := range order[:min(len(order), capturefile.TopKeys)] {
		rk := Key{Key: keyHex(rp.keys[k])}
		if cc.withKey > 0 {
			rk.CapturedPct = 100 * float64(cc.keys[k]) / float64(cc.withKey)
		}
		var n int64
		for _, r := range runs {
			n += r.keys[k].Load()
		}
		if replayedWithKey > 0 {
			rk.ReplayedPct = 100 * float64(n) / float64(replayedWithKey)
		}
		keys.Top = append(keys.Top, rk)
	}
	return keys
}

// capturedLatency are the latency percentiles of the replayed requests in the capture.
func (rp *Replay) capturedLatency() stats.Latency {
	var lat []int64
	for _, op := range rp.ops {
		lat = append(lat, op.rec.LatencyUS)
	}
	p := capturefile.PercentilesOf(lat)
	return stats.Latency{MeanMs: p.Mean / 1000, P50Ms: float64(p.P50) / 1000, P95Ms: float64(p.P95) / 1000,
		P99Ms: float64(p.P99) / 1000, P999Ms: float64(p.P999) / 1000, MaxMs: float64(p.Max) / 1000}
}
