package main

import (
	"flag"
	"strings"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/nodeapi"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/guardrail"
)

// guardFlags are the sidecar's --guardrail-* and --node-* flags.
type guardFlags struct {
	addedP99, window, cooldown *time.Duration
	cpu, drops                 *float64
	restore                    *bool
	nodeAPI, nodeKind, apply   *string
	nodeTracing                *string
	fs                         *flag.FlagSet // to tell a --node-apply given from its default
	toggleMax                  *time.Duration
}

func addGuardFlags(fs *flag.FlagSet) guardFlags {
	return guardFlags{
		addedP99:    fs.Duration("guardrail-added-p99", 0, "step tracing down when the p99 of the sidecar's added latency per request exceeds this, e.g. 500us (0: no limit)"),
		cpu:         fs.Float64("guardrail-cpu", 0, "step tracing down when tracing takes more than this `PCT` of the sidecar's CPU (0: no limit)"),
		drops:       fs.Float64("guardrail-drops", 0, "step tracing down when sinks drop more than this many sessions `PER_S` (0: no limit)"),
		window:      fs.Duration("guardrail-window", guardrail.DefaultWindow, "the guardrail's measuring window: one step at most per window"),
		cooldown:    fs.Duration("guardrail-cooldown", guardrail.DefaultCooldown, "how long after a step before --guardrail-restore may bring the user's tracing back"),
		restore:     fs.Bool("guardrail-restore", false, "bring the user's tracing back after the cooldown once the figures are within half their budget"),
		nodeAPI:     fs.String("node-api", "", "`URL` of the node's management API: ScyllaDB REST, Jolokia (http://host:8778/jolokia) or tracecar node --api"),
		nodeKind:    fs.String("node-kind", "", "kind of --node-api: "+strings.Join(nodeapi.Kinds, ", ")),
		apply:       fs.String("node-apply", "trace_probability", "sidecar changes also applied to the node: a comma list of slow_query, trace_probability, or none"),
		nodeTracing: fs.String("node-tracing", "on", "on: a sampled request asks the node for its own trace (never one that carries a password); off: sample without the node's trace, its events lost"),
		toggleMax:   fs.Duration("toggle-max-duration", 0, "give a costly toggle sent without for= (full mode, a probability above 0, a debug or trace level, a threshold of 0) a timer of this `D`, such as 30m, after which it reverts (0: off; at most 168h)"),
		fs:          fs,
	}
}

// fill validates the flags and sets cfg's guardrail and node API fields.
func (f guardFlags) fill(cfg *stackConfig) error {
	b := guardrail.Budget{AddedP99: *f.addedP99, CPUPercent: *f.cpu, DropsPerSec: *f.drops,
		Window: *f.window, Cooldown: *f.cooldown, Restore: *f.restore}
	if *f.addedP99 < 0 {
		return usageErrorf("--guardrail-added-p99 must be a duration >= 0 such as 500us, got %v", *f.addedP99)
	}
	if *f.window < 100*time.Millisecond {
		return usageErrorf("--guardrail-window must be at least 100ms, got %v", *f.window)
	}
	if *f.cooldown < 0 {
		return usageErrorf("--guardrail-cooldown must be >= 0, got %v", *f.cooldown)
	}
	if *f.cpu < 0 || *f.cpu > 100 {
		return usageErrorf("--guardrail-cpu must be a percentage from 0 to 100, got %v", *f.cpu)
	}
	if !(*f.drops >= 0) {
		return usageErrorf("--guardrail-drops must be a rate >= 0 per second, got %v", *f.drops)
	}
	if err := b.Validate(); err != nil {
		return usageErrorf("--guardrail-*: %v", err)
	}
	cfg.Guardrail = b
	if *f.toggleMax < 0 || *f.toggleMax > admin.MaxToggleFor {
		return usageErrorf("--toggle-max-duration must be a duration from 0 (off) to 168h (7 days), got %v", *f.toggleMax)
	}
	cfg.ToggleMaxDuration = *f.toggleMax
	cfg.NodeAPI, cfg.NodeKind = *f.nodeAPI, *f.nodeKind
	apply, err := parseNodeApply(*f.apply)
	if err != nil {
		return err
	}
	switch *f.nodeTracing {
	case "on":
	case "off":
		// The node's own trace probability would trace what the flag no longer asks for.
		explicit := false
		f.fs.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "node-apply" })
		if explicit && apply.TraceProbability {
			return usageErrorf("--node-tracing off and --node-apply trace_probability contradict: the node would trace sampled requests at the sidecar's probability; drop trace_probability from --node-apply")
		}
		apply.TraceProbability = false
		cfg.NoNodeTracing = true
	default:
		return usageErrorf("--node-tracing %q: want on or off", *f.nodeTracing)
	}
	cfg.NodeApply = apply
	switch {
	case cfg.NodeAPI == "" && cfg.NodeKind != "":
		return usageErrorf("--node-kind needs --node-api URL")
	case cfg.NodeAPI != "" && cfg.Node == "":
		return usageErrorf("--node-api needs --node: the embedded node's API is wired on its own")
	case cfg.NodeAPI != "":
		if cfg.NodeKind == "" {
			return usageErrorf("--node-api needs --node-kind: one of %s", strings.Join(nodeapi.Kinds, ", "))
		}
		if _, err := nodeapi.New(nodeapi.Config{Kind: cfg.NodeKind, URL: cfg.NodeAPI}); err != nil {
			return usageErrorf("--node-api/--node-kind: %v", err)
		}
		if apply.SlowQuery && cfg.NodeKind != nodeapi.KindScylla {
			return usageErrorf("--node-apply slow_query needs --node-kind scylla: a %s node has no slow-query API", cfg.NodeKind)
		}
	}
	return nil
}

// parseNodeApply parses --node-apply.
func parseNodeApply(s string) (admin.NodeApply, error) {
	var a admin.NodeApply
	if s == "none" {
		return a, nil
	}
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "slow_query":
			a.SlowQuery = true
		case "trace_probability":
			a.TraceProbability = true
		default:
			return a, usageErrorf("--node-apply %q: want a comma list of slow_query and trace_probability, or none", s)
		}
	}
	return a, nil
}

// guardrailSource reads the guardrail's counters: requests and sink drops from the
// tracer, the added latency from the tracer's AddedLatency hook, the process's CPU, and
// the CPU of tracing's work that work counted.
func guardrailSource(tr *tracing.Tracer, added *guardrail.AddedLatency, work *guardrail.Meter) guardrail.Source {
	return guardrail.SourceFunc(func() guardrail.Sample {
		st := tr.Stats()
		s := guardrail.Sample{Requests: st.Requests, Added: added.Histogram()}
		for _, n := range st.Dropped {
			s.Dropped += n
		}
		s.CPU, s.CPUOK = guardrail.ProcessCPU()
		s.TracingCPU, s.TracingOps, s.TracingCPUOK = work.CPU()
		s.GCCPU, s.GCCPUOK = guardrail.GCCPU()
		return s
	})
}
