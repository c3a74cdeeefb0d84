package loadcheck

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tracecar/tracecar/loadcheck/stats"
)

// intervalHeader and intervalLine follow cassandra-stress's interval output. Latencies are
// in milliseconds, time in seconds since the run started.
const intervalHeader = "type       total ops,    op/s,    pk/s,   row/s,    mean,     med,     .95,     .99,    .999,     max,   time,   stderr, errors"

func intervalLine(iv Interval) string {
	return fmt.Sprintf("%-10s%10d,%8.0f,%8.0f,%8.0f,%8.2f,%8.2f,%8.2f,%8.2f,%8.2f,%8.2f,%7.1f,%9.5f,%7d",
		"total,", iv.TotalOps, iv.OpRate, iv.PkRate, iv.RowRate, iv.MeanMs, iv.P50Ms, iv.P95Ms, iv.P99Ms, iv.P999Ms, iv.MaxMs, iv.TimeS, iv.Stderr, iv.Errors)
}

// printResults prints a cassandra-stress-style Results block for one run. A profile's
// run follows each figure with its operations' in brackets, as cassandra-stress does:
// Op rate : 6,681 op/s [read_event_1: 1,109 op/s, read_event_2: 1,119 op/s, …].
func printResults(p *printer, r *runResult, fixedRate bool) {
	var b bytes.Buffer
	lats := make([]Latency, len(r.PerOp))
	for i, o := range r.PerOp {
		if o.hist != nil {
			lats[i] = latencyOf(o.hist)
		}
	}
	per := func(f func(o *OpResult, l Latency) string) string {
		if len(r.PerOp) == 0 {
			return ""
		}
		parts := make([]string, len(r.PerOp))
		for i := range r.PerOp {
			parts[i] = r.PerOp[i].Name + ": " + f(&r.PerOp[i], lats[i])
		}
		return " [" + strings.Join(parts, ", ") + "]"
	}
	line := func(label, value string) { fmt.Fprintf(&b, "%-26s: %s\n", label, value) }
	ms := func(v float64) string { return fmt.Sprintf("%.3f ms", v) }
	latLine := func(label string, v float64, f func(l Latency) float64) {
		line(label, ms(v)+per(func(_ *OpResult, l Latency) string { return ms(f(l)) }))
	}
	b.WriteString("\nResults:\n")
	line("Op rate", commas(r.OpRate)+" op/s"+per(func(o *OpResult, _ Latency) string { return commas(o.OpRate) + " op/s" }))
	line("Partition rate", commas(r.PkRate)+" pk/s"+per(func(o *OpResult, _ Latency) string { return commas(o.PkRate) + " pk/s" }))
	line("Row rate", commas(r.RowRate)+" row/s"+per(func(o *OpResult, _ Latency) string { return commas(o.RowRate) + " row/s" }))
	latLine("Latency mean", r.MeanMs, func(l Latency) float64 { return l.MeanMs })
	latLine("Latency median", r.P50Ms, func(l Latency) float64 { return l.P50Ms })
	latLine("Latency 95th percentile", r.P95Ms, func(l Latency) float64 { return l.P95Ms })
	latLine("Latency 99th percentile", r.P99Ms, func(l Latency) float64 { return l.P99Ms })
	latLine("Latency 99.9th percentile", r.P999Ms, func(l Latency) float64 { return l.P999Ms })
	latLine("Latency max", r.MaxMs, func(l Latency) float64 { return l.MaxMs })
	if fixedRate {
		line("Service time mean", ms(r.Service.MeanMs))
		line("Service time median", ms(r.Service.P50Ms))
		line("Service time 99th", ms(r.Service.P99Ms))
		line("Service time max", ms(r.Service.MaxMs))
	}
	if len(r.PerOp) > 0 {
		line("Total operations", commas(float64(r.Ops))+per(func(o *OpResult, _ Latency) string { return commas(float64(o.Count)) }))
		line("Total partitions", commas(float64(r.Partitions))+per(func(o *OpResult, _ Latency) string { return commas(float64(o.Partitions)) }))
		line("Total rows", commas(float64(r.Rows))+per(func(o *OpResult, _ Latency) string { return commas(float64(o.Rows)) }))
		line("Total errors", commas(float64(r.Errors))+per(func(o *OpResult, _ Latency) string { return commas(float64(o.Errors)) }))
	} else {
		line("Total partitions", commas(float64(r.Ops)))
		line("Total errors", commas(float64(r.Errors)))
	}
	if r.Unsent > 0 {
		line("Not sent", commas(float64(r.Unsent))+" scheduled operations: the target fell behind the rate, so the latencies understate")
	}
	if r.FirstError != "" {
		line("First error", r.FirstError)
	}
	line("Client CPU", fmt.Sprintf("%.2f s, %.1f µs/op", r.CPUSeconds, r.CPUUsPerOp))
	line("Sidecar CPU", usPerOp(r.SidecarCPUUsPerOp))
	if r.SidecarUserCPUUsPerOp != nil {
		line("Sidecar user CPU", usPerOp(r.SidecarUserCPUUsPerOp))
	}
	line("Node CPU", usPerOp(r.NodeCPUUsPerOp))
	if r.AddedP50Ms != nil {
		line("Added latency median", fmt.Sprintf("%.1f µs", *r.AddedP50Ms*1e3))
		line("Added latency 99th", fmt.Sprintf("%.1f µs", *r.AddedP99Ms*1e3))
	}
	d := time.Duration(r.DurationS * float64(time.Second)).Round(time.Second)
	line("Total operation time", fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60))
	p.printf("%s", b.String())
}

