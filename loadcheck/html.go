package loadcheck

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// The HTML report is one self-contained page: inline CSS and inline SVG drawn here, no
// script and no fetch. It is also well-formed XML, which keeps it simple to check.

const htmlStyle = `
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1000px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 1em 0; }
th, td { padding: 0.25em 0.7em; text-align: right; border-bottom: 1px solid #ddd; }
th:first-child, td:first-child { text-align: left; }
.settings { color: #555; }
.breach { color: #b00020; font-weight: bold; }
.ok { color: #2e7d32; }
.unresolved { color: #8a5a00; font-weight: bold; }
.banner { border: 2px solid; border-radius: 6px; padding: 0.6em 1em; margin: 1em 0; }
.banner h2 { margin: 0 0 0.3em 0; font-size: 1.4em; }
.banner ul { margin: 0.3em 0; padding-left: 1.2em; }
.banner li { font-weight: normal; }
.banner-ok { background: #e8f5e9; border-color: #2e7d32; color: #1b5e20; }
.banner-breached { background: #fdecea; border-color: #b00020; color: #b00020; }
.banner-unresolved { background: #fff8e1; border-color: #c77c00; color: #8a5a00; }
.banner-none { background: #f5f5f5; border-color: #999; color: #333; }
.header td, .header th { border-bottom: 1px solid #eee; }
.header td:nth-child(2), .header th:nth-child(2) { text-align: left; }
svg { background: #fff; border: 1px solid #eee; }
svg text { font-size: 12px; fill: #333; }
.axis line, .axis path { stroke: #999; }
.grid line { stroke: #eee; }
.legend text { font-size: 12px; }
`

