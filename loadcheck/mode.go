package loadcheck

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// Built-in mode specs. Every sidecar mode sets both tracing knobs, so that its figures do
// not depend on the state the sidecar happened to be in; debug and node-debug measure
// logging alone, with tracing off.
const (
	specOffSteps = "POST /storage_service/slow_query?enable=false;POST /storage_service/trace_probability?probability=0"
)

// builtinModes maps the name of each built-in mode to its SPEC, as DESIGN.md lists them.
// Read only.
var builtinModes = map[string]string{
	"direct":     "target=node",
	"off":        specOffSteps,
	"fast":       "POST /storage_service/slow_query?enable=true&fast=true;POST /storage_service/trace_probability?probability=0",
	"full":       "POST /storage_service/slow_query?enable=true&fast=false;POST /storage_service/trace_probability?probability=0",
	"debug":      specOffSteps + ";POST /system/logger/sidecar?level=debug",
	"node-debug": specOffSteps + ";POST /system/logger/node:node?level=debug", // through the sidecar's node API
	"node-trace": specOffSteps + ";POST /tracecar/node/trace_probability?probability=0.01",
	"guardrail":  "POST /storage_service/slow_query?enable=true&fast=false;POST /storage_service/trace_probability?probability=0;POST /tracecar/guardrail?added_p99=200us&cpu=2&window=1s&cooldown=1h&restore=false",
	"sampled":    "POST /storage_service/slow_query?enable=false;POST /storage_service/trace_probability?probability=0.01",
	"stats":      specOffSteps + ";POST /tracecar/statement_stats?enable=true", // off plus statement statistics
	// Off plus a workload capture (the sidecar's --capture-dir), stopped after each run.
	"capture": specOffSteps + ";POST /tracecar/capture?enable=true&duration=1h&max_bytes=4GiB",
	// Off plus the audit log of DML and QUERY to a file (the sidecar's --audit-dir): every
	// statement of a DML workload gives a record, turned off after each run.
	"audit": specOffSteps + ";POST /tracecar/audit?enable=true&categories=DML,QUERY",
	// The trace floor alone: each statement fully traced, with the node's own trace, once a
	// minute, at most 10 traces a second.
	"floor": specOffSteps + ";POST /tracecar/trace_floor?interval=60s&max_per_second=10",
	// Parent-based sampling alone, with every request's W3C context sampled.
	"parent": specOffSteps + ";POST /tracecar/trace_context?follow_client_sampling=true;trace-context=sampled",
}

// thresholdModes are the built-in modes that --threshold sets the slow-query threshold of.
var thresholdModes = map[string]bool{"fast": true, "full": true, "guardrail": true}

// withThreshold adds the threshold, in microseconds as the API takes it, to a spec's
// slow_query steps that enable tracing.
func withThreshold(spec string, d time.Duration) string {
	steps := strings.Split(spec, ";")
	for i, st := range steps {
		if strings.HasPrefix(st, "POST "+pathSlowQuery+"?") && strings.Contains(st, "enable=true") {
			steps[i] = fmt.Sprintf("%s&threshold=%d", st, d.Microseconds())
		}
	}
	return strings.Join(steps, ";")
}

// builtinOrder is the order in which the built-in modes are listed in messages.
var builtinOrder = []string{"direct", "off", "fast", "full", "debug", "node-debug", "node-trace", "sampled", "parent", "floor", "guardrail", "stats", "capture", "audit"}

// defaultModes are the modes run when Config.Modes is empty and a sidecar is configured.
// Read only.
var defaultModes = []string{"direct", "off", "fast", "full", "debug"}

// api names which HTTP API a step talks to.
type api int

const (
	apiAdmin api = iota // the sidecar's admin API
	apiNode             // the node's API
)

func (a api) String() string {
	if a == apiNode {
		return "node"
	}
	return "sidecar"
}

// step is one step of a mode SPEC: an HTTP call, a change of load target, or the trace
// context the load carries.
type step struct {
	target string // non-empty for target=…: "node", "sidecar" or HOST:PORT
	tc     string // non-empty for trace-context=…: sampled, unsampled or none
	proto  int    // non-zero for protocol-version=4 or 5
	api    api
	method string
	path   string
	query  string
}

func (s step) String() string {
	if s.target != "" {
		return "target=" + s.target
	}
	if s.tc != "" {
		return "trace-context=" + s.tc
	}
	if s.proto != 0 {
		return "protocol-version=" + strconv.Itoa(s.proto)
	}
	p := s.method + " " + s.path
	if s.query != "" {
		p += "?" + s.query
	}
	if s.api == apiNode {
		return "node:" + p
	}
	return p
}