// printComparison prints the final table, laid out like the one in ScyllaDB's fast slow
// query tracing PR: a row per round, then avg, stdev, stderr and the degradation.
func printComparison(p *printer, rep *Report) {
	var b bytes.Buffer
	if line := verdictLine(rep); line != "" {
		b.WriteString("\n" + line + "\n")
	}
	b.WriteString(settingsLines(rep))
	comparisonTable(&b, rep)
	for i, o := range rep.Order {
		fmt.Fprintf(&b, "round %d order: %s\n", i+1, strings.Join(o, ", "))
	}
	if rep.Settings.Rate > 0 {
		fmt.Fprintf(&b, "At a fixed rate the op rate is set by design: the verdict is CPU per op and added latency.\n")
	}
	costLines(&b, rep)
	vsPreviousLines(&b, rep)
	var worst float64
	for _, m := range rep.Modes {
		if m.OpRate > 0 {
			worst = math.Max(worst, 100*m.OpRateStderr/m.OpRate)
		}
	}
	if worst > noisyStderrPct {
		fmt.Fprintf(&b, "note: a mode's op rate has a standard error of %.1f%% over rounds: the machine is busy or the runs are short; more --rounds or a longer --duration narrow the error bars\n", worst)
	}
	c := rep.CPU
	if c.Ops > 0 && c.Seconds > 0 {
		fmt.Fprintf(&b, "CPU: %.3f CPU-s per 10k ops (%.1f µs/op, %s ops per CPU-second) for %s; %s\n",
			c.SecondsPer10kOps, c.UsPerOp, commas(c.OpsPerCPUSecond), c.Scope, c.Reference)
	}
	p.printf("%s", b.String())
}

// comparisonTable writes the modes side by side, a column each, a row of comparisonRows
// each.
func comparisonTable(b *bytes.Buffer, rep *Report) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(m *ModeResult) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for i := range rep.Modes {
			fmt.Fprintf(tw, "%s\t", cell(&rep.Modes[i]))
		}
		fmt.Fprintln(tw)
	}
	b.WriteString("\nComparison (op rate in op/s, latency in ms; baseline " + rep.Baseline + "; " + protocolString(rep.Settings.Protocol) + ")\n")
	row("op rate", func(m *ModeResult) string { return m.Name })
	for _, cr := range comparisonRows(rep) {
		row(cr.label, cr.cell)
	}
	tw.Flush()
}

