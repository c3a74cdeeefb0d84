package ctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// How top lays out a topView: as the lines of a screen of a given size (render), or as
// plain key=value lines, one refresh after another, when stdout is not a terminal
// (printPlain).

// lineStyle is how the screen draws a line.
type lineStyle int

const (
	styleNormal lineStyle = iota
	styleTitle            // the first line
	styleHeader           // a section's title or a table's column names
	styleWarn             // a host that did not answer, statistics off
)

// textLine is one line of the screen.
type textLine struct {
	text  string
	style lineStyle
}

// screenOpts are the screen's size and toggles.
type screenOpts struct {
	width, height int
	perHost       bool
	paused        bool
}

// keysHelp names the keys, on the title line.
const keysHelp = "keys: t c p e sort (total_time calls p99 errors), h hosts, space pause, q quit"

// inflightRows is how many requests in flight the screen shows at most.
const inflightRows = 5

// render lays v out as at most o.height lines of at most o.width columns.
func render(v topView, o screenOpts) []textLine {
	var out []textLine
	add := func(style lineStyle, format string, args ...any) {
		out = append(out, textLine{fit(fmt.Sprintf(format, args...), o.width), style})
	}
	state := "every " + shortDuration(v.interval)
	if o.paused {
		state = "PAUSED"
	}
	add(styleTitle, "tracecar top  %d hosts  %s  sort %s  %s   %s", v.cluster.total, state, v.sort,
		v.at.Local().Format("15:04:05"), keysHelp)
	c := v.cluster
	style := styleNormal
	if c.err != nil {
		style = styleWarn
	}
	add(style, "CLUSTER  %d/%d up  %s  %s", c.up, c.total, hostFigures(c, v.interval), errText(c.err))
	if o.perHost {
		add(styleHeader, "  %-24s %10s %8s %8s  %-10s %-6s %-12s %s", "HOST", "OP/S", "P50", "P99", "MODE", "PROB", "GUARDRAIL", "SINK DROPS")
		for _, h := range v.hosts {
			if h.err != nil {
				add(styleWarn, "  %-24s error: %v", h.host, h.err)
				continue
			}
			add(styleNormal, "  %-24s %10s %8s %8s  %-10s %-6s %-12s %d (+%d)%s", h.host, rate(h.opsPerSec, v.interval),
				latency(h.p50, h.hasLatency), latency(h.p99, h.hasLatency), h.mode, h.probability, h.guardrail, h.drops, h.dropsDelta,
				crossShard(h, "  cross-shard "))
		}
	}
	out = append(out, textLine{})
	if v.interval == 0 {
		add(styleHeader, "STATEMENTS  measuring the first interval…")
	} else {
		add(styleHeader, "STATEMENTS  by %s over the last %s: %d active, %s calls/s", v.sort, shortDuration(v.interval),
			len(v.stmts), strconv.FormatFloat(v.calls, 'f', 1, 64))
	}
	if v.statsOff > 0 {
		add(styleWarn, "  statement statistics are off on %d of %d hosts: POST /tracecar/statement_stats?enable=true (or --statement-stats)",
			v.statsOff, c.up)
	}
	add(styleHeader, "  %6s %9s %8s %8s %7s  %-4s %-24s %s", "%TIME", "CALLS/S", "MEAN", "P99", "ERR/S", "PREP", "ANTI-PATTERNS", "STATEMENT")
	nIn := min(len(v.inflight), inflightRows)
	room := o.height - len(out) - 3 - max(nIn, 1) // blank, title and column names of the in-flight section
	for i, s := range v.stmts {
		if i >= room {
			break
		}
		anti := strings.Join(s.anti, ",")
		if anti == "" {
			anti = "-"
		}
		add(styleNormal, "  %5.1f%% %9.1f %8s %8s %7.1f  %-4s %-24s %s", 100*s.share, s.callsPerSec,
			latency(s.meanUS/1e6, true), latency(float64(s.p99US)/1e6, true), s.errorsPer, yesNo(s.prepared), fit(anti, 24), s.text)
	}
	out = append(out, textLine{})
	add(styleHeader, "IN FLIGHT  longest first: %d", len(v.inflight))
	add(styleHeader, "  %-24s %8s %-8s %-12s %-10s %-21s %s", "HOST", "ELAPSED", "OPCODE", "CL", "USER", "CLIENT", "STATEMENT")
	if nIn == 0 {
		add(styleNormal, "  none")
	}
	for _, r := range v.inflight[:nIn] {
		add(styleNormal, "  %-24s %8s %-8s %-12s %-10s %-21s %s", r.host, elapsed(r.q.ElapsedUS), r.q.Opcode, dash(r.q.Consistency),
			dash(r.q.Username), r.q.Client, statementOf(r.q.Statement, r.q.Opcode))
	}
	if len(out) > o.height {
		out = out[:max(o.height, 0)]
	}
	return out
}

// hostFigures formats a host's or the cluster's figures.
func hostFigures(h hostRow, interval time.Duration) string {
	return fmt.Sprintf("%s op/s  p50 %s  p99 %s  mode %s  probability %s  guardrail %s  sink drops %d (+%d)",
		rate(h.opsPerSec, interval), latency(h.p50, h.hasLatency), latency(h.p99, h.hasLatency),
		h.mode, h.probability, h.guardrail, h.drops, h.dropsDelta) + crossShard(h, "  cross-shard ")
}

