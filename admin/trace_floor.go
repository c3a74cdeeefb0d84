package admin

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/tracing"
)

// The trace floor: every statement gets at least one full trace per interval
// (tracing.Config.FloorInterval), served when the server has both a tracer and statement
// statistics, whose keys the floor uses.

func traceFloor(c tracing.Config) adminapi.TraceFloor {
	n := c.FloorMaxPerSecond
	if n == 0 {
		n = tracing.DefaultFloorMaxPerSecond
	}
	return adminapi.TraceFloor{Enabled: c.FloorInterval > 0, Interval: c.FloorInterval.String(),
		IntervalS: c.FloorInterval.Seconds(), MaxPerSecond: n}
}

// getTraceFloor serves GET /tracecar/trace_floor.
func (s *tracingAPI) getTraceFloor(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return writeJSON(ctx, traceFloor(s.tr.Config()))
}

// setTraceFloor serves POST /tracecar/trace_floor?interval=60s&max_per_second=10: interval
// is required (0 turns the floor off), max_per_second keeps its value when absent.
func (s *tracingAPI) setTraceFloor(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "interval", "max_per_second", "for")
	if err != nil {
		return err
	}
	d, err := p.forParam()
	if err != nil {
		return err
	}
	v, ok := p["interval"]
	if !ok {
		return missing("interval", "a duration such as 60s or 10m (0 turns the floor off)")
	}
	interval, err := floorInterval(v)
	if err != nil {
		return err
	}
	maxPS, hasMax, err := p.integer("max_per_second", 1, 1_000_000, "an integer from 1 to 1000000")
	if err != nil {
		return err
	}
	return s.changeFloor(ctx, d, func(c tracing.Config) tracing.Config {
		c.FloorInterval = interval
		if hasMax {
			c.FloorMaxPerSecond = int(maxPS)
		}
		return c
	})
}

// clearTraceFloor serves DELETE /tracecar/trace_floor: the floor off.
func (s *tracingAPI) clearTraceFloor(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return s.changeFloor(ctx, 0, func(c tracing.Config) tracing.Config {
		c.FloorInterval = 0
		return c
	})
}

// changeFloor applies f to the tracing configuration as a toggle: with d > 0 (for=) the
// floor's setting goes back to what it was when d is up; turning the floor on counts as
// costly, as a probability does, for --toggle-max-duration.
func (s *tracingAPI) changeFloor(ctx *fasthttp.RequestCtx, d time.Duration, f func(tracing.Config) tracing.Config) error {
	var cur tracing.Config
	err := s.toggle(ctx, "POST "+adminapi.PathTraceFloor, d, func() ([]TimerSetting, bool, error) {
		old, c, err := s.updateConfig(f)
		if err != nil {
			return nil, false, err
		}
		cur = c
		s.audit(ctx, "trace_floor").Interface("old", traceFloor(old)).Interface("new", traceFloor(cur)).
			Str("mode", cur.Mode()).Msg("admin change")
		return []TimerSetting{{Setting: SettingTraceFloor, RevertTo: floorSetting(old), SetTo: floorSetting(cur)}}, cur.FloorInterval > 0, nil
	})
	if err != nil {
		return err
	}
	return writeJSON(ctx, traceFloor(cur))
}

// floorInterval parses the interval parameter: a Go duration from 0 to 7 days, or 0.
func floorInterval(v string) (time.Duration, error) {
	const want = "a duration from 1s to 168h such as 60s or 10m, or 0 to turn the floor off"
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > tracing.MaxFloorInterval || d > 0 && d < time.Second {
		return 0, badParam("interval", v, want)
	}
	return d, nil
}

// floorRoute is the route of /tracecar/trace_floor.
func (s *tracingAPI) floorRoute() route {
	return route{http.MethodGet: s.getTraceFloor, http.MethodPost: s.setTraceFloor, http.MethodDelete: s.clearTraceFloor}
}
