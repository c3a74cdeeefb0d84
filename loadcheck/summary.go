package loadcheck

import (
	"strings"
	"time"

	"github.com/tracecar/tracecar/loadcheck/stats"
)

// The report computed from the runs: per mode, the statistics over the rounds and the verdicts.

// report computes the per-mode statistics and the guardrail's verdicts.
func (c *checker) report(started time.Time) *Report {
	cfg := c.cfg
	rep := &Report{
		StartedAt: started, FinishedAt: time.Now(), Baseline: c.baseline, Order: c.order,
		Settings: Settings{
			Node: cfg.Node, Sidecar: cfg.Sidecar, Admin: cfg.Admin, NodeAPI: cfg.NodeAPI, Embedded: cfg.Embedded,
			SidecarMetrics: cfg.SidecarMetrics, NodeMetrics: cfg.NodeMetrics, TargetErrorPct: cfg.TargetError, MaxRounds: cfg.MaxRounds, MaxTimeS: max(cfg.MaxTime, 0).Seconds(),
			Workload: c.wl.name, WriteFrac: c.wl.writeFrac, Pop: c.wl.pop.String(), Rounds: len(c.order),
			DurationS: cfg.Duration.Seconds(), WarmupS: cfg.Warmup.Seconds(), Ops: cfg.Ops,
			Concurrency: cfg.Concurrency, Rate: cfg.Rate, CL: strings.ToUpper(cfg.CL), Compression: cfg.Compression,
			Protocol: cfg.ProtocolVersion, Connections: cfg.Connections, TraceContext: cfg.TraceContext,
		},
		Notes: c.notes,
	}
	for i, m := range c.modes {
		rep.Modes = append(rep.Modes, modeResult(m, c.runs[i], m.name == c.baseline))
	}
	compare(rep)
	compareMetrics(rep)
	comparePrevious(rep)
	rep.Guardrail, rep.Breaches = judge(rep, cfg.MaxOverhead, cfg.Rate > 0, cfg.Verdict)
	rep.CPU = cpuSummary(rep.Modes, cfg.Embedded)
	summarizeHead(rep)
	if p := c.wl.profile; p != nil {
		rep.Settings.Profile = p.path
		for _, w := range p.mix {
			rep.Settings.OpMix = append(rep.Settings.OpMix, OpWeight{Name: w.name, Weight: w.weight})
		}
	}
	return rep
}

// summarizeHead fills in what the report's head shows from its verdicts and figures: the
// run's outcome and each mode's sidecar CPU in cores at its op rate.
func summarizeHead(rep *Report) {
	rep.Outcome = outcome(rep.Guardrail)
	for i := range rep.Modes {
		m := &rep.Modes[i]
		if c, ok := cores(m.SidecarCPUUsPerOpDiff, m.OpRate); ok {
			m.SidecarCPUCoresDiff = &c
		}
	}
}