// costLines writes, for each mode but the baseline, its CPU per op and added latency
// against the baseline's and, unless at a fixed rate, its op rate.
func costLines(b *bytes.Buffer, rep *Report) {
	for _, m := range rep.Modes {
		if m.Baseline {
			continue
		}
		for _, k := range []string{MetricCPU, MetricUserCPU, MetricNodeCPU} {
			if line := diffLine(&m, k, rep.Baseline); line != "" {
				b.WriteString(line)
			}
		}
		if m.AddedP99Ms != nil {
			base := rep.Mode(rep.Baseline)
			if base != nil && base.AddedP99Ms != nil {
				fmt.Fprintf(b, "%s: added latency p50 %.1f µs, p99 %.1f µs (%s: %.1f µs, %.1f µs)",
					m.Name, *m.AddedP50Ms*1e3, *m.AddedP99Ms*1e3, rep.Baseline, *base.AddedP50Ms*1e3, *base.AddedP99Ms*1e3)
				if m.fixedCostOnly() {
					b.WriteString(" [" + fixedCostNote + "]")
				}
				b.WriteString("\n")
			}
		}
		if rep.Settings.Rate > 0 {
			continue
		}
		b.WriteString(opRateLine(&m, rep.Baseline))
	}
}

// vsPreviousLines writes each mode's difference from the mode before it in the order,
// with its significance.
func vsPreviousLines(b *bytes.Buffer, rep *Report) {
	for _, m := range rep.Modes {
		for _, d := range m.VsPrevious {
			unit, scale := "µs/op", 1.0
			if d.Metric == MetricAddedP99 {
				unit, scale = "µs", 1e3
			}
			sig := "no p-value with one round"
			if d.PValue != nil {
				sig = fmt.Sprintf("p = %.2g, not significant", *d.PValue)
				if *d.PValue < Significance {
					sig = fmt.Sprintf("p = %.2g, significant", *d.PValue)
				}
			}
			fmt.Fprintf(b, "%s vs %s: %s %+.3f ± %.3f %s (%s)\n", m.Name, d.Mode, metricNames[d.Metric], d.Diff*scale, d.Stderr*scale, unit, sig)
		}
	}
}

// opRateLine is the sentence of m's op rate against the baseline's, with its significance,
// in one sign convention: a size, above or below.
func opRateLine(m *ModeResult, baseline string) string {
	var b strings.Builder
	verb := "below"
	d := m.DegradationPct
	if d < 0 {
		verb, d = "above", -d
	}
	sig := "no p-value with one round"
	if m.PValue != nil {
		sig = fmt.Sprintf("Welch p = %.2g, ", *m.PValue)
		if *m.PValue < Significance {
			sig += "significant"
		} else {
			sig += "not significant"
		}
		if m.PairedPValue != nil {
			// The same convention as the sentence's: a size and above or below.
			pverb, pd := "below", m.PairedDegradationPct
			if pd < 0 {
				pverb, pd = "above", -pd
			}
			sig += fmt.Sprintf("; paired by round: %.2f%% ± %.2f%% %s, p = %.2g", pd, m.PairedDegradationErr, pverb, *m.PairedPValue)
		}
	}
	fmt.Fprintf(&b, "%s: op rate %.2f%% ± %.2f%% %s %s (%s)", m.Name, d, m.DegradationErr, verb, baseline, sig)
	if m.MinDetectablePct > 0 {
		fmt.Fprintf(&b, "; at this noise, below %.2f%% cannot be told from zero", m.MinDetectablePct)
	}
	b.WriteString("\n")
	return b.String()
}

// usPerOp formats a CPU figure that may be unknown.
func usPerOp(v *float64) string {
	if v == nil {
		return "unknown (no /metrics)"
	}
	return fmt.Sprintf("%.2f µs/op", *v)
}

