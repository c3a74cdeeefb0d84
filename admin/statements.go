package admin

import (
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/tracing/statements"
)

// DefaultStatementsLimit is the number of statements GET /tracecar/statements returns
// without a limit parameter.
const DefaultStatementsLimit = 100

// StatementStats is the JSON of GET /tracecar/statement_stats.
type StatementStats = adminapi.StatementStats

// statementStats returns the statistics' settings and size.
func (s *opsAPI) statementStats() StatementStats {
	return StatementStats{Enabled: s.stmts.Enabled(), Max: s.stmts.Max(),
		Entries: len(s.stmts.List("calls", 0, false)), Evicted: s.stmts.Evicted()}
}

// getStatementStats serves GET /tracecar/statement_stats.
func (s *opsAPI) getStatementStats(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	return writeJSON(ctx, s.statementStats())
}

// setStatementStats serves POST /tracecar/statement_stats?enable=true|false.
func (s *opsAPI) setStatementStats(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "enable", "for")
	if err != nil {
		return err
	}
	on, ok, err := p.boolean("enable")
	if err != nil {
		return err
	}
	d, err := p.forParam()
	if err != nil {
		return err
	}
	if !ok {
		return missing("enable", "true or false")
	}
	err = s.toggle(ctx, "POST /tracecar/statement_stats", d, func() ([]TimerSetting, bool, error) {
		old := s.stmts.Enabled()
		s.stmts.SetEnabled(on)
		s.audit(ctx, "statement_stats").Bool("old", old).Bool("new", on).Msg("admin change")
		return []TimerSetting{boolSetting(SettingStatementStats, old, on)}, false, nil
	})
	if err != nil {
		return err
	}
	return writeJSON(ctx, s.statementStats())
}

// getStatements serves GET /tracecar/statements?sort=…&limit=N&histogram=true.
func (s *opsAPI) getStatements(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "sort", "limit", "histogram")
	if err != nil {
		return err
	}
	order := "total_time"
	if v, ok := p["sort"]; ok {
		if !contains(statements.SortOrders, v) {
			return badParam("sort", v, "one of "+strings.Join(statements.SortOrders, ", "))
		}
		order = v
	}
	max := int64(s.stmts.Max())
	limit, ok, err := p.integer("limit", 1, max, "an integer from 1 to "+strconv.FormatInt(max, 10))
	if err != nil {
		return err
	}
	if !ok {
		limit = DefaultStatementsLimit
	}
	hist, _, err := p.boolean("histogram")
	if err != nil {
		return err
	}
	return writeJSON(ctx, statementsOf(s.stmts.List(order, int(limit), hist)))
}

// resetStatements serves POST /tracecar/statements/reset.
func (s *opsAPI) resetStatements(ctx *fasthttp.RequestCtx, _ string) error {
	if _, err := readParams(ctx); err != nil {
		return err
	}
	s.stmts.Reset()
	s.audit(ctx, "statements_reset").Msg("admin change")
	return nil
}
