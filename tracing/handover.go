package tracing

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// What a sidecar hands to the process that takes it over (the handover; see the sidecar
// package): the configuration, the filter and the prepared-statement registry, each in a
// form that survives JSON.

// ConfigState is a Config with every field in JSON, Probability and FollowClientSampling
// included, for a handover to another process. It is a plain value.
type ConfigState struct {
	Enable               bool    `json:"enable"`
	Fast                 bool    `json:"fast"`
	ThresholdMicros      int64   `json:"threshold_us"`
	TTLSeconds           int64   `json:"ttl_s"`
	Probability          float64 `json:"probability"`
	FollowClientSampling bool    `json:"follow_client_sampling"`
	FloorIntervalMS      int64   `json:"floor_interval_ms,omitempty"`
	FloorMaxPerSecond    int     `json:"floor_max_per_second,omitempty"`
}

// State returns c as a ConfigState.
func (c Config) State() ConfigState {
	return ConfigState{c.Enable, c.Fast, c.ThresholdMicros, c.TTLSeconds, c.Probability, c.FollowClientSampling,
		c.FloorInterval.Milliseconds(), c.FloorMaxPerSecond}
}

// Config returns the Config that s holds.
func (s ConfigState) Config() Config {
	return Config{s.Enable, s.Fast, s.ThresholdMicros, s.TTLSeconds, s.Probability, s.FollowClientSampling,
		time.Duration(s.FloorIntervalMS) * time.Millisecond, s.FloorMaxPerSecond}
}

// Params returns the parameters that ParseFilter makes f from again; nil for the zero
// Filter. Keyspace and table names are quoted, so that they keep their case.
func (f Filter) Params() map[string]string {
	if f.IsZero() {
		return nil
	}
	p := map[string]string{}
	if f.Keyspace != "" {
		p["keyspace"] = cql.QuoteName(f.Keyspace)
	}
	if f.Table != "" {
		p["table"] = cql.QuoteName(f.Table)
	}
	if f.User != "" {
		p["user"] = f.User
	}
	if f.Client.IsValid() {
		p["client"] = f.Client.String()
	}
	if f.Statement != "" {
		p["statement"] = f.Statement
	}
	if f.Opcode != "" {
		p["opcode"] = f.Opcode
	}
	return p
}

// PreparedEntry is one statement of a registry, for a handover.
type PreparedEntry struct {
	ID        []byte `json:"id"`
	Statement `json:"statement"`
}

// Entries returns the registry's statements, oldest first, so that Put in that order
// makes the same registry. It is safe for concurrent use.
func (p *Statements) Entries() []PreparedEntry {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]PreparedEntry, 0, len(p.order))
	for i := range p.order {
		k := p.order[(p.head+i)%len(p.order)]
		if st := p.m[k]; st != nil {
			out = append(out, PreparedEntry{ID: []byte(k), Statement: *st})
		}
	}
	return out
}

// tracerState is the tracer's part of a handover (Tracer.ExportState): the configuration's
// fields inline, as a predecessor without the filter and registry here sent them.
type tracerState struct {
	ConfigState
	Filter   map[string]string `json:"trace_filter,omitempty"`
	Prepared []PreparedEntry   `json:"prepared,omitempty"`
}

// ExportState returns the tracer's part of a handover: its configuration, filter and
// prepared-statement registry (package sidecar/handover's Part).
func (t *Tracer) ExportState() (json.RawMessage, error) {
	return json.Marshal(tracerState{ConfigState: t.Config().State(), Filter: t.Filter().Params(), Prepared: t.Statements().Entries()})
}

// RestoreState installs what another process's tracer exported (ExportState).
func (t *Tracer) RestoreState(b json.RawMessage) error {
	var s tracerState
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if err := t.SetConfig(s.ConfigState.Config()); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if s.Filter != nil {
		f, err := ParseFilter(s.Filter)
		if err != nil {
			return fmt.Errorf("trace filter: %w", err)
		}
		t.SetFilter(f)
	}
	for _, e := range s.Prepared {
		t.Statements().Put(e.ID, e.Statement)
	}
	return nil
}