// diffLine says how a mode's CPU per op differs from the baseline's, with its error, its
// significance and the smallest difference the run could detect; "" when unknown.
func diffLine(m *ModeResult, metric, baseline string) string {
	d := m.diffs[metric]
	if !d.ok {
		return ""
	}
	p, test := d.welchP, "Welch"
	if d.pairedP != nil {
		p, test = d.pairedP, "paired"
	}
	sig := "no p-value with one round"
	if p != nil {
		verdict := "not significant"
		if *p < Significance {
			verdict = "significant"
		}
		sig = fmt.Sprintf("%s p = %.2g, %s", test, *p, verdict)
	}
	line := fmt.Sprintf("%s: %s %+.3f ± %.3f µs/op (%+.2f%% ± %.2f%%) vs %s", m.Name, metricNames[metric],
		d.diff, d.diffErr, stats.Finite(d.pct), stats.Finite(d.pctErr), baseline)
	if c, ok := cores(&d.diff, m.OpRate); ok {
		line += ", " + coresText(c, m.OpRate)
	}
	line += " (" + sig + ")"
	if m.fixedCostOnly() {
		line += " [" + fixedCostNote + "]"
	}
	if d.minDetect > 0 {
		line += fmt.Sprintf("; at this noise, below %.3f µs/op cannot be told from zero", d.minDetect)
	}
	return line + "\n"
}

// noisyStderrPct is the relative standard error of a mode's op rate above which the
// comparison warns that its error bars are wide.
const noisyStderrPct = 5

func pct(x, of float64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*x/of)
}

// printGuardrail prints each budget's verdict; a breach says so plainly, and a budget that
// fails the run under prove without being shown over its limit says it is not resolved.
func printGuardrail(p *printer, rep *Report) {
	for _, v := range rep.Guardrail {
		switch verdictOutcome(v) {
		case RunBreached:
			p.printf("GUARDRAIL BREACHED on %s: %s\n", metricNames[v.Metric], v.Reason)
		case RunNotResolved:
			p.printf("GUARDRAIL NOT RESOLVED on %s: %s\n", metricNames[v.Metric], v.Reason)
		default:
			p.printf("guardrail ok on %s: %s\n", metricNames[v.Metric], v.Reason)
		}
	}
}

// verdictLine is the run's verdict in one line, for the head of the comparison: the
// outcome and how many budgets gave it; "" without budgets.
func verdictLine(rep *Report) string {
	if rep.Outcome == "" {
		return ""
	}
	n := map[string]int{}
	for _, v := range rep.Guardrail {
		n[verdictOutcome(v)]++
	}
	var parts []string
	for _, o := range []string{RunBreached, RunNotResolved, RunOK} {
		if n[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[o], o))
		}
	}
	budgets := "budgets"
	if len(rep.Guardrail) == 1 {
		budgets = "budget"
	}
	return fmt.Sprintf("Verdict: %s (%d %s under --verdict %s: %s)", strings.ToUpper(rep.Outcome), len(rep.Guardrail), budgets,
		rep.Guardrail[0].Verdict, strings.Join(parts, ", "))
}

// settingsLines are the settings in force, for the head of the report: each mode's
// tracing settings (the slow-query threshold among them) and, for a profile, its file and
// operation mix.
func settingsLines(rep *Report) string {
	var b strings.Builder
	for _, m := range rep.Modes {
		if m.Settings != nil {
			fmt.Fprintf(&b, "settings %s: %s\n", m.Name, m.Settings)
		}
	}
	if s := rep.Settings; s.Profile != "" {
		fmt.Fprintf(&b, "profile %s, op mix %s\n", s.Profile, opMixText(s.OpMix))
	}
	return b.String()
}

// opMixText formats a profile's op mix as --ops takes it: insert=1, read1=9.
func opMixText(mix []OpWeight) string {
	parts := make([]string, len(mix))
	for i, w := range mix {
		parts[i] = fmt.Sprintf("%s=%g", w.Name, w.Weight)
	}
	return strings.Join(parts, ", ")
}

