package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// TestRestoreFlatState: a predecessor built before the runtime state went as parts sent one
// flat object (runtimeState); its successor keeps every piece of it: the tracing
// configuration, the trace filter, the prepared registry, the statistics' setting and
// their prepared statements, the loggers and a timer. Without fromFlatState the filter,
// the registry and the statistics' setting start afresh, and the test fails.
func TestRestoreFlatState(t *testing.T) {
	id := []byte{0xca, 0xfe}
	flat := map[string]any{
		"tracing":            tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1234, TTLSeconds: 60, Probability: 0.25}.State(),
		"trace_filter":       map[string]string{"keyspace": `"shop"`},
		"loggers":            map[string]string{"sidecar": "debug"},
		"statement_stats":    true,
		"statement_prepared": []statements.Prepared{{ID: id, Text: "SELECT v FROM shop.t WHERE k = ?", Cols: 1}},
		"prepared":           []tracing.PreparedEntry{{ID: id, Statement: tracing.Statement{Query: "SELECT v FROM shop.t WHERE k = ?", Keyspace: "shop"}}},
		"timers":             []admin.TimerState{{Toggle: "POST /storage_service/trace_probability", Settings: []admin.TimerSetting{{Setting: admin.SettingProbability, RevertTo: "0", SetTo: "0.25"}}, Remaining: time.Hour}},
	}
	b, err := json.Marshal(flat)
	if err != nil {
		t.Fatal(err)
	}
	st := mustStack(t, stackConfig{})
	if err := st.restore(&inheritance{state: b}); err != nil {
		t.Fatal(err)
	}
	if c := st.tracer.Config(); c.ThresholdMicros != 1234 || c.Probability != 0.25 || !c.Fast {
		t.Errorf("tracing configuration %+v", c)
	}
	if f := st.tracer.Filter(); f.Keyspace != "shop" {
		t.Errorf("trace filter %+v; want keyspace shop", f)
	}
	if p := st.tracer.Statements().Lookup(id); p == nil || p.Keyspace != "shop" {
		t.Errorf("prepared registry: %+v; want the statement", p)
	}
	if !st.stmts.Enabled() || len(st.stmts.PreparedStatements()) != 1 {
		t.Errorf("statement statistics on %v with %d prepared; want on with 1", st.stmts.Enabled(), len(st.stmts.PreparedStatements()))
	}
	if l, _ := st.reg.Level("sidecar"); l != "debug" {
		t.Errorf("sidecar logger %q; want debug", l)
	}
	if ts := st.api.Timers(); len(ts) != 1 {
		t.Errorf("timers %+v; want the probability's", ts)
	}
	// A state in parts goes through unchanged.
	parts, err := st.handoverParts().Export()
	if err != nil {
		t.Fatal(err)
	}
	if got := fromFlatState(parts); string(got) != string(parts) {
		t.Errorf("a state in parts was changed:\n%s\n%s", parts, got)
	}
}