// throughputChart plots each run's interval op rates on the session's timeline, so that
// the alternation of modes and any drift are visible.
func throughputChart(b *strings.Builder, rep *Report) {
	c := &chart{w: 960, h: 360, left: 70, right: 20, top: 30, bottom: 45}
	var xmax, ymax float64
	for _, m := range rep.Modes {
		for _, r := range m.Runs {
			off := r.StartedAt.Sub(rep.StartedAt).Seconds()
			for _, iv := range r.Intervals {
				xmax = math.Max(xmax, off+iv.TimeS)
				ymax = math.Max(ymax, iv.OpRate)
			}
		}
	}
	yt := niceTicks(0, math.Max(ymax, 1)*1.05, 6)
	c.x0, c.x1, c.y0, c.y1 = 0, math.Max(xmax, 1), 0, yt[len(yt)-1]
	c.open(b, "chart-throughput", "Throughput over time per mode")
	legend(b, c, rep.Modes)
	c.yAxis(b, yt, "op/s")
	xt := niceTicks(0, c.x1, 8)
	labels := make([]string, len(xt))
	for i, t := range xt {
		labels[i] = fmtTick(t)
	}
	c.xAxis(b, xt, labels, "seconds since the start of the check")
	for i, m := range rep.Modes {
		fmt.Fprintf(b, `<g class="series" data-mode="%s" stroke="%s" fill="%s">`, esc(m.Name), modeColor(i), modeColor(i))
		for _, r := range m.Runs {
			off := r.StartedAt.Sub(rep.StartedAt).Seconds()
			// Each interval is a level segment over the time it covers.
			var pts []string
			for _, iv := range r.Intervals {
				y := c.py(iv.OpRate)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", c.px(off+iv.StartS), y, c.px(off+iv.TimeS), y))
			}
			if len(pts) == 0 {
				continue
			}
			fmt.Fprintf(b, `<polyline fill="none" stroke-width="2" points="%s"><title>%s round %d: %s op/s</title></polyline>`,
				strings.Join(pts, " "), esc(m.Name), r.Round, commas(r.OpRate))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
}

// latencyQuantiles are the points of the percentile spectrum: 0, 90, 99, … up to 99.999%.
func latencyQuantiles() []float64 {
	var qs []float64
	for k := 0; k <= 50; k++ {
		qs = append(qs, 100*(1-math.Pow(10, -float64(k)/10)))
	}
	return qs
}

// latencyChart draws each mode's latency by percentile, from the merged histograms, with
// the percentile axis spread logarithmically as HdrHistogram's plots do.
func latencyChart(b *strings.Builder, rep *Report) {
	c := &chart{w: 960, h: 380, left: 70, right: 45, top: 30, bottom: 45, logX: true}
	c.x0, c.x1 = 1, 1e5
	type pt struct{ x, y float64 }
	series := make([][]pt, len(rep.Modes))
	var ymax float64
	for i, m := range rep.Modes {
		if m.resp == nil || m.resp.TotalCount() == 0 {
			continue
		}
		n := float64(m.resp.TotalCount())
		for _, q := range latencyQuantiles() {
			x := 1 / (1 - q/100)
			if x > n && x > 10 {
				break
			}
			y := float64(m.resp.ValueAtQuantile(q)) / 1000
			series[i] = append(series[i], pt{x, y})
			ymax = math.Max(ymax, y)
		}
	}
	yt := niceTicks(0, math.Max(ymax, 0.001)*1.05, 6)
	c.y0, c.y1 = 0, yt[len(yt)-1]
	c.open(b, "chart-latency", "Latency by percentile per mode")
	legend(b, c, rep.Modes)
	c.yAxis(b, yt, "latency (ms)")
	c.xAxis(b, []float64{1, 10, 100, 1000, 1e4, 1e5}, []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"}, "percentile")
	for i, m := range rep.Modes {
		fmt.Fprintf(b, `<g class="series" data-mode="%s" stroke="%s" fill="%s">`, esc(m.Name), modeColor(i), modeColor(i))
		var pts []string
		for _, p := range series[i] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.px(p.x), c.py(p.y)))
		}
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke-width="2" points="%s"><title>%s: p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms</title></polyline>`,
				strings.Join(pts, " "), esc(m.Name), m.P50Ms, m.P99Ms, m.P999Ms, m.MaxMs)
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
}

// overheadChart draws each mode's degradation versus the baseline as a bar with ± one
// standard error, and its budget when it has one.
func overheadChart(b *strings.Builder, rep *Report, budgets map[string]float64) {
	c := &chart{w: 960, h: 360, left: 70, right: 20, top: 30, bottom: 45}
	lo, hi := 0.0, 1.0
	for _, m := range rep.Modes {
		lo = math.Min(lo, m.DegradationPct-m.DegradationErr)
		hi = math.Max(hi, m.DegradationPct+m.DegradationErr)
		if bud, ok := budgets[m.Name]; ok {
			hi = math.Max(hi, bud)
			lo = math.Min(lo, bud)
		}
	}
	span := hi - lo
	yt := niceTicks(lo-0.05*span, hi+0.05*span, 6)
	c.y0, c.y1 = yt[0], yt[len(yt)-1]
	c.x0, c.x1 = 0, float64(max(len(rep.Modes), 1))
	c.open(b, "chart-overhead", "Op rate degradation versus "+rep.Baseline+" with error bars")
	c.yAxis(b, yt, "% below "+rep.Baseline)
	xs := make([]float64, len(rep.Modes))
	labels := make([]string, len(rep.Modes))
	for i, m := range rep.Modes {
		xs[i], labels[i] = float64(i)+0.5, m.Name
	}
	c.xAxis(b, xs, labels, "mode (bars: 100·(1 − mode/"+rep.Baseline+"), whiskers: ± 1 standard error)")
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", c.left, c.w-c.right, c.py(0), c.py(0))
	bw := (c.px(1) - c.px(0)) * 0.5
	for i, m := range rep.Modes {
		x := c.px(float64(i) + 0.5)
		y0, y1 := c.py(0), c.py(m.DegradationPct)
		top, hgt := math.Min(y0, y1), math.Abs(y1-y0)
		p := "-"
		if m.PValue != nil && !m.Baseline {
			p = fmt.Sprintf("%.2g", *m.PValue)
		}
		fmt.Fprintf(b, `<g class="bar" data-mode="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %.2f%% ± %.2f%% (p = %s)</title></rect>`,
			esc(m.Name), x-bw/2, top, bw, math.Max(hgt, 0.5), modeColor(i), esc(m.Name), m.DegradationPct, m.DegradationErr, p)
		if !m.Baseline {
			ya, yb := c.py(m.DegradationPct-m.DegradationErr), c.py(m.DegradationPct+m.DegradationErr)
			fmt.Fprintf(b, `<g class="errorbar" stroke="#222" stroke-width="1.5"><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/></g>`,
				x, x, ya, yb, x-8, x+8, ya, ya, x-8, x+8, yb, yb)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.2f%%</text>`, x, math.Min(ya, yb)-6, m.DegradationPct)
		}
		if bud, ok := budgets[m.Name]; ok {
			yb := c.py(bud)
			fmt.Fprintf(b, `<g class="budget"><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#b00020" stroke-width="2" stroke-dasharray="6 3"/><text x="%.1f" y="%.1f" text-anchor="start" fill="#b00020">budget %g%%</text></g>`,
				x-bw*0.8, x+bw*0.8, yb, yb, x-bw*0.8, yb-5, bud)
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
}