// comparisonRow is one row of the comparison table: a label and a cell per mode.
type comparisonRow struct {
	label string
	cell  func(m *ModeResult) string
}

// comparisonRows are the rows of the comparison table, below its header, shared by the
// printed table and the HTML report. A row with an empty label separates groups.
func comparisonRows(rep *Report) []comparisonRow {
	rows := opRateRows(rep)
	rows = append(rows, latencyRows(rep)...)
	return append(rows, cpuRows()...)
}

// opRateRows are the op rate's rows: each round's, their statistics and the comparison
// with the baseline, and what the tracing recorded.
func opRateRows(rep *Report) []comparisonRow {
	var rows []comparisonRow
	row := func(label string, cell func(m *ModeResult) string) {
		rows = append(rows, comparisonRow{label, cell})
	}
	for r := 0; r < len(rep.Order) || r < rep.Settings.Rounds; r++ {
		row(fmt.Sprintf("round %d", r+1), func(m *ModeResult) string {
			if r < len(m.Rounds) {
				return commas(m.Rounds[r])
			}
			return "-"
		})
	}
	row("avg", func(m *ModeResult) string { return commas(m.OpRate) })
	row("median", func(m *ModeResult) string { return commas(m.OpRateMedian) })
	row("stdev", func(m *ModeResult) string { return fmt.Sprintf("%.1f", m.OpRateStdev) })
	row("stderr", func(m *ModeResult) string { return fmt.Sprintf("%.1f", m.OpRateStderr) })
	row("stderr %", func(m *ModeResult) string { return pct(m.OpRateStderr, m.OpRate) })
	row("%[1-mode/"+rep.Baseline+"]", func(m *ModeResult) string {
		if m.Baseline {
			return "-"
		}
		return fmt.Sprintf("%.2f%% ± %.2f%%", m.DegradationPct, m.DegradationErr)
	})
	row("p-value (Welch)", func(m *ModeResult) string {
		if m.Baseline || m.PValue == nil {
			return "-"
		}
		return fmt.Sprintf("%.2g", *m.PValue)
	})
	row("paired %[1-mode/"+rep.Baseline+"]", func(m *ModeResult) string {
		if m.Baseline || m.PairedPValue == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f%% ± %.2f%%", m.PairedDegradationPct, m.PairedDegradationErr)
	})
	row("paired p-value", func(m *ModeResult) string {
		if m.Baseline || m.PairedPValue == nil {
			return "-"
		}
		return fmt.Sprintf("%.2g", *m.PairedPValue)
	})
	row("threshold", func(m *ModeResult) string {
		if m.Settings == nil || m.Settings.ThresholdUs == nil || !m.Settings.recordsSlow() {
			return "-"
		}
		return (time.Duration(*m.Settings.ThresholdUs) * time.Microsecond).String()
	})
	row("sessions recorded", func(m *ModeResult) string {
		if m.SessionsRecorded == nil {
			return "-"
		}
		return commas(float64(*m.SessionsRecorded))
	})
	return rows
}

// latencyRows are the latency's rows (and the service time's at a fixed rate), the
// errors and the CPU per op, between blank rows.
func latencyRows(rep *Report) []comparisonRow {
	f := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	blank := comparisonRow{"", func(*ModeResult) string { return "" }}
	rows := []comparisonRow{
		blank,
		{"latency mean", func(m *ModeResult) string { return f(m.MeanMs) }},
		{"latency median", func(m *ModeResult) string { return f(m.P50Ms) }},
		{"latency 95th", func(m *ModeResult) string { return f(m.P95Ms) }},
		{"latency 99th", func(m *ModeResult) string { return f(m.P99Ms) }},
		{"latency 99.9th", func(m *ModeResult) string { return f(m.P999Ms) }},
		{"latency max", func(m *ModeResult) string { return f(m.MaxMs) }},
	}
	if rep.Settings.Rate > 0 {
		rows = append(rows,
			comparisonRow{"service median", func(m *ModeResult) string { return f(m.Service.P50Ms) }},
			comparisonRow{"service 99th", func(m *ModeResult) string { return f(m.Service.P99Ms) }})
	}
	return append(rows,
		comparisonRow{"errors", func(m *ModeResult) string { return commas(float64(m.Errors)) }},
		comparisonRow{"CPU-s per 10k ops", func(m *ModeResult) string { return fmt.Sprintf("%.3f", m.CPUSecondsPer10kOps) }},
		blank)
}

