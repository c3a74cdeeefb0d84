package loadcheck

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/tracecar/tracecar/loadcheck/stats"
)

// ScyllaDB PR #8314 (../shared/reference/001_6f8ba84e15579231.txt): op rates of five runs per
// mode, as in loadcheck/stats's tests.
var (
	scyllaBaseline = []float64{29018, 28909, 28900, 28921, 28821}
	scyllaFast     = []float64{26468, 26274, 26547, 26669, 26385}
	scyllaNoFast   = []float64{23591, 23584, 23598, 23596, 23601}
)

func TestLatencyPercentiles(t *testing.T) {
	tests := []struct {
		name   string
		record func(h *hdrhistogram.Histogram)
		want   Latency
	}{
		{
			// 1…10000 µs once each: the p-th percentile is 100·p µs.
			name: "uniform 1..10000 µs",
			record: func(h *hdrhistogram.Histogram) {
				for v := int64(1); v <= 10000; v++ {
					h.RecordValue(v)
				}
			},
			want: Latency{MeanMs: 5.0005, P50Ms: 5, P95Ms: 9.5, P99Ms: 9.9, P999Ms: 9.99, MaxMs: 10},
		},
		{
			// 990 × 1 ms and 10 × 100 ms: p99 is still 1 ms, p99.9 is 100 ms, and the mean
			// is (990·1 + 10·100)/1000 = 1.99 ms.
			name: "bimodal",
			record: func(h *hdrhistogram.Histogram) {
				h.RecordValues(1000, 990)
				h.RecordValues(100_000, 10)
			},
			want: Latency{MeanMs: 1.99, P50Ms: 1, P95Ms: 1, P99Ms: 1, P999Ms: 100, MaxMs: 100},
		},
		{
			name:   "single value",
			record: func(h *hdrhistogram.Histogram) { h.RecordValue(250) },
			want:   Latency{MeanMs: 0.25, P50Ms: 0.25, P95Ms: 0.25, P99Ms: 0.25, P999Ms: 0.25, MaxMs: 0.25},
		},
		{name: "empty", record: func(*hdrhistogram.Histogram) {}},
	}
	// Three significant digits: every figure is within 0.1% (plus half a bucket for the mean).
	close := func(got, want float64) bool { return math.Abs(got-want) <= want*0.0011 }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHist()
			tt.record(h)
			got := latencyOf(h)
			if !close(got.MeanMs, tt.want.MeanMs) || !close(got.P50Ms, tt.want.P50Ms) || !close(got.P95Ms, tt.want.P95Ms) ||
				!close(got.P99Ms, tt.want.P99Ms) || !close(got.P999Ms, tt.want.P999Ms) || !close(got.MaxMs, tt.want.MaxMs) {
				t.Errorf("latencyOf = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestMergedPercentiles(t *testing.T) {
	// A mode's percentiles come from merged histograms, not from averaged percentiles:
	// one run all at 1 ms and one all at 3 ms have a merged p99 of 3 ms, where the mean of
	// the two p99s would be 2 ms.
	a, b := &runResult{resp: newHist(), svc: newHist()}, &runResult{resp: newHist(), svc: newHist()}
	a.resp.RecordValues(1000, 100)
	b.resp.RecordValues(3000, 100)
	m := modeResult(&mode{name: "x"}, []*runResult{a, b}, false)
	if math.Abs(m.P99Ms-3) > 0.003 || m.P50Ms != 1 || math.Abs(m.MeanMs-2) > 0.002 {
		t.Errorf("merged p50, p99, mean = %v, %v, %v ms; want 1, 3, 2", m.P50Ms, m.P99Ms, m.MeanMs)
	}
}

func TestCompare(t *testing.T) {
	rep := &Report{Baseline: "baseline", Modes: []ModeResult{
		{Name: "baseline", Rounds: scyllaBaseline},
		{Name: "fast", Rounds: scyllaFast},
		{Name: "once", Rounds: []float64{20000}},
	}}
	for i := range rep.Modes {
		s := stats.Summarize(rep.Modes[i].Rounds)
		rep.Modes[i].OpRate, rep.Modes[i].OpRateStderr = s.Mean, s.Stderr
	}
	compare(rep)
	base, fast, once := rep.Modes[0], rep.Modes[1], rep.Modes[2]
	if base.DegradationPct != 0 || base.PValue == nil || *base.PValue != 1 {
		t.Errorf("baseline: degradation %v, p %v; want 0 and 1", base.DegradationPct, base.PValue)
	}
	if math.Abs(fast.DegradationPct-8.46) > 0.005 || fast.PValue == nil || *fast.PValue > 1e-6 {
		t.Errorf("fast: degradation %.3f, p %v; want 8.46%% (ScyllaDB PR #8314) and p < 1e-6", fast.DegradationPct, fast.PValue)
	}
	if once.PValue != nil {
		t.Errorf("one round: p = %v; want none", *once.PValue)
	}
}

func TestCommas(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {28913.8, "28,914"}, {-1234567, "-1,234,567"}, {math.NaN(), "-"}} {
		if got := commas(tt.in); got != tt.want {
			t.Errorf("commas(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestIntervalLine(t *testing.T) {
	// The columns line up with the header, as cassandra-stress's do: after the type
	// column ("total,"), every comma of the line is under a comma of the header.
	iv := Interval{TimeS: 3, TotalOps: 123456, Ops: 41000, OpRate: 41000, PkRate: 41000, RowRate: 41000,
		Latency: Latency{MeanMs: 0.78, P50Ms: 0.5, P95Ms: 1.9, P99Ms: 7.9, P999Ms: 19.3, MaxMs: 37.9}, Stderr: 0.01234}
	line := intervalLine(iv)
	commasAt := func(s string) []int {
		var at []int
		for i, r := range s {
			if r == ',' {
				at = append(at, i)
			}
		}
		return at
	}
	h, l := commasAt(intervalHeader), commasAt(line)
	if !strings.HasPrefix(line, "total,") || len(l) != len(h)+1 || !slices.Equal(l[1:], h) {
		t.Errorf("columns do not line up:\n%s\n%s", intervalHeader, line)
	}
}

// sampleReport builds a report with three modes and a budget, from synthetic histograms.
func sampleReport(t *testing.T) *Report {
	t.Helper()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Sidecar CPU per op and added-latency p99 per round: off about 10 µs/op and 3 µs,
	// fast 0.2 µs/op and 1 µs more, full 0.9 µs/op and 8 µs more, with some spread.
	cpu := map[string]float64{"off": 10, "fast": 10.2, "full": 10.9}
	added := map[string]float64{"off": 0.003, "fast": 0.004, "full": 0.011}
	mk := func(name string, rates []float64, latUs int64) ModeResult {
		var runs []*runResult
		for i, r := range rates {
			rr := &runResult{resp: newHist(), svc: newHist()}
			rr.resp.RecordValues(latUs, 1000)
			rr.resp.RecordValue(latUs * 20)
			rr.svc.RecordValues(latUs, 1001)
			wobble := 0.05 * float64(i%3-1) * float64(len(name)%3+1)
			rr.RunResult = RunResult{Round: i + 1, Position: 1, OpRate: r, Ops: 1001, StartedAt: start.Add(time.Duration(i) * 10 * time.Second),
				Intervals:         []Interval{{StartS: 0, TimeS: 1, OpRate: r * 0.99}, {StartS: 1, TimeS: 2, OpRate: r * 1.01}},
				SidecarCPUUsPerOp: ptr(cpu[name] + wobble), AddedP99Ms: ptr(added[name] * (1 + wobble))}
			runs = append(runs, rr)
		}
		return modeResult(&mode{name: name, spec: builtinModes[name], target: "127.0.0.1:9043"}, runs, name == "off")
	}
	rep := &Report{StartedAt: start, Baseline: "off", Settings: Settings{Rounds: 5, Workload: "write", Pop: "uniform(1..100)", DurationS: 3},
		Modes: []ModeResult{mk("off", scyllaBaseline, 500), mk("fast", scyllaFast, 550), mk("full", scyllaNoFast, 600)}}
	compare(rep)
	compareMetrics(rep)
	rep.Guardrail, rep.Breaches = judge(rep, []Budget{{Mode: "fast", Limit: 5}, {Mode: "full", Limit: 20},
		{Mode: "fast", Metric: MetricCPU, Limit: 0.3, Absolute: true}, {Mode: "full", Metric: MetricCPU, Limit: 1, Absolute: true},
		{Mode: "full", Metric: MetricAddedP99, Limit: 0.02, Absolute: true}}, false, VerdictBreach)
	summarizeHead(rep)
	return rep
}

func TestHTMLReport(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	if err := writeHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.HasPrefix(page, "<!DOCTYPE html>") {
		t.Error("page does not start with <!DOCTYPE html>")
	}
	// Self-contained: no script, no external resource.
	for _, bad := range []string{"<script", "src=", "href=\"http", "url(", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if n := strings.Count(page, "http"); n != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("page mentions http %d times beyond the SVG namespace", n)
	}

	// The page is well-formed XML; walk it and count what the charts hold.
	type chartInfo struct {
		series map[string]int // data-mode → polylines
		bars   map[string]bool
		errbar int
		budget int
	}
	charts := map[string]*chartInfo{}
	var cur *chartInfo
	var curMode string
	var inSeries bool
	dec := xml.NewDecoder(&b)
	dec.Strict = true
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("page is not well-formed: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case el.Name.Local == "svg":
				cur = &chartInfo{series: map[string]int{}, bars: map[string]bool{}}
				charts[attr["id"]] = cur
			case el.Name.Local == "g" && attr["class"] == "series":
				inSeries, curMode = true, attr["data-mode"]
				cur.series[curMode] += 0
			case el.Name.Local == "g" && attr["class"] == "bar":
				cur.bars[attr["data-mode"]] = true
			case el.Name.Local == "g" && attr["class"] == "errorbar":
				cur.errbar++
			case el.Name.Local == "g" && attr["class"] == "budget":
				cur.budget++
			case el.Name.Local == "polyline" && inSeries:
				cur.series[curMode]++
			}
		case xml.EndElement:
			depth--
			if el.Name.Local == "g" {
				inSeries = false
			}
		}
	}
	if depth != 0 {
		t.Errorf("unbalanced elements: depth %d at the end", depth)
	}
	for _, id := range []string{"chart-throughput", "chart-latency", "chart-overhead"} {
		if charts[id] == nil {
			t.Fatalf("no <svg id=%q>", id)
		}
	}
	for _, m := range []string{"off", "fast", "full"} {
		if got := charts["chart-throughput"].series[m]; got != 5 {
			t.Errorf("throughput chart has %d lines for %s; want one per round, 5", got, m)
		}
		if got := charts["chart-latency"].series[m]; got != 1 {
			t.Errorf("latency chart has %d lines for %s; want 1", got, m)
		}
		if !charts["chart-overhead"].bars[m] {
			t.Errorf("overhead chart has no bar for %s", m)
		}
	}
	if got := charts["chart-overhead"].errbar; got != 2 {
		t.Errorf("overhead chart has %d error bars; want 2 (every mode but the baseline)", got)
	}
	if got := charts["chart-overhead"].budget; got != 2 {
		t.Errorf("overhead chart has %d budget marks; want 2", got)
	}
	for _, want := range []string{"8.46%", "18.40%", "%[1-mode/off]", "BREACHED: fast", "ok: full"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestComparisonTable(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	p := newPrinter(&b, false)
	printComparison(p, rep)
	printGuardrail(p, rep)
	out := b.String()
	for _, want := range []string{"round 1", "round 3", "avg", "stdev", "stderr", "%[1-mode/off]", "p-value (Welch)",
		"round 5", "8.46% ±", "18.40% ±", "latency 99.9th", "GUARDRAIL BREACHED on op rate: fast costs 8.46%", "guardrail ok on op rate: full costs 18.40%"} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
}