// crossShard formats the requests sent to a shard that does not own their token, and
// their share, after label; empty when the host reported no shards.
func crossShard(h hostRow, label string) string {
	if !h.hasShards {
		return ""
	}
	share := 0.0
	if h.shardReqs > 0 {
		share = 100 * float64(h.cross) / float64(h.shardReqs)
	}
	return fmt.Sprintf("%s%d (%.1f%%)", label, h.cross, share)
}

// printPlain writes one refresh as plain lines: one for the cluster, one per host, one per
// statement (at most limit) and one per request in flight (at most inflightRows).
func printPlain(w io.Writer, v topView, limit int) {
	at := v.at.UTC().Format(time.RFC3339)
	fmt.Fprintf(w, "%s cluster hosts=%d/%d interval=%s sort=%s ops_per_s=%s p50=%s p99=%s mode=%s probability=%s guardrail=%s sink_drops=%d\n",
		at, v.cluster.up, v.cluster.total, shortDuration(v.interval), v.sort, rate(v.cluster.opsPerSec, v.interval),
		latency(v.cluster.p50, v.cluster.hasLatency), latency(v.cluster.p99, v.cluster.hasLatency),
		quoteIfSpaced(v.cluster.mode), quoteIfSpaced(v.cluster.probability), quoteIfSpaced(v.cluster.guardrail), v.cluster.drops)
	// The cluster's cross-shard requests, when a host reported shards, on a line of its own.
	if v.cluster.hasShards {
		fmt.Fprintf(w, "%s shards cross_shard=%d shard_requests=%d\n", at, v.cluster.cross, v.cluster.shardReqs)
	}
	for _, h := range v.hosts {
		if h.err != nil {
			fmt.Fprintf(w, "%s host=%s error=%q\n", at, h.host, h.err.Error())
			continue
		}
		fmt.Fprintf(w, "%s host=%s ops_per_s=%s p50=%s p99=%s mode=%s probability=%s guardrail=%s sink_drops=%d%s\n",
			at, h.host, rate(h.opsPerSec, v.interval), latency(h.p50, h.hasLatency), latency(h.p99, h.hasLatency),
			h.mode, h.probability, h.guardrail, h.drops, plainCrossShard(h))
	}
	if v.interval > 0 {
		fmt.Fprintf(w, "%s statements active=%d calls_per_s=%.1f stats_off_hosts=%d\n", at, len(v.stmts), v.calls, v.statsOff)
	}
	for i, s := range v.stmts {
		if i == limit {
			break
		}
		anti := strings.Join(s.anti, ",")
		if anti == "" {
			anti = "-"
		}
		fmt.Fprintf(w, "%s statement share=%.1f%% calls_per_s=%.1f mean=%s p99=%s errors_per_s=%.1f prepared=%s antipatterns=%s text=%q\n",
			at, 100*s.share, s.callsPerSec, latency(s.meanUS/1e6, true), latency(float64(s.p99US)/1e6, true), s.errorsPer,
			yesNo(s.prepared), anti, s.text)
	}
	for i, r := range v.inflight {
		if i == inflightRows {
			break
		}
		fmt.Fprintf(w, "%s inflight host=%s elapsed=%s opcode=%s consistency=%s user=%s client=%s text=%q\n",
			at, r.host, elapsed(r.q.ElapsedUS), r.q.Opcode, dash(r.q.Consistency), dash(r.q.Username), r.q.Client,
			statementOf(r.q.Statement, r.q.Opcode))
	}
}

// plain runs top writing plain lines: the first reading gives the hosts' state, each
// later one a refresh with rates.
func (t *top) plain(ctx context.Context, w io.Writer) error {
	limit := t.cmd.Limit
	if limit < 1 {
		limit = 20
	}
	var prev []hostSample
	shown := 0
	for cur := range t.readings(ctx) {
		first := prev == nil
		v := buildView(t.hosts, prev, cur, t.cmd.Sort)
		prev = cur
		if first {
			continue // rates need two readings
		}
		printPlain(w, v, limit)
		shown++
		if t.cmd.Count > 0 && shown >= t.cmd.Count {
			return nil
		}
	}
	return nil
}

func rate(v float64, interval time.Duration) string {
	if interval == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// latency formats seconds as µs, ms or s, with three significant digits.
func latency(s float64, ok bool) string {
	switch {
	case !ok:
		return "-"
	case s < 1e-3:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + "µs"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(s, 'f', 2, 64) + "s"
}

func elapsed(us int64) string {
	if us < 0 {
		return "?"
	}
	return latency(float64(us)/1e6, true)
}

func shortDuration(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " " + err.Error()
}

// statementOf is what the in-flight table shows of a request without statement text.
func statementOf(text, opcode string) string {
	if text != "" {
		return text
	}
	switch opcode {
	case "QUERY", "EXECUTE", "BATCH", "PREPARE":
		return "(not kept: tracing and statement statistics are off)"
	}
	return "-"
}

func quoteIfSpaced(s string) string {
	if strings.ContainsRune(s, ' ') {
		return strconv.Quote(s)
	}
	return s
}

// fit cuts s to width columns (runes), ending it with … when cut.
func fit(s string, width int) string {
	if width <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}

// plainCrossShard is a host's cross-shard figures for the plain output, empty when it
// reported no shards.
func plainCrossShard(h hostRow) string {
	if !h.hasShards {
		return ""
	}
	return fmt.Sprintf(" cross_shard=%d shard_requests=%d", h.cross, h.shardReqs)
}
