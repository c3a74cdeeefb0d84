package main

import (
	"flag"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// statementsConfig configures per-statement statistics.
type statementsConfig struct {
	On  bool // --statement-stats: on from the start
	Max int  // --statement-stats-max
}

func addStatementFlags(fs *flag.FlagSet, c *statementsConfig) {
	fs.BoolVar(&c.On, "statement-stats", false, "keep per-statement statistics from the start (GET /tracecar/statements); POST /tracecar/statement_stats turns them on and off")
	fs.IntVar(&c.Max, "statement-stats-max", statements.DefaultMax, "statements kept by statement statistics; past it the least-called one is evicted")
}

func (c statementsConfig) check() error {
	if c.Max <= 0 {
		return usageErrorf("--statement-stats-max must be a positive number of statements, got %d", c.Max)
	}
	return nil
}

// newStatements returns the statistics of cfg: the sidecar hook, and the trace floor's
// runner.
func newStatements(c statementsConfig) *statements.Stats {
	st := statements.New(statements.Options{Max: c.Max, Now: tracing.Now})
	st.SetEnabled(c.On)
	var _ sidecar.StatementStats = st
	var _ tracing.FloorRunner = st
	return st
}

// serveStatements makes the admin API serve st: its endpoints and its series.
func serveStatements(c *admin.Config, st *statements.Stats) {
	c.Statements = st
	c.Collectors = append(c.Collectors, st)
}
