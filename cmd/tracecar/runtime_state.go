package main

import (
	"encoding/json"
	"fmt"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/guardrail"
	"github.com/tracecar/tracecar/tracing/statements"
)

// runtimeState is what can change at runtime, through the admin API or the guardrail, and
// so moves to the successor rather than being read from its flags.
type runtimeState struct {
	Tracing           tracing.ConfigState     `json:"tracing"`
	Filter            map[string]string       `json:"trace_filter,omitempty"`
	Loggers           map[string]string       `json:"loggers"`
	Guardrail         guardrail.State         `json:"guardrail"`
	StatementStats    bool                    `json:"statement_stats"`
	StatementPrepared []statements.Prepared   `json:"statement_prepared,omitempty"`
	Prepared          []tracing.PreparedEntry `json:"prepared,omitempty"`
	// Audit is the audit log's settings (POST /tracecar/audit); nil from a predecessor
	// without one, whose successor keeps its flags' settings.
	Audit *audit.View `json:"audit,omitempty"`
	// Timers are the toggles' timers (for=DURATION), with their remaining time.
	Timers []admin.TimerState `json:"timers,omitempty"`
}

// exportState returns the stack's runtime state.
func (st *stack) exportState() runtimeState {
	s := runtimeState{
		Tracing:           st.tracer.Config().State(),
		Filter:            st.tracer.Filter().Params(),
		Loggers:           map[string]string{},
		Guardrail:         st.guard.State(),
		StatementStats:    st.stmts.Enabled(),
		StatementPrepared: st.stmts.PreparedStatements(),
		Prepared:          st.tracer.Statements().Entries(),
		Timers:            st.api.TimerStates(),
	}
	if st.audit != nil {
		v := st.audit.Settings().View()
		s.Audit = &v
	}
	for _, n := range st.reg.Names() {
		if l, err := st.reg.Level(n); err == nil {
			s.Loggers[n] = l
		}
	}
	return s
}

// finalState is what the old process sends once its connections have moved: the
// statement statistics it gathered, and the prepared statements it learnt, to the end
// (finalRuntime).
func (st *stack) finalState() []byte {
	b, _ := json.Marshal(finalRuntime{Statements: st.stmts.List("calls", 0, true), Prepared: st.tracer.Statements().Entries()})
	return b
}

// finalRuntime is what counts until the end of a handover: the statement statistics (the
// successor has counted its own requests meanwhile, and adds these), and the prepared
// statements, with those prepared after the runtime state was sent: a driver that
// prepared one on the old process executes it on the new one, whose audit records and
// traces then show its text.
type finalRuntime struct {
	Statements []statements.Statement  `json:"statements,omitempty"`
	Prepared   []tracing.PreparedEntry `json:"prepared,omitempty"`
}

// restoreFinal adds what the predecessor counted to the end.
func (st *stack) restoreFinal(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	var f finalRuntime
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	st.stmts.Import(f.Statements)
	reg := st.tracer.Statements()
	for _, e := range f.Prepared {
		if reg.Lookup(e.ID) == nil {
			reg.Put(e.ID, e.Statement)
		}
	}
	return nil
}

// restore installs the runtime state a predecessor handed over, before the stack serves:
// it wins over the flags, as the changes made through the admin API would have.
func (st *stack) restore(in *inheritance) error {
	if in == nil {
		return nil
	}
	s := in.state
	if err := st.tracer.SetConfig(s.Tracing.Config()); err != nil {
		return fmt.Errorf("inherited tracing configuration: %w", err)
	}
	if err := st.guard.Restore(s.Guardrail); err != nil {
		return fmt.Errorf("inherited guardrail: %w", err)
	}
	if s.Filter != nil {
		f, err := tracing.ParseFilter(s.Filter)
		if err != nil {
			return fmt.Errorf("inherited trace filter: %w", err)
		}
		st.tracer.SetFilter(f)
	}
	for name, level := range s.Loggers {
		st.reg.Logger(name)
		if err := st.reg.SetLevel(name, level); err != nil {
			return fmt.Errorf("inherited logger %s: %w", name, err)
		}
	}
	st.stmts.SetEnabled(s.StatementStats)
	st.stmts.LearnPrepared(s.StatementPrepared)
	reg := st.tracer.Statements()
	for _, e := range s.Prepared {
		reg.Put(e.ID, e.Statement)
	}
	st.api.RestoreTimers(s.Timers)
	return st.restoreAudit(s.Audit)
}

// restoreAudit installs the audit settings a predecessor handed over. A successor started
// without an audit sink cannot audit: it says so, loudly, and runs with the audit off.
func (st *stack) restoreAudit(v *audit.View) error {
	if v == nil {
		return nil
	}
	s, err := v.Settings()
	if err != nil {
		return fmt.Errorf("inherited audit settings: %w", err)
	}
	if s.Enabled && !st.audit.HasSinks() {
		st.reg.Logger(logs.Admin).Error().Interface("inherited", v).
			Msg("takeover: the predecessor audited, but this process has no audit sink (--audit-dir): the audit log is OFF")
		s.Enabled = false
	}
	st.audit.Set(s)
	return nil
}
