//go:build !linux

package handover

import (
	"context"
	"net"
	"os"
)

// Without epoll no connection is on an event loop, so none can move: a handover is
// Linux's only.

// Successor is the new process of a handover; see the Linux build.
type Successor struct{}

// Predecessor is the old process of a handover; see the Linux build.
type Predecessor struct{}

// ListenControl fails: see ErrHandoverUnsupported.
func ListenControl(string) (*net.UnixListener, error) { return nil, ErrHandoverUnsupported }

// AcceptSuccessor fails: see ErrHandoverUnsupported.
func AcceptSuccessor(*net.UnixListener) (*Successor, error) { return nil, ErrHandoverUnsupported }

// DialPredecessor fails: see ErrHandoverUnsupported.
func DialPredecessor(context.Context, string) (*Predecessor, error) {
	return nil, ErrHandoverUnsupported
}

// Peer returns the zero Peer.
func (*Successor) Peer() Peer { return Peer{} }

// Refuse does nothing.
func (*Successor) Refuse(string) {}

// Offer fails: see ErrHandoverUnsupported.
func (*Successor) Offer(context.Context, []ListenerFile, []byte) error { return ErrHandoverUnsupported }

// Close does nothing.
func (*Successor) Close() error { return nil }

// Peer returns the zero Peer.
func (*Predecessor) Peer() Peer { return Peer{} }

// Receive fails: see ErrHandoverUnsupported.
func (*Predecessor) Receive(context.Context) (map[string]*os.File, []byte, error) {
	return nil, nil, ErrHandoverUnsupported
}

// Ready fails: see ErrHandoverUnsupported.
func (*Predecessor) Ready() error { return ErrHandoverUnsupported }

// Close does nothing.
func (*Predecessor) Close() error { return nil }

// Handoff fails: see ErrHandoverUnsupported.
func Handoff(context.Context, Source, *Successor, func() []byte) (Result, error) {
	return Result{}, ErrHandoverUnsupported
}

// Adopt fails: see ErrHandoverUnsupported.
func Adopt(context.Context, Sink, *Predecessor) (Result, error) {
	return Result{}, ErrHandoverUnsupported
}
