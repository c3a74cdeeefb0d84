package handover

import (
	"encoding/json"
	"fmt"
	"sync"
)

// Part is a stateful part of the process that a handover carries to the next one: what
// can change at runtime (through the admin API or the guardrail), and so moves to the
// successor rather than being read from its flags. It exports its state as JSON, and
// restores what the same part of another process exported.
type Part interface {
	ExportState() (json.RawMessage, error)
	RestoreState(json.RawMessage) error
}

// Parts are the parts of a process that a handover carries, each under its name: the
// runtime state goes over the control socket as one JSON object, a member per part. It is
// safe for concurrent use.
type Parts struct {
	mu    sync.Mutex
	names []string // in the order of Register, which is the order of Restore
	parts map[string]Part
}

// Register adds p under name; a name is given once.
func (ps *Parts) Register(name string, p Part) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.parts == nil {
		ps.parts = map[string]Part{}
	}
	if _, dup := ps.parts[name]; dup {
		panic("handover: part " + name + " registered twice")
	}
	ps.names = append(ps.names, name)
	ps.parts[name] = p
}

// Export returns the state of every part, as one JSON object.
func (ps *Parts) Export() ([]byte, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make(map[string]json.RawMessage, len(ps.names))
	for _, name := range ps.names {
		b, err := ps.parts[name].ExportState()
		if err != nil {
			return nil, fmt.Errorf("handover state of %s: %w", name, err)
		}
		out[name] = b
	}
	return json.Marshal(out)
}

// Restore gives each part its member of state (Export in the other process), in the order
// they were registered. A part that state does not name (a predecessor without it) keeps
// its own; a member no part here takes (a predecessor with more) is ignored. It stops at
// the first part that fails.
func (ps *Parts) Restore(state []byte) error {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(state, &in); err != nil {
		return fmt.Errorf("handover state: %w", err)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, name := range ps.names {
		b, ok := in[name]
		if !ok {
			continue
		}
		if err := ps.parts[name].RestoreState(b); err != nil {
			return fmt.Errorf("inherited %s: %w", name, err)
		}
	}
	return nil
}
