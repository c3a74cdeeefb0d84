package admin

import (
	"errors"
	"net/http"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/tracing"
)

// getTraceFilter serves GET /tracecar/trace_filter: the filter in force, {} for none.
func (s *tracingAPI) getTraceFilter(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return writeJSON(ctx, filterOf(s.filter.Filter()))
}

// setTraceFilter serves POST /tracecar/trace_filter with any of keyspace, table, user,
// client, statement and opcode, ANDed; it replaces the filter as a whole.
func (s *tracingAPI) setTraceFilter(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, append(slices.Clone(tracing.FilterParams), "for")...)
	if err != nil {
		return err
	}
	d, err := p.forParam()
	if err != nil {
		return err
	}
	delete(p, "for")
	if len(p) == 0 {
		return errorf(http.StatusBadRequest, "no filter parameter: give any of keyspace, table, user, client, statement, opcode (DELETE clears the filter)")
	}
	f, err := tracing.ParseFilter(p)
	var fe *tracing.FilterError
	if errors.As(err, &fe) {
		return badParam(fe.Param, fe.Value, fe.Want)
	}
	if err != nil {
		return err
	}
	err = s.toggle(ctx, "POST /tracecar/trace_filter", d, func() ([]TimerSetting, bool, error) {
		old := s.filter.Filter()
		s.filter.SetFilter(f)
		s.audit(ctx, "trace_filter").Interface("old", old).Interface("new", f).Msg("admin change")
		return []TimerSetting{{Setting: SettingTraceFilter, RevertTo: filterQuery(old), SetTo: filterQuery(f)}}, false, nil
	})
	if err != nil {
		return err
	}
	return writeJSON(ctx, filterOf(f))
}

// clearTraceFilter serves DELETE /tracecar/trace_filter.
func (s *tracingAPI) clearTraceFilter(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return s.toggle(ctx, "DELETE /tracecar/trace_filter", 0, func() ([]TimerSetting, bool, error) {
		old := s.filter.Filter()
		s.filter.SetFilter(tracing.Filter{})
		s.audit(ctx, "trace_filter").Interface("old", old).Msg("admin change: filter cleared")
		return []TimerSetting{{Setting: SettingTraceFilter, RevertTo: filterQuery(old)}}, false, nil
	})
}