// cpuRows are the sidecar's and the node's CPU per op, each with its difference from the
// baseline and its p-values, and the added latency.
func cpuRows() []comparisonRow {
	var rows []comparisonRow
	row := func(label string, cell func(m *ModeResult) string) {
		rows = append(rows, comparisonRow{label, cell})
	}
	for _, c := range []struct {
		label  string
		metric string
		mean   func(m *ModeResult) (*float64, *float64)
	}{
		{"sidecar CPU µs/op", MetricCPU, func(m *ModeResult) (*float64, *float64) { return m.SidecarCPUUsPerOp, m.SidecarCPUUsPerOpStderr }},
		{"sidecar user CPU µs/op", MetricUserCPU, func(m *ModeResult) (*float64, *float64) {
			return m.SidecarUserCPUUsPerOp, m.SidecarUserCPUUsPerOpStderr
		}},
		{"node CPU µs/op", MetricNodeCPU, func(m *ModeResult) (*float64, *float64) { return m.NodeCPUUsPerOp, m.NodeCPUUsPerOpStderr }},
	} {
		row(c.label+" avg", func(m *ModeResult) string {
			v, e := c.mean(m)
			if v == nil {
				return "-"
			}
			return fmt.Sprintf("%.3f ± %.3f", *v, *e)
		})
		rows = append(rows, diffRows(c.label, c.metric)...)
	}
	opt := func(v *float64, format string, scale float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf(format, *v*scale)
	}
	row("added latency median µs", func(m *ModeResult) string { return opt(m.AddedP50Ms, "%.1f", 1e3) })
	row("added latency 99th µs", func(m *ModeResult) string { return opt(m.AddedP99Ms, "%.1f", 1e3) })
	return rows
}

// diffRows are one metric's difference from the baseline, absolute and in %, and its
// p-values, "-" for the baseline and where there is none.
func diffRows(label, metric string) []comparisonRow {
	cell := func(m *ModeResult, ok func(metricDiff) bool, text func(metricDiff) string) string {
		d := m.diffs[metric]
		if m.Baseline || !ok(d) {
			return "-"
		}
		return text(d)
	}
	has := func(d metricDiff) bool { return d.ok }
	return []comparisonRow{
		{label + " diff", func(m *ModeResult) string {
			return cell(m, has, func(d metricDiff) string { return fmt.Sprintf("%+.3f ± %.3f", d.diff, d.diffErr) })
		}},
		{label + " diff %", func(m *ModeResult) string {
			return cell(m, has, func(d metricDiff) string {
				return fmt.Sprintf("%+.2f%% ± %.2f%%", stats.Finite(d.pct), stats.Finite(d.pctErr))
			})
		}},
		{label + " p (Welch)", func(m *ModeResult) string {
			return cell(m, func(d metricDiff) bool { return d.welchP != nil }, func(d metricDiff) string { return fmt.Sprintf("%.2g", *d.welchP) })
		}},
		{label + " p (paired)", func(m *ModeResult) string {
			return cell(m, func(d metricDiff) bool { return d.pairedP != nil }, func(d metricDiff) string { return fmt.Sprintf("%.2g", *d.pairedP) })
		}},
	}
}

// printer serializes output and keeps a progress line at the bottom of a terminal.
type printer struct {
	mu       sync.Mutex
	w        io.Writer
	progress bool
	shown    bool
}

