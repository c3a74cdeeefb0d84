package admin

// A toggle's change under the timers (timers.go): toggle runs it and starts its timer,
// expire puts back what a timer's toggle changed (revert), Timers lists the running ones
// for the status, and ExportState, RestoreState and StopTimers hand them over.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/tracing"
)

// toggle runs a toggle's change under the timers' lock: apply changes the settings and
// returns what it changed (nil when nothing), and whether that is costly. The settings'
// parts of earlier timers are dropped; with d > 0 (or a costly change and a maximum
// duration) a timer puts them back when d is up, and the answer's TimerHeader says when.
func (s *core) toggle(ctx *fasthttp.RequestCtx, name string, d time.Duration, apply func() ([]TimerSetting, bool, error)) error {
	s.timers.apply.Lock()
	defer s.timers.apply.Unlock()
	settings, costly, err := apply()
	if err != nil {
		return err
	}
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	s.dropLocked(settings)
	imposed := false
	if d == 0 && costly && s.timers.max > 0 {
		d, imposed = s.timers.max, true
	}
	if d == 0 || len(settings) == 0 {
		return nil
	}
	tm := s.addLocked(Timer{Toggle: name, Settings: settings, Imposed: imposed}, d)
	msg := fmt.Sprintf("reverts at %s (for=%s)", tm.Due.Format(time.RFC3339), d)
	if imposed {
		msg = fmt.Sprintf("reverts at %s (for=%s, set by --toggle-max-duration: a costly toggle sent without for)", tm.Due.Format(time.RFC3339), d)
	}
	ctx.Response.Header.Set(TimerHeader, msg)
	s.log.Log().Str(zerolog.LevelFieldName, zerolog.LevelInfoValue).Str("what", "timer").Str("toggle", name).
		Interface("settings", settings).Time("due", tm.Due).Bool("imposed", imposed).Msg("toggle timer set: " + msg)
	return nil
}

// dropLocked removes the settings from the timers: a later change keeps its value.
func (s *core) dropLocked(settings []TimerSetting) {
	for id, tm := range s.timers.list {
		tm.Settings = slices.DeleteFunc(tm.Settings, func(o TimerSetting) bool {
			return slices.ContainsFunc(settings, func(n TimerSetting) bool { return n.Setting == o.Setting })
		})
		if len(tm.Settings) == 0 {
			tm.t.Stop()
			delete(s.timers.list, id)
		}
	}
}

// addLocked starts a timer of d.
func (s *core) addLocked(t Timer, d time.Duration) *timer {
	s.timers.next++
	id := s.timers.next
	t.Due = time.Now().Add(d).UTC().Truncate(time.Millisecond)
	tm := &timer{Timer: t}
	tm.t = time.AfterFunc(d, func() { s.expire(id) })
	s.timers.list[id] = tm
	return tm
}

// expire puts back what timer id's toggle changed, counts it, logs it on the admin logger
// and makes it an ADMIN record.
func (s *core) expire(id uint64) {
	s.timers.apply.Lock()
	defer s.timers.apply.Unlock()
	s.timers.mu.Lock()
	tm := s.timers.list[id]
	stopped := s.timers.stop
	delete(s.timers.list, id)
	s.timers.mu.Unlock()
	if tm == nil || stopped {
		return
	}
	err := s.revert(tm.Settings)
	s.timers.expired.WithLabelValues(tm.Toggle).Inc()
	parts := make([]string, len(tm.Settings))
	for i, st := range tm.Settings {
		parts[i] = st.Setting + "=" + strconv.Quote(st.RevertTo)
	}
	op := "EXPIRE " + tm.Toggle + ": " + strings.Join(parts, " ")
	ev := s.log.Log().Str(zerolog.LevelFieldName, zerolog.LevelInfoValue)
	if err != nil {
		ev = s.log.Error().Err(err)
	}
	ev.Str("what", "timer").Str("toggle", tm.Toggle).Interface("settings", tm.Settings).Bool("imposed", tm.Imposed).
		Msg("toggle timer expired: put back " + strings.Join(parts, " "))
	if s.auditLog != nil && s.auditLog.Wants(audit.ADMIN, "", "", AuditUserTimer) {
		r := audit.Record{EventTime: time.Now(), Source: "timer", Username: AuditUserTimer,
			Category: audit.ADMIN.String(), Operation: op}
		if err != nil {
			r.Error, r.ErrorCode = true, 500
		}
		c, cancel := context.WithTimeout(context.Background(), auditSubmitTimeout)
		defer cancel()
		if err := s.auditLog.Submit(c, r); err != nil {
			s.log.Warn().Err(err).Str("operation", op).Msg("audit record of a timer's expiry dropped: a sink is behind or failing")
		}
	}
}

