package admin

import (
	"math"
	"time"

	"github.com/valyala/fasthttp"
)

// getGuardrail serves GET /tracecar/guardrail: the guardrail's state with its budget.
func (s *tracingAPI) getGuardrail(ctx *fasthttp.RequestCtx, _ string) error {
	st := s.guardCtl.Status()
	if st.Budget == nil {
		b := s.guardCtl.Budget().JSON()
		st.Budget = &b
	}
	return writeJSON(ctx, guardrailOf(st))
}

// setGuardrail serves POST /tracecar/guardrail: added_p99, cpu, drops, window, cooldown
// and restore, each optional; an absent one keeps its value, and 0 turns a limit off. All
// are parsed before any is applied.
func (s *tracingAPI) setGuardrail(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "added_p99", "cpu", "drops", "window", "cooldown", "restore")
	if err != nil {
		return err
	}
	b := s.guardCtl.Budget()
	old := b
	if v, ok, err := p.duration("added_p99", 0, "a duration such as 500us or 2ms, or 0 for no limit"); err != nil {
		return err
	} else if ok {
		b.AddedP99 = v
	}
	if v, ok, err := p.number("cpu", 0, 100, "a percentage from 0 to 100, such as 5, or 0 for no limit"); err != nil {
		return err
	} else if ok {
		b.CPUPercent = v
	}
	if v, ok, err := p.number("drops", 0, math.MaxFloat64, "a number of sessions per second >= 0, such as 100, or 0 for no limit"); err != nil {
		return err
	} else if ok {
		b.DropsPerSec = v
	}
	if v, ok, err := p.duration("window", 100*time.Millisecond, "a duration of at least 100ms, such as 10s"); err != nil {
		return err
	} else if ok {
		b.Window = v
	}
	if v, ok, err := p.duration("cooldown", 0, "a duration such as 60s"); err != nil {
		return err
	} else if ok {
		b.Cooldown = v
	}
	if v, ok, err := p.boolean("restore"); err != nil {
		return err
	} else if ok {
		b.Restore = v
	}
	if err := s.guardCtl.SetBudget(b); err != nil {
		return err
	}
	s.audit(ctx, "guardrail").Interface("old", old.JSON()).Interface("new", b.JSON()).Msg("admin change")
	return nil
}