// verdictBanner writes the run's verdict first: ok in green, breached in red, not resolved
// (under --verdict prove, a budget neither shown within nor over its limit) in amber, each
// budget's verdict under it; without budgets, a grey banner says the run compared only.
func verdictBanner(b *strings.Builder, rep *Report) {
	class, title := "banner-none", "No budget: comparison only (set --max-overhead for a verdict)"
	switch rep.Outcome {
	case RunOK:
		class, title = "banner-ok", "OK: every budget within its limit"
	case RunBreached:
		class, title = "banner-breached", "BREACHED: a budget is shown over its limit"
	case RunNotResolved:
		class, title = "banner-unresolved", "NOT RESOLVED: a budget is not shown within its limit; more rounds would decide"
	}
	if line := verdictLine(rep); line != "" {
		// The line's count of budgets, after its outcome, which the title has said.
		if i := strings.Index(line, " ("); i >= 0 {
			title += line[i:]
		}
	}
	fmt.Fprintf(b, "<section id=\"verdict\" class=\"banner %s\" data-outcome=\"%s\">\n<h2>%s</h2>\n", class, esc(rep.Outcome), esc(title))
	if len(rep.Guardrail) > 0 {
		b.WriteString("<ul>\n")
		for _, v := range rep.Guardrail {
			switch verdictOutcome(v) {
			case RunBreached:
				fmt.Fprintf(b, "<li class=\"breach\">BREACHED: %s</li>\n", esc(v.Reason))
			case RunNotResolved:
				fmt.Fprintf(b, "<li class=\"unresolved\">NOT RESOLVED: %s</li>\n", esc(v.Reason))
			default:
				fmt.Fprintf(b, "<li class=\"ok\">ok: %s</li>\n", esc(v.Reason))
			}
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</section>\n")
}

// headerSettings writes, under the verdict, what each mode cost and the settings in force:
// per mode, its tracing settings (the slow-query threshold among them), its op rate, and
// its sidecar CPU over the baseline in µs/op and in cores at that rate; for a profile, its
// file, op mix and per-operation rows.
func headerSettings(b *strings.Builder, rep *Report) {
	b.WriteString("<section id=\"header\">\n<table class=\"header\">\n<thead><tr><th>mode</th><th>settings in force</th><th>op rate (op/s)</th><th>sidecar CPU vs " + esc(rep.Baseline) + "</th><th>in cores at that rate</th></tr></thead>\n<tbody>\n")
	for i := range rep.Modes {
		m := &rep.Modes[i]
		cpu, core := "baseline", "-"
		if !m.Baseline {
			cpu = "unknown"
			if m.SidecarCPUUsPerOpDiff != nil {
				cpu = fmt.Sprintf("%+.2f µs/op", *m.SidecarCPUUsPerOpDiff)
				if m.SidecarCPUUsPerOpDiffStderr != nil {
					cpu = fmt.Sprintf("%+.2f ± %.2f µs/op", *m.SidecarCPUUsPerOpDiff, *m.SidecarCPUUsPerOpDiffStderr)
				}
			}
			if m.SidecarCPUCoresDiff != nil {
				core = fmt.Sprintf("%+.3f core (%+.1f%% of a core)", *m.SidecarCPUCoresDiff, 100**m.SidecarCPUCoresDiff)
			}
		}
		fmt.Fprintf(b, "<tr data-mode=\"%s\"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"cores\">%s</td></tr>\n",
			esc(m.Name), esc(m.Name), esc(m.Settings.String()), commas(m.OpRate), esc(cpu), esc(core))
	}
	b.WriteString("</tbody>\n</table>\n")
	s := rep.Settings
	if s.Profile != "" {
		fmt.Fprintf(b, "<p id=\"profile\">Profile <code>%s</code>, op mix %s.</p>\n", esc(s.Profile), esc(opMixText(s.OpMix)))
		b.WriteString("<table class=\"header\" id=\"per-op\">\n<thead><tr><th>mode</th><th>operation</th><th>count</th><th>op/s</th><th>rows/s</th><th>p50 (ms)</th><th>p99 (ms)</th><th>errors</th></tr></thead>\n<tbody>\n")
		for _, m := range rep.Modes {
			for _, o := range m.PerOp {
				fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.3f</td><td>%.3f</td><td>%s</td></tr>\n",
					esc(m.Name), esc(o.Name), commas(float64(o.Count)), commas(o.OpRate), commas(o.RowRate), o.P50Ms, o.P99Ms, commas(float64(o.Errors)))
			}
		}
		b.WriteString("</tbody>\n</table>\n")
	}
	b.WriteString("</section>\n")
}

func writeHTML(w io.Writer, rep *Report) error {
	budgets := map[string]float64{} // the op-rate budgets, which the op-rate chart draws
	for _, v := range rep.Guardrail {
		if v.Metric == MetricOps {
			budgets[v.Mode] = v.BudgetPct
		}
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	b.WriteString("<link rel=\"icon\" href=\"data:,\"/>\n<title>tracecar loadcheck</title>\n<style>")
	b.WriteString(htmlStyle)
	b.WriteString("</style>\n</head>\n<body>\n<h1>tracecar loadcheck</h1>\n")
	s := rep.Settings
	limit := fmt.Sprintf("%gs per run", s.DurationS)
	if s.Ops > 0 {
		limit = fmt.Sprintf("%d ops per run", s.Ops)
	}
	rate := "unthrottled"
	if s.Rate > 0 {
		rate = fmt.Sprintf("fixed rate %s op/s", commas(s.Rate))
	}
	fmt.Fprintf(&b, "<p class=\"settings\">%s: workload %s, pop %s, %d rounds, %s after a %gs warmup, %d workers, %s, CL %s, compression %s. Baseline: %s.</p>\n",
		esc(rep.StartedAt.Format("2006-01-02 15:04:05 MST")), esc(s.Workload), esc(s.Pop), s.Rounds, limit, s.WarmupS, s.Concurrency, rate, esc(s.CL), esc(s.Compression), esc(rep.Baseline))
	verdictBanner(&b, rep)
	headerSettings(&b, rep)

	b.WriteString("<section id=\"summary\">\n<h2>Comparison</h2>\n<table>\n<thead><tr><th>op rate (op/s)</th>")
	for _, m := range rep.Modes {
		fmt.Fprintf(&b, "<th>%s</th>", esc(m.Name))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	row := func(label string, cell func(m *ModeResult) string) {
		fmt.Fprintf(&b, "<tr><td>%s</td>", esc(label))
		for i := range rep.Modes {
			fmt.Fprintf(&b, "<td>%s</td>", esc(cell(&rep.Modes[i])))
		}
		b.WriteString("</tr>\n")
	}
	for _, cr := range comparisonRows(rep) {
		if cr.label != "" {
			row(cr.label, cr.cell)
		}
	}
	b.WriteString("</tbody>\n</table>\n")
	if c := rep.CPU; c.Ops > 0 && c.Seconds > 0 {
		fmt.Fprintf(&b, "<p>CPU: %.3f CPU-s per 10k ops (%s ops per CPU-second) for %s. %s.</p>\n",
			c.SecondsPer10kOps, commas(c.OpsPerCPUSecond), esc(c.Scope), esc(c.Reference))
	}
	b.WriteString("</section>\n")

	// The overhead comes first, in the figures the verdicts test: the sidecar's CPU per op
	// and its added-latency p99 over the baseline; the op rate second.
	b.WriteString("<section id=\"overhead\">\n<h2>Overhead versus " + esc(rep.Baseline) + "</h2>\n")
	b.WriteString("<h3>Sidecar CPU per op</h3>\n")
	diffChart(&b, rep, "chart-cpu", MetricCPU, "µs/op", 1)
	b.WriteString("<h3>Added-latency p99</h3>\n")
	diffChart(&b, rep, "chart-added-p99", MetricAddedP99, "µs", 1e3)
	b.WriteString("<h3>Op rate</h3>\n")
	overheadChart(&b, rep, budgets)
	b.WriteString("</section>\n<section id=\"throughput\">\n<h2>Throughput over time</h2>\n")
	throughputChart(&b, rep)
	b.WriteString("</section>\n<section id=\"latency\">\n<h2>Latency percentiles</h2>\n")
	latencyChart(&b, rep)
	b.WriteString("</section>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