func modeResult(m *mode, runs []*runResult, baseline bool) ModeResult {
	mr := ModeResult{Name: m.name, Spec: m.spec, Target: m.target, Baseline: baseline, Settings: m.settings,
		resp: newHist(), svc: newHist(), Rounds: []float64{}, Runs: []RunResult{}}
	var dur float64
	for _, r := range runs {
		mr.Rounds = append(mr.Rounds, r.OpRate)
		mr.Runs = append(mr.Runs, r.RunResult)
		mr.resp.Merge(r.resp)
		mr.svc.Merge(r.svc)
		mr.Ops += r.Ops
		mr.Rows += r.Rows
		mr.Errors += r.Errors
		mr.Unsent += r.Unsent
		mr.CPUSeconds += r.CPUSeconds
		mr.added = mr.added.add(r.added)
		dur += r.DurationS
	}
	if xs := perRun(mr.Runs, func(r *RunResult) *float64 { return r.SidecarCPUUsPerOp }); xs != nil {
		s := stats.Summarize(xs)
		mr.SidecarCPUUsPerOp, mr.SidecarCPUUsPerOpStderr = ptr(s.Mean), ptr(s.Stderr)
	}
	if xs := perRun(mr.Runs, func(r *RunResult) *float64 { return r.SidecarUserCPUUsPerOp }); xs != nil {
		s := stats.Summarize(xs)
		mr.SidecarUserCPUUsPerOp, mr.SidecarUserCPUUsPerOpStderr = ptr(s.Mean), ptr(s.Stderr)
	}
	if xs := perRun(mr.Runs, func(r *RunResult) *float64 { return r.NodeCPUUsPerOp }); xs != nil {
		s := stats.Summarize(xs)
		mr.NodeCPUUsPerOp, mr.NodeCPUUsPerOpStderr = ptr(s.Mean), ptr(s.Stderr)
	}
	mr.AddedP50Ms, mr.AddedP99Ms = addedPercentiles(mr.added)
	if len(runs) > 0 {
		var n int64
		known := true
		for _, r := range runs {
			if r.SessionsRecorded == nil {
				known = false
				break
			}
			n += *r.SessionsRecorded
		}
		if known {
			mr.SessionsRecorded = &n
		}
	}
	s := stats.Summarize(mr.Rounds)
	mr.OpRate, mr.OpRateStdev, mr.OpRateStderr = s.Mean, s.Stdev, s.Stderr
	mr.OpRateMedian = median(mr.Rounds)
	mr.PkRate = mr.OpRate
	if len(runs) > 0 && runs[0].PerOp != nil {
		mr.PerOp = mergeOps(runs)
		for _, r := range runs {
			mr.Partitions += r.Partitions
		}
		mr.OpsTotal = mr.Ops
		if mr.Ops > 0 {
			mr.PkRate = mr.OpRate * float64(mr.Partitions) / float64(mr.Ops)
		}
	}
	if mr.Ops > 0 {
		mr.RowRate = mr.OpRate * float64(mr.Rows) / float64(mr.Ops)
		mr.CPUUsPerOp = mr.CPUSeconds * 1e6 / float64(mr.Ops)
		mr.CPUSecondsPer10kOps = mr.CPUSeconds * 1e4 / float64(mr.Ops)
	}
	mr.Latency = latencyOf(mr.resp)
	mr.Service = latencyOf(mr.svc)
	return mr
}

func cpuSummary(modes []ModeResult, embedded bool) CPUSummary {
	s := CPUSummary{Scope: "the loadcheck process (the client)", ReferenceOpsPerCPUSecond: stressOpsPerCPUSecond, Reference: stressReference}
	if embedded {
		s.Scope = "the whole process: the client, and the embedded node and sidecar it runs"
	}
	for _, m := range modes {
		s.Seconds += m.CPUSeconds
		s.Ops += m.Ops
	}
	if s.Ops > 0 {
		s.UsPerOp = s.Seconds * 1e6 / float64(s.Ops)
		s.SecondsPer10kOps = s.Seconds * 1e4 / float64(s.Ops)
	}
	if s.Seconds > 0 {
		s.OpsPerCPUSecond = float64(s.Ops) / s.Seconds
	}
	return s
}

// mergeOps sums the runs' figures of each operation, rates being over the runs' total time.
func mergeOps(runs []*runResult) []OpResult {
	var out []OpResult
	var seconds float64
	for _, r := range runs {
		seconds += r.DurationS
		for i, o := range r.PerOp {
			if i >= len(out) {
				out = append(out, OpResult{Name: o.Name, hist: newHist()})
			}
			m := &out[i]
			m.Count += o.Count
			m.Rows += o.Rows
			m.Partitions += o.Partitions
			m.Errors += o.Errors
			if o.hist != nil {
				m.hist.Merge(o.hist)
			}
		}
	}
	for i := range out {
		out[i].finish(seconds)
	}
	return out
}

// clusterReport sums the runs' per-sidecar requests by mode; nil for one sidecar.
func (c *checker) clusterReport() *ClusterReport {
	if !c.cfg.cluster() {
		return nil
	}
	cr := &ClusterReport{Sidecars: c.cfg.admins()}
	for mi, m := range c.modes {
		cm := ClusterMode{Name: m.name, Requests: make([]uint64, len(cr.Sidecars))}
		for _, rr := range c.runs[mi] {
			for i, s := range rr.Sidecars {
				cm.Requests[i] += s.Requests
				cm.Total += s.Requests
			}
		}
		cr.Modes = append(cr.Modes, cm)
	}
	return cr
}
