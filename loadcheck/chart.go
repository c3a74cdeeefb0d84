package loadcheck

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// SVG charts for the HTML report: a chart maps data to a viewport with margins, axes and ticks.

var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

func modeColor(i int) string { return palette[i%len(palette)] }

// chart maps data coordinates to an SVG viewport with margins.
type chart struct {
	w, h                     float64
	left, right, top, bottom float64
	x0, x1, y0, y1           float64
	logX                     bool
}

func (c *chart) px(x float64) float64 {
	if c.logX {
		x, c0, c1 := math.Log10(x), math.Log10(c.x0), math.Log10(c.x1)
		return c.left + (x-c0)/(c1-c0)*(c.w-c.left-c.right)
	}
	return c.left + (x-c.x0)/(c.x1-c.x0)*(c.w-c.left-c.right)
}

func (c *chart) py(y float64) float64 {
	return c.h - c.bottom - (y-c.y0)/(c.y1-c.y0)*(c.h-c.top-c.bottom)
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// The ticks enclose [lo, hi], so that nothing plotted leaves the chart.
	first, last := math.Floor(lo/step+1e-9), math.Ceil(hi/step-1e-9)
	var ticks []float64
	for k := first; k <= last; k++ {
		ticks = append(ticks, k*step)
	}
	return ticks
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 10000:
		return commas(v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func esc(s string) string { return html.EscapeString(s) }

func (c *chart) open(b *strings.Builder, id, label string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" id="%s" class="chart" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`+"\n",
		id, c.w, c.h, c.w, c.h, esc(label))
}

// yAxis draws horizontal grid lines and labels, and the y axis title.
func (c *chart) yAxis(b *strings.Builder, ticks []float64, title string) {
	b.WriteString(`<g class="grid">`)
	for _, t := range ticks {
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, c.left, c.w-c.right, c.py(t), c.py(t))
	}
	b.WriteString("</g>\n<g class=\"axis\">")
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, c.left, c.left, c.top, c.h-c.bottom)
	for _, t := range ticks {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, c.left-6, c.py(t), fmtTick(t))
	}
	fmt.Fprintf(b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>`, (c.top+c.h-c.bottom)/2, esc(title))
	b.WriteString("</g>\n")
}

// xAxis draws the x axis with labels at ticks.
func (c *chart) xAxis(b *strings.Builder, ticks []float64, labels []string, title string) {
	b.WriteString(`<g class="axis">`)
	fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, c.left, c.w-c.right, c.h-c.bottom, c.h-c.bottom)
	for i, t := range ticks {
		x := c.px(t)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x, x, c.h-c.bottom, c.h-c.bottom+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, c.h-c.bottom+18, esc(labels[i]))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (c.left+c.w-c.right)/2, c.h-6, esc(title))
	b.WriteString("</g>\n")
}

func legend(b *strings.Builder, c *chart, modes []ModeResult) {
	b.WriteString(`<g class="legend">`)
	x := c.left
	for i, m := range modes {
		fmt.Fprintf(b, `<rect x="%.1f" y="6" width="12" height="12" fill="%s"/><text x="%.1f" y="16">%s</text>`, x, modeColor(i), x+16, esc(m.Name))
		x += 28 + 7.5*float64(len(m.Name))
	}
	b.WriteString("</g>\n")
}
