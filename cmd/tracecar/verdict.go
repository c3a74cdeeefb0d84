package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/tracecar/tracecar/loadcheck"
)

// verdictFlags adds the flags of the budget verdict and of the built-in tracing modes'
// slow-query threshold to the loadcheck flags.
func verdictFlags(fs *flag.FlagSet, cfg *loadcheck.Config) {
	cfg.Verdict = loadcheck.VerdictBreach
	fs.Func("verdict", "`RULE` that turns --max-overhead budgets into exit 3: breach (the default) when a budget is shown over its limit "+
		"(a one-sided test of overhead ≤ limit at p < 0.05, Holm-adjusted over the budgets), or prove unless every budget is shown within "+
		"its limit (the upper one-sided 95% bound under it; with --target-error, more rounds up to --max-rounds while one is not resolved)",
		func(s string) error {
			if s != loadcheck.VerdictBreach && s != loadcheck.VerdictProve {
				return fmt.Errorf("want %s or %s", loadcheck.VerdictBreach, loadcheck.VerdictProve)
			}
			cfg.Verdict = s
			return nil
		})
	fs.Func("threshold", "slow-query threshold `DURATION` of the built-in fast, full and guardrail modes, e.g. 0 (every request recorded), 1ms "+
		"(default: the sidecar's own, 500ms unless changed, where a fast request records nothing)",
		func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return fmt.Errorf("want a duration of 0 or more, such as 0, 100us or 500ms")
			}
			cfg.Threshold = &d
			return nil
		})
}
