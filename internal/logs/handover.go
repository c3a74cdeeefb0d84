package logs

import (
	"encoding/json"
	"fmt"
)

// ExportState returns the level of each logger, by name: the registry's part of a handover
// to another process (package sidecar/handover's Part).
func (r *Registry) ExportState() (json.RawMessage, error) {
	levels := map[string]string{}
	for _, n := range r.Names() {
		if l, err := r.Level(n); err == nil {
			levels[n] = l
		}
	}
	return json.Marshal(levels)
}

// RestoreState sets the levels another process's registry exported (ExportState), making
// the loggers it names.
func (r *Registry) RestoreState(b json.RawMessage) error {
	var levels map[string]string
	if err := json.Unmarshal(b, &levels); err != nil {
		return err
	}
	for name, level := range levels {
		r.Logger(name)
		if err := r.SetLevel(name, level); err != nil {
			return fmt.Errorf("logger %s: %w", name, err)
		}
	}
	return nil
}
