package ctl

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/internal/latencyhist"
)

// bounds are a latency histogram's, in seconds.
var bounds = []float64{0.0001, 0.001, 0.01, 0.1}

// hist is a cumulative histogram of n observations in each bucket (the last one +Inf).
func hist(per ...uint64) adminapi.Histogram {
	h := adminapi.Histogram{Bounds: bounds}
	var c uint64
	for _, n := range per {
		c += n
		h.Counts = append(h.Counts, c)
	}
	return h
}

// stmt is a statement with calls calls of us µs each, as a sidecar lists it.
func stmt(text string, prepared bool, calls, us uint64, errs uint64, anti ...string) adminapi.Statement {
	s := adminapi.Statement{Statement: text, Prepared: prepared, Calls: calls, TotalTimeUS: calls * us, MaxUS: us,
		Errors: map[string]uint64{}, AntiPatterns: anti}
	if errs > 0 {
		s.Errors["invalid"] = errs
	}
	if calls > 0 {
		// One bucket holds us: its index from the layout's own bounds.
		for i := 0; i < latencyhist.NumBuckets; i++ {
			if low, w := latencyhist.BucketBounds(i); us >= low && us < low+w {
				s.Histogram = []adminapi.Bucket{{uint64(i), calls}}
				break
			}
		}
	}
	return s
}

func reading(at time.Time, ops uint64, lat adminapi.Histogram, mode string, stmts ...adminapi.Statement) hostSample {
	s := hostSample{at: at, ops: ops, latency: lat, statsOn: len(stmts) > 0, stmts: map[stmtKey]adminapi.Statement{}}
	s.status.Mode = mode
	s.status.Guardrail.State = "none"
	s.status.SinkDropped = map[string]uint64{"otel": ops / 100}
	for _, st := range stmts {
		s.stmts[stmtKey{st.Statement, st.Prepared}] = st
	}
	return s
}

// TestTopView checks one refresh from two readings of two hosts: rates are the
// differences over the interval, p99 comes from the merged histogram (never the average
// of the hosts'), statements are the interval's, merged across hosts and sorted by each
// order, and a host that did not answer is counted out.
func TestTopView(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(2 * time.Second)
	const ins, sel, bad = "INSERT INTO ks.t (k) VALUES (?)", "SELECT v FROM ks.t WHERE k = ?", "SELECT v FROM ks.nope WHERE k = ?"
	prev := []hostSample{
		reading(t0, 1000, hist(100, 0, 0, 0, 0), "fast", stmt(ins, true, 900, 50, 0), stmt(sel, true, 100, 200, 0)),
		reading(t0, 500, hist(0, 0, 50, 0, 0), "off"),
		{at: t0, err: errors.New("connection refused")},
	}
	cur := []hostSample{
		// Host a: 1,800 more INSERTs at 50 µs, 200 more SELECTs at 200 µs, all in the
		// first bucket; statistics were reset, so bad counts from zero.
		reading(t1, 3000, hist(2100, 0, 0, 0, 0), "fast", stmt(ins, true, 2700, 50, 0), stmt(sel, true, 300, 200, 0),
			stmt(bad, false, 20, 100, 20, "unprepared")),
		// Host b: 1,000 more requests, each about 5 ms: its own p99 is 10 ms, host a's
		// 100 µs; averaged they would be about 5 ms.
		reading(t1, 1500, hist(0, 0, 1050, 0, 0), "off"),
		{at: t1, err: errors.New("connection refused")},
	}
	cur[0].queries = []adminapi.Query{{Opcode: "EXECUTE", ElapsedUS: 300}, {Opcode: "QUERY", ElapsedUS: 9000}}
	cur[1].queries = []adminapi.Query{{Opcode: "BATCH", ElapsedUS: 1200}}
	hosts := []string{"http://a:10000", "http://b:10000", "http://c:10000"}

	v := buildView(hosts, prev, cur, "total_time")
	if v.interval != 2*time.Second || v.cluster.up != 2 || v.cluster.total != 3 || v.cluster.err == nil {
		t.Fatalf("interval %v, %d/%d up, err %v; want 2s, 2/3 and an error", v.interval, v.cluster.up, v.cluster.total, v.cluster.err)
	}
	if v.cluster.opsPerSec != 1500 || v.hosts[0].opsPerSec != 1000 || v.hosts[1].opsPerSec != 500 {
		t.Errorf("op/s cluster %v, a %v, b %v; want 1500, 1000, 500", v.cluster.opsPerSec, v.hosts[0].opsPerSec, v.hosts[1].opsPerSec)
	}
	// 2,000 of 3,000 observations at most 100 µs, 1,000 in (1 ms, 10 ms]: interpolated as
	// histogram_quantile does, the merged p99 is 1 ms + 9 ms × 970/1000 = 9.73 ms and the
	// merged p50 100 µs × 1500/2000 = 75 µs. The average of the hosts' p99s would be 5 ms.
	if v.cluster.p99 < 0.00972 || v.cluster.p99 > 0.00974 || v.cluster.p50 < 0.0000749 || v.cluster.p50 > 0.0000751 {
		t.Errorf("cluster p50 %v p99 %v; want 75µs and 9.73ms", v.cluster.p50, v.cluster.p99)
	}
	if v.cluster.mode != "fast×1 off×1" || v.statsOff != 1 || v.cluster.dropsDelta != 30 || v.cluster.drops != 45 {
		t.Errorf("mode %q stats off %d drops %d (+%d); want \"fast×1 off×1\", 1, 45 (+30)", v.cluster.mode, v.statsOff, v.cluster.drops, v.cluster.dropsDelta)
	}
	if v.hosts[2].err == nil {
		t.Error("host c's error is not shown")
	}
	texts := func(rows []stmtRow) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.text)
		}
		return out
	}
	if got := texts(v.stmts); !slices.Equal(got, []string{ins, sel, bad}) {
		t.Errorf("by total_time: %q", got)
	}
	s := v.stmts[0]
	if s.calls != 1800 || s.callsPerSec != 900 || s.meanUS != 50 || s.totalUS != 90000 {
		t.Errorf("INSERT over the interval: %+v; want 1800 calls, 900/s, mean 50 µs", s)
	}
	if want := 90000.0 / (90000 + 40000 + 2000); s.share < want-1e-9 || s.share > want+1e-9 {
		t.Errorf("INSERT share %v; want %v", s.share, want)
	}
	if v.stmts[2].errors != 20 || v.stmts[2].errorsPer != 10 || !slices.Equal(v.stmts[2].anti, []string{"unprepared"}) {
		t.Errorf("the reset statement: %+v; want its 20 errors, 10/s, unprepared", v.stmts[2])
	}
	if v.calls != 1010 {
		t.Errorf("statements' calls/s %v; want 1010", v.calls)
	}
	for order, want := range map[string][]string{
		"calls":  {ins, sel, bad},
		"p99":    {sel, bad, ins},
		"errors": {bad, ins, sel},
	} {
		if got := texts(buildView(hosts, prev, cur, order).stmts); !slices.Equal(got, want) {
			t.Errorf("by %s: %q; want %q", order, got, want)
		}
	}
	var el []int64
	for _, r := range v.inflight {
		el = append(el, r.q.ElapsedUS)
	}
	if !slices.Equal(el, []int64{9000, 1200, 300}) || v.inflight[0].host != "a:10000" {
		t.Errorf("in flight %v; want longest first from every host", v.inflight)
	}

	first := buildView(hosts, nil, prev, "total_time")
	if first.interval != 0 || first.stmts != nil || first.cluster.up != 2 {
		t.Errorf("first reading: %+v; want no rates yet", first)
	}
}