// revert installs the settings' RevertTo values, those of the tracing configuration in
// one change, applied to the node as the toggles apply them.
func (s *core) revert(settings []TimerSetting) error {
	var sq, prob, floor bool
	var errs []string
	fail := func(st TimerSetting, err error) { errs = append(errs, st.Setting+": "+err.Error()) }
	setCfg := func(c tracing.Config) tracing.Config {
		for _, st := range settings {
			switch st.Setting {
			case SettingEnable:
				c.Enable = st.RevertTo == "true"
			case SettingFast:
				c.Fast = st.RevertTo == "true"
			case SettingThreshold:
				c.ThresholdMicros, _ = strconv.ParseInt(st.RevertTo, 10, 64)
			case SettingTTL:
				c.TTLSeconds, _ = strconv.ParseInt(st.RevertTo, 10, 64)
			case SettingProbability:
				c.Probability, _ = strconv.ParseFloat(st.RevertTo, 64)
			case SettingTraceFloor:
				c.FloorInterval, c.FloorMaxPerSecond = parseFloorSetting(st.RevertTo)
			}
		}
		return c
	}
	for _, st := range settings {
		switch name, logger := strings.CutPrefix(st.Setting, settingLoggerPrefix); {
		case strings.HasPrefix(st.Setting, "slow_query."):
			sq = true
		case st.Setting == SettingProbability:
			prob = true
		case st.Setting == SettingTraceFloor:
			floor = true
		case logger:
			if n, ok := nodeName(name); ok && s.node != nil {
				c, cancel := nodeContext()
				if err := s.node.SetLevel(c, n, st.RevertTo); err != nil {
					fail(st, err)
				}
				cancel()
			} else if err := s.logs.SetLevel(name, st.RevertTo); err != nil {
				fail(st, err)
			}
		case st.Setting == SettingTraceFilter && s.filter != nil:
			q, err := url.ParseQuery(st.RevertTo)
			p := map[string]string{}
			for k, v := range q {
				p[k] = v[0]
			}
			f, ferr := tracing.ParseFilter(p)
			if err != nil || ferr != nil {
				fail(st, fmt.Errorf("filter %q: %v %v", st.RevertTo, err, ferr))
				continue
			}
			s.filter.SetFilter(f)
		case st.Setting == SettingStatementStats && s.stmts != nil:
			s.stmts.SetEnabled(st.RevertTo == "true")
		}
	}
	if (sq || prob || floor) && s.tr != nil {
		if _, cur, err := s.updateConfig(setCfg); err != nil {
			errs = append(errs, "tracing: "+err.Error())
		} else if s.node != nil {
			c, cancel := nodeContext()
			if sq && s.apply.SlowQuery {
				if err := s.node.SetSlowQuery(c, cur.Enable, cur.Fast, cur.ThresholdMicros, cur.TTLSeconds); err != nil {
					errs = append(errs, "node slow_query: "+err.Error())
				}
			}
			if prob && s.apply.TraceProbability {
				if err := s.node.SetTraceProbability(c, cur.Probability); err != nil {
					errs = append(errs, "node trace_probability: "+err.Error())
				}
			}
			cancel()
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Timers returns the running timers, soonest first.
func (s *core) Timers() []Timer {
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	now := time.Now()
	out := []Timer{}
	for _, tm := range s.timers.list {
		t := tm.Timer
		t.Settings = slices.Clone(t.Settings)
		t.RemainingSeconds = max(0, t.Due.Sub(now).Seconds())
		out = append(out, t)
	}
	// Soonest first; timers due at once in the order of their toggles, so that the list
	// does not change with the map's.
	slices.SortFunc(out, func(a, b Timer) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return strings.Compare(a.Toggle, b.Toggle)
	})
	return out
}

// ExportState returns the running timers with their remaining time, the admin API's part
// of a handover (package sidecar/handover's Part).
func (s *Server) ExportState() (json.RawMessage, error) {
	var out []TimerState
	for _, t := range s.Timers() {
		out = append(out, TimerState{Toggle: t.Toggle, Settings: t.Settings,
			Remaining: max(time.Millisecond, time.Until(t.Due)), Imposed: t.Imposed})
	}
	return json.Marshal(out)
}

// RestoreState starts the timers a predecessor handed over (ExportState), each with its
// remaining time.
func (s *Server) RestoreState(b json.RawMessage) error {
	var ts []TimerState
	if err := json.Unmarshal(b, &ts); err != nil {
		return err
	}
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	for _, t := range ts {
		s.addLocked(Timer{Toggle: t.Toggle, Settings: t.Settings, Imposed: t.Imposed}, max(time.Millisecond, t.Remaining))
	}
	return nil
}

// StopTimers stops every timer: nothing is put back after it. A stopping sidecar calls it,
// so that its timers do not fire on a closed tracer (a successor runs them from its state).
func (s *Server) StopTimers() {
	s.timers.apply.Lock() // an expiry under way finishes first
	defer s.timers.apply.Unlock()
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	s.timers.stop = true
	for _, tm := range s.timers.list {
		tm.t.Stop()
	}
}
