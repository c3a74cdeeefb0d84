package loadcheck

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// One run of one mode: its measures, before the statistics over the rounds.

// runResult is one run of one mode.
type runResult struct {
	RunResult
	resp, svc *hdrhistogram.Histogram
	added     bucket // the sidecar's added-latency observations during the run
}

// procCPU is the CPU time the sidecar and the node used during a run, from their /metrics.
type procCPU struct {
	sidecar, node       float64
	hasSidecar, hasNode bool
	sidecarUser         float64 // the user-space part of sidecar
	hasSidecarUser      bool
	sessions            int64 // sessions the sidecar recorded
	hasSessions         bool
	added               bucket
}

func newRunResult(m *mode, round, pos int, started time.Time, res *phaseResult, cpu time.Duration, pc procCPU) *runResult {
	rr := &runResult{resp: res.resp, svc: res.svc, added: pc.added}
	rr.RunResult = RunResult{
		Round: round + 1, Position: pos + 1, Target: m.target, StartedAt: started,
		DurationS: res.elapsed.Seconds(), Ops: res.ops, Rows: res.rows, Errors: res.errs, Unsent: res.unsent,
		Latency: latencyOf(res.resp), Service: latencyOf(res.svc),
		CPUSeconds: cpu.Seconds(), Intervals: res.intervals,
	}
	if rr.Intervals == nil {
		rr.Intervals = []Interval{}
	}
	if s := res.elapsed.Seconds(); s > 0 {
		rr.OpRate = float64(res.ops) / s
		rr.PkRate = rr.OpRate
		rr.RowRate = float64(res.rows) / s
	}
	if res.ops > 0 {
		rr.CPUUsPerOp = cpu.Seconds() * 1e6 / float64(res.ops)
	}
	if res.firstErr != nil {
		rr.FirstError = res.firstErr.Error()
	}
	if res.ops > 0 && pc.hasSidecar {
		rr.SidecarCPUUsPerOp = ptr(pc.sidecar * 1e6 / float64(res.ops))
	}
	if res.ops > 0 && pc.hasSidecarUser {
		rr.SidecarUserCPUUsPerOp = ptr(pc.sidecarUser * 1e6 / float64(res.ops))
	}
	if res.ops > 0 && pc.hasNode {
		rr.NodeCPUUsPerOp = ptr(pc.node * 1e6 / float64(res.ops))
	}
	rr.AddedP50Ms, rr.AddedP99Ms = addedPercentiles(pc.added)
	if pc.hasSessions {
		n := pc.sessions
		rr.SessionsRecorded = &n
	}
	return rr
}

// addedPercentiles returns the median and the 99th percentile of an added-latency delta,
// in milliseconds, or nils without observations.
func addedPercentiles(b bucket) (p50, p99 *float64) {
	if v, ok := b.quantile(0.5); ok {
		p50 = ptr(v * 1e3)
	}
	if v, ok := b.quantile(0.99); ok {
		p99 = ptr(v * 1e3)
	}
	return p50, p99
}