// TestTopRender checks the screen's layout: the sections in order, every host under the
// cluster with --per-host, rows cut to the width, and no more lines than the height.
func TestTopRender(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	long := "SELECT " + strings.Repeat("c, ", 100) + "v FROM ks.t WHERE k = ?"
	prev := []hostSample{reading(t0, 0, hist(0, 0, 0, 0, 0), "fast", stmt(long, true, 0, 0, 0))}
	var rows []adminapi.Statement
	for i := range 40 {
		rows = append(rows, stmt("SELECT v FROM ks.t"+strings.Repeat("x", i), true, uint64(100+i), 10, 0))
	}
	cur := []hostSample{reading(t0.Add(time.Second), 4000, hist(4000, 0, 0, 0, 0), "fast", append(rows, stmt(long, true, 10, 5000, 0))...)}
	v := buildView([]string{"http://127.0.0.1:10000"}, prev, cur, "total_time")
	lines := render(v, screenOpts{width: 100, height: 30, perHost: true})
	if len(lines) > 30 {
		t.Fatalf("%d lines on a screen of 30", len(lines))
	}
	var text []string
	for _, l := range lines {
		if n := len([]rune(l.text)); n > 100 {
			t.Errorf("a line of %d columns on a screen of 100: %q", n, l.text)
		}
		text = append(text, l.text)
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"tracecar top  1 hosts", "CLUSTER  1/1 up", "127.0.0.1:10000", "STATEMENTS  by total_time", "IN FLIGHT"} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q on the screen:\n%s", want, all)
		}
	}
	if strings.Index(all, "STATEMENTS") > strings.Index(all, "IN FLIGHT") || !strings.Contains(all, "…") {
		t.Errorf("sections out of order, or the long statement not cut:\n%s", all)
	}
	if lines[0].style != styleTitle || !strings.Contains(render(v, screenOpts{width: 200, height: 30, paused: true})[0].text, "PAUSED") {
		t.Error("the title line does not say PAUSED when paused")
	}
}
