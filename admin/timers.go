package admin

// Toggle timers: every toggle (slow_query, trace_probability, the loggers, the trace
// filter, the statement statistics) takes for=DURATION, and when the time is up what that
// toggle changed goes back to what it was before it. A setting changed again later keeps
// the later value, and its part of the timer is dropped. With Config.ToggleMaxDuration, a
// costly toggle sent without for gets that duration.
//
// This file holds the timers' state (a Server's timers, what each puts back, the for
// parameter, the settings written as text); toggle.go, above the core, runs a toggle's
// change under them, their expiry, and their handover.

import (
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/tracing"
)

// MaxToggleFor is the longest for= a toggle takes: a week.
const MaxToggleFor = 7 * 24 * time.Hour

// wantFor describes the for parameter in messages.
const wantFor = "a duration more than 0 and at most 168h (7 days), such as 10m or 90s"

// TimerHeader is the header of the answer to a toggle with a timer: when it reverts, for
// how long, and whether --toggle-max-duration set it.
const TimerHeader = "Tracecar-Timer"

// AuditUserTimer is the username of the ADMIN record of a timer's expiry: no client made
// that change, the sidecar did.
const AuditUserTimer = "timer"

// Setting names of TimerSetting.
const (
	SettingEnable         = "slow_query.enable"
	SettingFast           = "slow_query.fast"
	SettingThreshold      = "slow_query.threshold"
	SettingTTL            = "slow_query.ttl"
	SettingProbability    = "trace_probability"
	SettingTraceFilter    = "trace_filter"
	SettingStatementStats = "statement_stats"
	SettingTraceFloor     = "trace_floor"
	settingLoggerPrefix   = "logger "
)

// TimerSetting is one setting that a timer puts back.
type TimerSetting = adminapi.TimerSetting

// Timer is a toggle's timer as GET /tracecar/status shows it.
type Timer = adminapi.Timer

// TimerState is a timer handed over to the process that takes the sidecar over: its
// remaining time, not a time on this process's clock.
type TimerState struct {
	Toggle    string         `json:"toggle"`
	Settings  []TimerSetting `json:"settings"`
	Remaining time.Duration  `json:"remaining_ns"`
	Imposed   bool           `json:"imposed,omitempty"`
}

// timers are a Server's toggle timers.
type timers struct {
	max     time.Duration
	expired *prometheus.CounterVec

	// apply serialises the toggles and the expiries, so that an expiry never lands
	// between a toggle's change and the dropping of the timers it overrides. mu guards
	// the rest, and is never held across a change (a GET of the status never waits on
	// the node).
	apply sync.Mutex
	mu    sync.Mutex
	next  uint64
	list  map[uint64]*timer
	stop  bool
}

type timer struct {
	Timer
	t *time.Timer
}

func newTimers() timers {
	return timers{list: map[uint64]*timer{}, expired: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracecar_toggle_expiries_total",
		Help: "Toggle timers (for=DURATION) that expired and put their settings back, by toggle.",
	}, []string{"toggle"})}
}

// forParam reads the for parameter: a duration in (0, MaxToggleFor], 0 when absent.
func (p params) forParam() (time.Duration, error) {
	v, ok := p["for"]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > MaxToggleFor {
		return 0, badParam("for", v, wantFor)
	}
	return d, nil
}

// boolSetting, intSetting and floatSetting are a setting changed from old to cur.
func boolSetting(name string, old, cur bool) TimerSetting {
	return TimerSetting{Setting: name, RevertTo: strconv.FormatBool(old), SetTo: strconv.FormatBool(cur)}
}

func intSetting(name string, old, cur int64) TimerSetting {
	return TimerSetting{Setting: name, RevertTo: strconv.FormatInt(old, 10), SetTo: strconv.FormatInt(cur, 10)}
}

func floatSetting(name string, old, cur float64) TimerSetting {
	return TimerSetting{Setting: name, RevertTo: strconv.FormatFloat(old, 'g', -1, 64), SetTo: strconv.FormatFloat(cur, 'g', -1, 64)}
}

// filterQuery writes a filter as a query string, "" for none.
func filterQuery(f tracing.Filter) string {
	v := url.Values{}
	for k, val := range f.Params() {
		v.Set(k, val)
	}
	return v.Encode()
}

// floorSetting is the trace floor of c as a timer's setting: "INTERVAL/MAX", "0s/0" off.
func floorSetting(c tracing.Config) string {
	return c.FloorInterval.String() + "/" + strconv.Itoa(c.FloorMaxPerSecond)
}

// parseFloorSetting reads floorSetting's value back.
func parseFloorSetting(v string) (time.Duration, int) {
	iv, mx, _ := strings.Cut(v, "/")
	d, _ := time.ParseDuration(iv)
	n, _ := strconv.Atoi(mx)
	return d, n
}

// costlyLevel reports whether a log level costs: debug or trace.
func costlyLevel(l string) bool { return l == "debug" || l == "trace" }
