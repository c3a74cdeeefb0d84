package adminapi

import "time"

// The shapes of the engine's state as the API shows it: the guardrail, the workload
// capture and the audit log. The server converts the engine's values into these, so that
// a client reads them without importing the engine.

// Guardrail is the guardrail's state, GET /tracecar/guardrail and the guardrail of GET
// /tracecar/status.
type Guardrail struct {
	// State is "none" when no budget is set, "ok" when tracing runs what the user asked
	// for, "stepped_down" while the guardrail runs a cheaper level, and "fail_closed"
	// when the latest window's CPU share was unknown with tracing on.
	State string `json:"state"`
	// Detail says in words what the guardrail is doing.
	Detail string `json:"detail,omitempty"`
	// Budget is the budget in force; nil when none is set.
	Budget *GuardrailBudget `json:"budget,omitempty"`
	// Level is the level running now; UserLevel is the level the user asked for.
	Level     string `json:"level,omitempty"`
	UserLevel string `json:"user_level,omitempty"`
	// LastAction is the latest step or restore; nil before the first.
	LastAction *GuardrailAction `json:"last_action,omitempty"`
	// Reason is the reason of the latest action.
	Reason string `json:"reason,omitempty"`
	// Figures are those of the latest window; nil before the first window ends.
	Figures *GuardrailFigures `json:"figures,omitempty"`
	// RestoreDue is when a restore may happen, while stepped down with Restore set.
	RestoreDue *time.Time `json:"restore_due,omitempty"`
	// Windows counts the windows judged since the user's last change (or budget change).
	Windows int `json:"windows"`
}

// GuardrailBudget is the guardrail's budget in the units POST /tracecar/guardrail takes.
type GuardrailBudget struct {
	AddedP99    string  `json:"added_p99,omitempty"`
	CPUPercent  float64 `json:"cpu_pct,omitempty"`
	DropsPerSec float64 `json:"drops_per_s,omitempty"`
	Window      string  `json:"window"`
	Cooldown    string  `json:"cooldown"`
	Restore     bool    `json:"restore"`
}

// GuardrailAction is the guardrail's latest step down or restore.
type GuardrailAction struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail"`
}

// GuardrailFigures are what the guardrail measured over one window (docs/guardrails.md
// says what each means); a figure it could not measure is -1.
type GuardrailFigures struct {
	WindowSeconds          float64 `json:"window_s"`
	Requests               uint64  `json:"requests"`
	RatePerSec             float64 `json:"rate_per_s"`
	AddedP99US             float64 `json:"added_p99_us"`
	AddedSamples           uint64  `json:"added_samples"`
	CPUPercent             float64 `json:"cpu_pct"`
	CPUMethod              string  `json:"cpu_method,omitempty"`
	CPUFrom                string  `json:"cpu_from,omitempty"`
	CPUErrPercent          float64 `json:"cpu_err_pct"`
	TracingCPUPerRequestUS float64 `json:"tracing_cpu_per_request_us"`
	FailClosed             bool    `json:"fail_closed,omitempty"`
	CPUPerRequestUS        float64 `json:"cpu_per_request_us"`
	DropsPerSec            float64 `json:"drops_per_s"`
}

// PathCapture is the workload capture's endpoint.
const PathCapture = "/tracecar/capture"

// Capture is the workload capture's state, GET and POST /tracecar/capture and the capture
// of GET /tracecar/status.
type Capture struct {
	// State is "capturing" or "off".
	State string `json:"state"`
	// Dir is the capture directory, "" when none is configured.
	Dir string `json:"dir"`
	// The running capture's file (with the suffix .partial while it runs), policy, limits
	// and counters.
	File       string     `json:"file,omitempty"`
	Values     string     `json:"values,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
	MaxBytes   int64      `json:"max_bytes,omitempty"`
	Records    uint64     `json:"records"`
	Bytes      int64      `json:"bytes"`
	Dropped    uint64     `json:"dropped"`
	Warning    string     `json:"warning,omitempty"`
	// Last is the capture that ended last.
	Last *CaptureResult `json:"last,omitempty"`
}

// CaptureResult is how a capture ended.
type CaptureResult struct {
	File    string    `json:"file"`
	Values  string    `json:"values"`
	EndedAt time.Time `json:"ended_at"`
	Reason  string    `json:"reason"`
	Records uint64    `json:"records"`
	Bytes   int64     `json:"bytes"`
	Dropped uint64    `json:"dropped"`
	// Error is set when the file could not be completed; it was then removed.
	Error string `json:"error,omitempty"`
}

// PathAudit is the audit log's endpoint.
const PathAudit = "/tracecar/audit"

// Audit is the audit log's state, GET and POST /tracecar/audit and the audit of GET
// /tracecar/status: the settings, the policy, the records by category, each sink's state.
type Audit struct {
	AuditSettings
	Policy string `json:"policy"`
	// Records counts the records made since start, by category.
	Records map[string]uint64 `json:"records"`
	// Dropped counts the records dropped by every sink.
	Dropped uint64      `json:"dropped"`
	Sinks   []AuditSink `json:"sinks"`
	// Error says which sinks fail and why; empty when every sink works.
	Error string `json:"error,omitempty"`
}

// AuditSettings are the audit log's settings as names.
type AuditSettings struct {
	Enabled      bool     `json:"enable"`
	Categories   []string `json:"categories"`
	Keyspaces    []string `json:"keyspaces"`
	Tables       []string `json:"tables"`
	ExcludeUsers []string `json:"exclude_users"`
}

// AuditSink is one audit sink's state: "ok", or "failing" with its last error and since
// when, and its counters.
type AuditSink struct {
	Name         string     `json:"name"`
	State        string     `json:"state"`
	Error        string     `json:"error,omitempty"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	Written      uint64     `json:"written"`
	Dropped      uint64     `json:"dropped"`
	Waits        uint64     `json:"waits"`
	Queued       int        `json:"queued"`
	Syncs        uint64     `json:"syncs"`
}

func (Guardrail) shape() {}
func (Capture) shape()   {}
func (Audit) shape()     {}