// mode is a resolved mode: its steps and the address its load goes to.
type mode struct {
	name   string
	spec   string
	steps  []step
	target string
	// traceContext is the mode's trace-context= step, overriding Config.TraceContext; ""
	// without one.
	traceContext string
	// protocol is the mode's protocol-version= step, overriding Config.ProtocolVersion; 0
	// without one. Such a run goes through loadcheck's own CQL client at every version, so
	// that two modes differ by their protocol alone.
	protocol int
	// settings are its effective tracing settings, known once the state is read.
	settings *ModeSettings
}

var modeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// parseModeFlag splits a --mode NAME=SPEC value.
func parseModeFlag(s string) (name, spec string, err error) {
	name, spec, ok := strings.Cut(s, "=")
	name, spec = strings.TrimSpace(name), strings.TrimSpace(spec)
	if !ok || name == "" || spec == "" {
		return "", "", usageErrorf("--mode %q: want NAME=SPEC, e.g. --mode slow=\"POST /storage_service/slow_query?enable=true&threshold=0\"", s)
	}
	if !modeNameRE.MatchString(name) {
		return "", "", usageErrorf("--mode %q: a mode name has letters, digits, '.', '_' and '-' only", s)
	}
	if _, err := parseSpec(spec); err != nil {
		return "", "", usageErrorf("--mode %s: %v", name, err)
	}
	return name, spec, nil
}

// parseSpec parses a mode SPEC: steps separated by ';', each one of
// "POST /path?query" (the sidecar's admin API), "node:POST /path?query" (the node's API),
// "target=HOST:PORT" (also target=node and target=sidecar) or
// "trace-context=sampled|unsampled|none" (the W3C context the mode's requests carry).
func parseSpec(spec string) ([]step, error) {
	var steps []step
	targets, contexts := 0, 0
	for _, raw := range strings.Split(spec, ";") {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(s, "target="); ok {
			t := strings.TrimSpace(rest)
			if t != "node" && t != "sidecar" {
				if _, port, err := net.SplitHostPort(t); err != nil || port == "" {
					return nil, fmt.Errorf("step %q: want target=HOST:PORT, target=node or target=sidecar", s)
				}
			}
			targets++
			steps = append(steps, step{target: t})
			continue
		}
		if rest, ok := strings.CutPrefix(s, "trace-context="); ok {
			tc := strings.TrimSpace(rest)
			if !validTraceContext(tc) {
				return nil, fmt.Errorf("step %q: want trace-context=sampled, trace-context=unsampled or trace-context=none", s)
			}
			contexts++
			steps = append(steps, step{tc: tc})
			continue
		}
		if rest, ok := strings.CutPrefix(s, "protocol-version="); ok {
			v, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || v != 4 && v != 5 {
				return nil, fmt.Errorf("step %q: want protocol-version=4 or protocol-version=5", s)
			}
			steps = append(steps, step{proto: v})
			continue
		}
		st := step{api: apiAdmin}
		if rest, ok := strings.CutPrefix(s, "node:"); ok {
			st.api, s = apiNode, strings.TrimSpace(rest)
		}
		method, target, ok := strings.Cut(s, " ")
		target = strings.TrimSpace(target)
		if !ok || method != "POST" || !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \t") {
			return nil, fmt.Errorf("step %q: want \"POST /path?query\", \"node:POST /path?query\" or \"target=HOST:PORT\"", raw)
		}
		st.method = method
		st.path, st.query, _ = strings.Cut(target, "?")
		if _, err := url.ParseQuery(st.query); err != nil {
			return nil, fmt.Errorf("step %q: bad query: %v", raw, err)
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("empty SPEC")
	}
	if targets > 1 {
		return nil, fmt.Errorf("SPEC %q has more than one target= step", spec)
	}
	if contexts > 1 {
		return nil, fmt.Errorf("SPEC %q has more than one trace-context= step", spec)
	}
	return steps, nil
}

