package loadcheck

import (
	"fmt"
	"math"
	"strings"

	"github.com/tracecar/tracecar/loadcheck/stats"
)

// diffPoint is one mode's difference from the baseline on a metric, in a chart's unit:
// the estimate, its one-sided 95% bounds (each the bound a verdict at p < 0.05 tests, so
// that the whiskers and the verdict never disagree), and the limit of the mode's budget
// on the metric, when it has one.
type diffPoint struct {
	mode      int // index in Report.Modes, for its colour
	name      string
	diff      float64
	lo, hi    float64
	hasBounds bool
	limit     *float64
}

// diffPoints returns the non-baseline modes' differences on metric, scaled by scale (1 for
// µs/op, 1e3 for milliseconds shown in µs), with their budgets' limits.
func diffPoints(rep *Report, metric string, scale float64) []diffPoint {
	var out []diffPoint
	for i := range rep.Modes {
		m := &rep.Modes[i]
		d, ok := m.diffs[metric]
		if m.Baseline || !ok || !d.ok {
			continue
		}
		p := diffPoint{mode: i, name: m.Name, diff: d.diff * scale, lo: d.diff * scale, hi: d.diff * scale}
		if d.df > 0 {
			q := stats.TQuantile(1-Significance, d.df) * d.diffErr * scale
			p.lo, p.hi, p.hasBounds = p.diff-q, p.diff+q, true
		}
		for _, v := range rep.Guardrail {
			if v.Mode != m.Name || v.Metric != metric {
				continue
			}
			l := v.Limit * scale
			if v.Unit == "%" {
				l = v.Limit / 100 * d.baseMean * scale
			}
			p.limit = &l
		}
		out = append(out, p)
	}
	return out
}

// diffChart draws each mode's difference from the baseline as a bar, its one-sided 95%
// bounds as whiskers, and its budget's limit as a dashed red line.
func diffChart(b *strings.Builder, rep *Report, id, metric, unit string, scale float64) {
	pts := diffPoints(rep, metric, scale)
	what := metricNames[metric]
	if len(pts) == 0 {
		fmt.Fprintf(b, "<p id=\"%s\" class=\"nochart\">No %s figures: the run could not read them.</p>\n", id, esc(what))
		return
	}
	c := &chart{w: 960, h: 320, left: 70, right: 20, top: 30, bottom: 45}
	lo, hi := 0.0, 0.0
	for _, p := range pts {
		lo, hi = math.Min(lo, p.lo), math.Max(hi, p.hi)
		if p.limit != nil {
			lo, hi = math.Min(lo, *p.limit), math.Max(hi, *p.limit)
		}
	}
	if hi == lo {
		hi = lo + 1
	}
	span := hi - lo
	yt := niceTicks(lo-0.08*span, hi+0.08*span, 6)
	c.y0, c.y1 = yt[0], yt[len(yt)-1]
	c.x0, c.x1 = 0, float64(len(pts))
	c.open(b, id, fmt.Sprintf("%s over %s, with 95%% bounds and budget limits", what, rep.Baseline))
	c.yAxis(b, yt, unit+" over "+rep.Baseline)
	xs := make([]float64, len(pts))
	labels := make([]string, len(pts))
	for i, p := range pts {
		xs[i], labels[i] = float64(i)+0.5, p.name
	}
	c.xAxis(b, xs, labels, "mode (bars: mode − "+rep.Baseline+", paired by round; whiskers: one-sided 95% bounds; dashed: the budget's limit)")
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", c.left, c.w-c.right, c.py(0), c.py(0))
	bw := (c.px(1) - c.px(0)) * 0.4
	for i, p := range pts {
		x := c.px(float64(i) + 0.5)
		y0, y1 := c.py(0), c.py(p.diff)
		fmt.Fprintf(b, `<g class="bar" data-mode="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s %+.3f %s (95%% bounds %+.3f to %+.3f)</title></rect></g>`,
			esc(p.name), x-bw/2, math.Min(y0, y1), bw, math.Max(math.Abs(y1-y0), 0.5), modeColor(p.mode), esc(p.name), esc(what), p.diff, esc(unit), p.lo, p.hi)
		if p.hasBounds {
			ya, yb := c.py(p.lo), c.py(p.hi)
			fmt.Fprintf(b, `<g class="interval" stroke="#222" stroke-width="1.5"><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/></g>`,
				x, x, ya, yb, x-8, x+8, ya, ya, x-8, x+8, yb, yb)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%+.2f</text>`, x+bw/2+4, math.Min(c.py(p.hi), c.py(p.diff))-6, p.diff)
		if p.limit != nil {
			yl := c.py(*p.limit)
			fmt.Fprintf(b, `<g class="limit"><line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#b00020" stroke-width="2" stroke-dasharray="6 3"/><text x="%.1f" y="%.1f" text-anchor="start" style="fill:#b00020">limit %+.3g %s</text></g>`,
				x-bw, x+bw, yl, yl, x-bw, yl-5, *p.limit, esc(unit))
		}
		b.WriteString("\n")
	}
	b.WriteString("</svg>\n")
}
