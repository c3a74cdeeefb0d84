package guardrail

import (
	"encoding/json"
	"time"

	"github.com/tracecar/tracecar/tracing"
)

// State is what a Controller hands to the process that takes its sidecar over: the budget,
// and whether it runs tracing stepped down from the user's configuration, since when.
type State struct {
	Budget      Budget              `json:"budget"`
	User        tracing.ConfigState `json:"user"`
	SteppedDown bool                `json:"stepped_down"`
	LastStep    time.Time           `json:"last_step,omitzero"`
}

// State returns the controller's state.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return State{Budget: c.g.budget, User: c.g.user.State(), SteppedDown: c.g.steppedDown, LastStep: c.g.lastStep}
}

// Restore takes over the state of another process's controller. The tracer's
// configuration is the caller's to set (to the configuration that controller ran); the
// next window starts now.
func (c *Controller) Restore(s State) error {
	if err := s.Budget.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	c.g.SetBudget(s.Budget)
	c.g.user, c.g.steppedDown, c.g.lastStep = s.User.Config(), s.SteppedDown, s.LastStep
	c.g.Evaluate(c.now(), c.src.Sample(), c.tr.Config())
	c.mu.Unlock()
	select {
	case c.reset <- struct{}{}:
	default:
	}
	return nil
}

// ExportState returns the controller's part of a handover, its State as JSON (package
// sidecar/handover's Part).
func (c *Controller) ExportState() (json.RawMessage, error) { return json.Marshal(c.State()) }

// RestoreState takes over what another process's controller exported (ExportState; see
// Restore): the tracer's part is restored first.
func (c *Controller) RestoreState(b json.RawMessage) error {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return c.Restore(s)
}