// resolveModes returns the modes to run, in their configured order, and the baseline.
// Modes defined in ModeSpecs and not listed do not run (unusedModes names them). The
// baseline defaults
// to off when a sidecar and its admin API are configured, else to the first mode; a
// baseline that the list lacks is put first.
func resolveModes(cfg *Config) ([]*mode, string, error) {
	names := slices.Clone(cfg.Modes)
	if len(names) == 0 {
		if cfg.Sidecar != "" {
			for _, n := range defaultModes {
				if n != "direct" || cfg.Node != "" {
					names = append(names, n)
				}
			}
		} else {
			names = []string{"direct"}
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return nil, "", usageErrorf("mode %q is listed twice", n)
		}
		seen[n] = true
	}
	baseline := cfg.Baseline
	if baseline == "" {
		baseline = names[0]
		if seen["off"] || cfg.Sidecar != "" && cfg.Admin != "" && cfg.ModeSpecs["off"] == "" {
			baseline = "off"
		}
	}
	if !seen[baseline] {
		names = append([]string{baseline}, names...)
	}

	modes := make([]*mode, 0, len(names))
	for _, n := range names {
		spec, ok := cfg.ModeSpecs[n]
		if !ok {
			spec, ok = builtinModes[n]
			if ok && cfg.Threshold != nil && thresholdModes[n] {
				spec = withThreshold(spec, *cfg.Threshold)
			}
		}
		if !ok {
			return nil, "", usageErrorf("unknown mode %q: the built-in modes are %s; define others with --mode NAME=SPEC",
				n, strings.Join(builtinOrder, ", "))
		}
		steps, err := parseSpec(spec)
		if err != nil {
			return nil, "", usageErrorf("mode %s: %v", n, err)
		}
		m := &mode{name: n, spec: spec, steps: steps, target: "sidecar"}
		for _, s := range steps {
			switch {
			case s.tc != "":
				m.traceContext = s.tc
			case s.proto != 0:
				m.protocol = s.proto
			case s.target != "":
				m.target = s.target
			case s.api == apiAdmin && cfg.Admin == "":
				return nil, "", usageErrorf("mode %s needs the sidecar's admin API for %q: give --admin URL", n, s)
			case s.api == apiNode && cfg.NodeAPI == "":
				return nil, "", usageErrorf("mode %s needs the node's API for %q: give --node-api URL", n, s)
			}
		}
		switch m.target {
		case "node":
			if cfg.Node == "" {
				return nil, "", usageErrorf("mode %s sends load to the node: give --node HOST:PORT", n)
			}
			m.target = cfg.Node
		case "sidecar":
			if cfg.Sidecar == "" {
				return nil, "", usageErrorf("mode %s sends load to the sidecar: give --sidecar HOST:PORT", n)
			}
			m.target = cfg.Sidecar
		}
		modes = append(modes, m)
	}
	return modes, baseline, nil
}

// roundOrder returns the order in which round r (from 0) runs n modes. Even rounds run
// them forwards and odd rounds backwards, so that a linear drift cancels over each pair
// of rounds (an ABBA design); every second pair also rotates by one place, so that no
// mode always runs first or last.
func roundOrder(n, r int) []int {
	order := make([]int, n)
	if n == 0 {
		return order
	}
	shift := (r / 2) % n
	for i := range order {
		order[i] = (i + shift) % n
	}
	if r%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// unusedModes returns, in name order, the modes defined in cfg.ModeSpecs that do not run.
func unusedModes(cfg *Config, modes []*mode) []string {
	var unused []string
	for n := range cfg.ModeSpecs {
		if !slices.ContainsFunc(modes, func(m *mode) bool { return m.name == n }) {
			unused = append(unused, n)
		}
	}
	sort.Strings(unused)
	return unused
}

// ParseModeFlag splits and checks a --mode NAME=SPEC value. Errors wrap ErrUsage.
func ParseModeFlag(s string) (name, spec string, err error) { return parseModeFlag(s) }

// BuiltinModes returns the names of the built-in modes, in the order messages list them.
func BuiltinModes() []string { return slices.Clone(builtinOrder) }

// DefaultModes returns the modes run when Config.Modes is empty and a sidecar is configured.
func DefaultModes() []string { return slices.Clone(defaultModes) }

const (
	pathSlowQuery   = adminapi.PathSlowQuery
	pathProbability = adminapi.PathProbability
	pathLoggers     = adminapi.PathLoggers
	// The sidecar's view of the node's probability, and its runtime guardrail.
	pathNodeProbability = "/tracecar/node/trace_probability"
	pathGuardrail       = "/tracecar/guardrail"
	// Statement statistics on or off.
	pathStatementStats = "/tracecar/statement_stats"
	// Parent-based sampling on or off.
	pathTraceContext = "/tracecar/trace_context"
	// The workload capture: a mode that starts one has it stopped after each run.
	pathCapture = "/tracecar/capture"
	// The audit log's settings, restored after each run.
	pathAudit = "/tracecar/audit"
	// The trace floor, restored after each run.
	pathTraceFloor = adminapi.PathTraceFloor
)
