package loadcheck

import (
	"encoding/csv"
	"io"
	"strconv"
)

// csvHeader lists the CSV columns: a "mode" row per mode (over all rounds) and a "run" row
// per run.
var csvHeader = []string{"kind", "mode", "round", "position", "target", "ops", "errors", "unsent", "duration_s",
	"op_rate", "op_rate_median", "op_rate_stdev", "op_rate_stderr", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms",
	"service_p50_ms", "service_p99_ms", "service_max_ms", "degradation_pct", "degradation_err", "p_value",
	"paired_degradation_pct", "paired_degradation_err", "paired_p_value", "cpu_us_per_op",
	"sidecar_cpu_us_per_op", "sidecar_cpu_us_per_op_stderr", "sidecar_cpu_us_per_op_diff", "sidecar_cpu_us_per_op_diff_stderr", "sidecar_cpu_us_per_op_diff_p_value",
	"node_cpu_us_per_op", "node_cpu_us_per_op_stderr", "node_cpu_us_per_op_diff", "node_cpu_us_per_op_diff_stderr", "node_cpu_us_per_op_diff_p_value",
	"added_p50_ms", "added_p99_ms"}

func writeCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	i := func(x int64) string { return strconv.FormatInt(x, 10) }
	o := func(x *float64) string { // empty when unknown
		if x == nil {
			return ""
		}
		return f(*x)
	}
	cw.Write(csvHeader)
	for _, m := range rep.Modes {
		pv, ppv := "", ""
		if m.PValue != nil {
			pv = f(*m.PValue)
		}
		if m.PairedPValue != nil {
			ppv = f(*m.PairedPValue)
		}
		var dur float64
		for _, r := range m.Runs {
			dur += r.DurationS
		}
		cw.Write([]string{"mode", m.Name, "", "", m.Target, i(m.Ops), i(m.Errors), i(m.Unsent), f(dur),
			f(m.OpRate), f(m.OpRateMedian), f(m.OpRateStdev), f(m.OpRateStderr), f(m.MeanMs), f(m.P50Ms), f(m.P95Ms), f(m.P99Ms), f(m.P999Ms), f(m.MaxMs),
			f(m.Service.P50Ms), f(m.Service.P99Ms), f(m.Service.MaxMs), f(m.DegradationPct), f(m.DegradationErr), pv,
			f(m.PairedDegradationPct), f(m.PairedDegradationErr), ppv, f(m.CPUUsPerOp),
			o(m.SidecarCPUUsPerOp), o(m.SidecarCPUUsPerOpStderr), o(m.SidecarCPUUsPerOpDiff), o(m.SidecarCPUUsPerOpDiffStderr), o(m.SidecarCPUUsPerOpDiffPValue),
			o(m.NodeCPUUsPerOp), o(m.NodeCPUUsPerOpStderr), o(m.NodeCPUUsPerOpDiff), o(m.NodeCPUUsPerOpDiffStderr), o(m.NodeCPUUsPerOpDiffPValue),
			o(m.AddedP50Ms), o(m.AddedP99Ms)})
		for _, r := range m.Runs {
			cw.Write([]string{"run", m.Name, strconv.Itoa(r.Round), strconv.Itoa(r.Position), r.Target, i(r.Ops), i(r.Errors), i(r.Unsent), f(r.DurationS),
				f(r.OpRate), "", "", "", f(r.MeanMs), f(r.P50Ms), f(r.P95Ms), f(r.P99Ms), f(r.P999Ms), f(r.MaxMs),
				f(r.Service.P50Ms), f(r.Service.P99Ms), f(r.Service.MaxMs), "", "", "", "", "", "", f(r.CPUUsPerOp),
				o(r.SidecarCPUUsPerOp), "", "", "", "", o(r.NodeCPUUsPerOp), "", "", "", "", o(r.AddedP50Ms), o(r.AddedP99Ms)})
		}
	}
	cw.Flush()
	return cw.Error()
}