func newPrinter(w io.Writer, progress bool) *printer { return &printer{w: w, progress: progress} }

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		io.WriteString(p.w, "\r\033[K")
		p.shown = false
	}
	fmt.Fprintf(p.w, format, args...)
}

func (p *printer) status(s string) {
	if !p.progress {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.w, "\r\033[K"+s)
	p.shown = true
}

func (p *printer) clearStatus() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		io.WriteString(p.w, "\r\033[K")
		p.shown = false
	}
}

// printReplay prints the captured against the replayed: counts, keys and latency.
func printReplay(out *printer, rep *Report) {
	r := rep.Replay
	if r == nil {
		return
	}
	out.printf("\nReplay of %s at %s over %d connections: %d of %d captured requests per run, captured at %.0f op/s over %.1fs\n",
		r.File, r.Speed, r.Connections, r.Replayed, r.Records, r.CapturedOpRate, r.SpanS)
	for _, k := range sortedKeys(r.Skipped) {
		out.printf("  not replayed: %d %s\n", r.Skipped[k], k)
	}
	out.printf("%-10s %10s %10s %8s  %s\n", "statement", "captured", "replayed", "errors", "query")
	for _, s := range r.Statements {
		q := s.Query
		if len(q) > 70 {
			q = q[:70] + "…"
		}
		out.printf("%-10d %10d %10.0f %8.0f  %s\n", s.ID, s.Captured, s.Replayed, s.Errors, q)
	}
	out.printf("hottest keys (of %d; keyed hashes, never values): captured share → replayed share\n", r.Keys.Distinct)
	for _, k := range r.Keys.Top {
		out.printf("  %s  %5.2f%% → %5.2f%%\n", k.Key, k.CapturedPct, k.ReplayedPct)
	}
	out.printf("%-12s %9s %9s %9s %9s %9s %11s\n", "latency ms", "p50", "p95", "p99", "p99.9", "max", "op/s")
	l := r.CapturedLatency
	out.printf("%-12s %9.3f %9.3f %9.3f %9.3f %9.3f %11.0f\n", "captured*", l.P50Ms, l.P95Ms, l.P99Ms, l.P999Ms, l.MaxMs, r.CapturedOpRate)
	for _, m := range rep.Modes {
		out.printf("%-12s %9.3f %9.3f %9.3f %9.3f %9.3f %11.0f\n", m.Name, m.P50Ms, m.P95Ms, m.P99Ms, m.P999Ms, m.MaxMs, m.OpRate)
	}
	out.printf("* as the sidecar saw it: from the request's arrival to the node's answer; the modes' are the client's, from the intended start\n")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// protocolString says which protocol version the load runs at, and through which client.
func protocolString(v int) string {
	switch v {
	case 0:
		return "protocol negotiated (v4), through gocql"
	case 5:
		return "protocol v5, through loadcheck's own CQL client"
	}
	return fmt.Sprintf("protocol v%d, through gocql", v)
}

// printCluster prints the requests each sidecar saw, by mode, with the share of each.
func printCluster(out *printer, rep *Report) {
	if rep.Cluster == nil {
		return
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\t")
	for i := range rep.Cluster.Sidecars {
		fmt.Fprintf(tw, "sidecar %d\t", i+1)
	}
	fmt.Fprintf(tw, "cluster\t\n")
	for _, m := range rep.Cluster.Modes {
		fmt.Fprintf(tw, "%s\t", m.Name)
		for _, n := range m.Requests {
			share := 0.0
			if m.Total > 0 {
				share = 100 * float64(n) / float64(m.Total)
			}
			fmt.Fprintf(tw, "%s (%.0f%%)\t", commas(float64(n)), share)
		}
		fmt.Fprintf(tw, "%s\t\n", commas(float64(m.Total)))
	}
	tw.Flush()
	out.printf("\nRequests seen by each sidecar during the runs (tracecar_requests_total from /metrics):\n%s", b.String())
	for i, a := range rep.Cluster.Sidecars {
		out.printf("  sidecar %d: %s\n", i+1, a)
	}
}
