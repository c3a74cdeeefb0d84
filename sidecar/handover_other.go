//go:build !linux

package sidecar

import "context"

// Without epoll no connection is on an event loop, so none can move: a handover is
// Linux's only.

// Handoff fails: see ErrHandoverUnsupported.
func (p *Proxy) Handoff(context.Context, *Successor, func() []byte) (HandoffResult, error) {
	return HandoffResult{}, ErrHandoverUnsupported
}

// Adopt fails: see ErrHandoverUnsupported.
func (p *Proxy) Adopt(context.Context, *Predecessor) (HandoffResult, error) {
	return HandoffResult{}, ErrHandoverUnsupported
}
