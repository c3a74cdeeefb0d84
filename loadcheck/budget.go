package loadcheck

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Budget metrics, as --max-overhead MODE=[METRIC:]LIMIT names them.
const (
	MetricOps      = "ops"       // op rate degradation, in percent
	MetricCPU      = "cpu"       // the sidecar's CPU per op: percent, or absolute µs/op
	MetricUserCPU  = "cpu-user"  // the user-space part of the sidecar's CPU per op: percent, or µs/op
	MetricNodeCPU  = "node-cpu"  // the node's CPU per op: percent, or absolute µs/op
	MetricP99      = "p99"       // the client's p99 latency, in percent
	MetricAddedP99 = "added-p99" // the sidecar's added-latency p99, absolute
)

// metricNames say what each metric is, in verdicts.
var metricNames = map[string]string{
	MetricOps:      "op rate",
	MetricCPU:      "sidecar CPU per op",
	MetricUserCPU:  "sidecar user CPU per op",
	MetricNodeCPU:  "node CPU per op",
	MetricP99:      "client p99 latency",
	MetricAddedP99: "added-latency p99",
}

// BudgetMetrics are the metrics a budget can name, in the order help lists them, each with
// the limit it takes: the one list that the flag's help, its errors and the verdicts read.
var BudgetMetrics = []struct{ Name, Limit string }{
	{MetricOps, "op rate, %; the default without --rate"},
	{MetricCPU, "sidecar CPU per op, % or absolute such as +0.5us; the default with --rate"},
	{MetricUserCPU, "the user-space part of the sidecar's CPU per op, % or +0.5us"},
	{MetricNodeCPU, "node CPU per op, % or +0.5us"},
	{MetricP99, "client p99, %"},
	{MetricAddedP99, "the sidecar's added-latency p99, absolute such as 200us"},
}

// BudgetMetricsHelp lists the budget metrics for a help text: "ops (op rate, %; …), cpu
// (…), …".
func BudgetMetricsHelp() string {
	parts := make([]string, len(BudgetMetrics))
	for i, m := range BudgetMetrics {
		parts[i] = m.Name + " (" + m.Limit + ")"
	}
	return strings.Join(parts, ", ")
}

// Budget is one --max-overhead entry: the largest cost of a mode, against the baseline, on
// one metric, that a run may show significantly.
type Budget struct {
	Mode   string
	Metric string // one of the Metric constants; empty: cpu at a fixed rate, else ops
	// Limit is in percent of the baseline, or when Absolute in µs/op for cpu and node-cpu
	// and in milliseconds for added-p99.
	Limit    float64
	Absolute bool
}

// unit is the unit of the budget's Limit.
func (b Budget) unit() string {
	switch {
	case !b.Absolute:
		return "%"
	case b.Metric == MetricAddedP99:
		return "ms"
	default:
		return "µs/op"
	}
}

// String formats the limit as --max-overhead takes it.
func (b Budget) String() string {
	if !b.Absolute {
		return strconv.FormatFloat(b.Limit, 'g', -1, 64) + "%"
	}
	if b.Metric == MetricAddedP99 {
		return (time.Duration(b.Limit * float64(time.Millisecond))).String()
	}
	return "+" + strconv.FormatFloat(b.Limit, 'g', -1, 64) + "µs/op"
}

// format prints a value and its standard error in the budget's unit.
func (b Budget) format(v, err float64) string {
	switch {
	case !b.Absolute:
		return fmt.Sprintf("%+.2f%% ± %.2f%%", v, err)
	case b.Metric == MetricAddedP99:
		return fmt.Sprintf("%+.1f µs ± %.1f µs", v*1e3, err*1e3)
	default:
		return fmt.Sprintf("%+.3f ± %.3f µs/op", v, err)
	}
}

// formatOne prints a value in the budget's unit.
func (b Budget) formatOne(v float64) string {
	switch {
	case !b.Absolute:
		return fmt.Sprintf("%+.2f%%", v)
	case b.Metric == MetricAddedP99:
		return fmt.Sprintf("%+.1f µs", v*1e3)
	default:
		return fmt.Sprintf("%+.3f µs/op", v)
	}
}

// ParseBudgets parses the --max-overhead value: MODE=[METRIC:]LIMIT entries separated by
// commas, such as "fast=5%", "fast=cpu:+0.5us" or "full=added-p99:200us". Errors wrap
// ErrUsage.
func ParseBudgets(s string) ([]Budget, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	bad := func(part, why string) error {
		return usageErrorf("--max-overhead %q: %s; want MODE=[METRIC:]LIMIT,... with METRIC one of %s; e.g. fast=5%%,full=cpu:+0.5us", part, why, BudgetMetricsHelp())
	}
	var out []Budget
	seen := map[[2]string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, v, ok := strings.Cut(part, "=")
		name, v = strings.TrimSpace(name), strings.TrimSpace(v)
		if !ok || name == "" || v == "" {
			return nil, bad(part, "no MODE=LIMIT")
		}
		b := Budget{Mode: name}
		if metric, limit, ok := strings.Cut(v, ":"); ok {
			b.Metric, v = strings.TrimSpace(metric), strings.TrimSpace(limit)
			if _, known := metricNames[b.Metric]; !known {
				return nil, bad(part, fmt.Sprintf("unknown metric %q", b.Metric))
			}
		}
		if pct, ok := strings.CutSuffix(v, "%"); ok || b.Metric == "" || b.Metric == MetricOps || b.Metric == MetricP99 {
			x, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, bad(part, fmt.Sprintf("%q is not a percentage", v))
			}
			b.Limit = x
		} else {
			d, err := time.ParseDuration(strings.Replace(strings.TrimPrefix(v, "+"), "µs", "us", 1))
			if err != nil {
				return nil, bad(part, fmt.Sprintf("%q is neither a percentage nor a duration such as +0.5us", v))
			}
			b.Absolute = true
			if b.Metric == MetricAddedP99 {
				b.Limit = float64(d) / float64(time.Millisecond)
			} else {
				b.Limit = float64(d) / float64(time.Microsecond)
			}
		}
		if b.Metric == MetricAddedP99 && !b.Absolute {
			return nil, bad(part, "added-p99 takes an absolute limit such as 200us")
		}
		key := [2]string{b.Mode, b.Metric}
		if seen[key] {
			return nil, bad(part, fmt.Sprintf("mode %s has two %s budgets", b.Mode, cmpOr(b.Metric, "default")))
		}
		seen[key] = true
		out = append(out, b)
	}
	return out, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
