package admin

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/internal/buildinfo"
)

// Process is the process part of /tracecar/status: this sidecar process and how it came to
// be, started afresh or by taking another over (tracecar sidecar --takeover).
type Process struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// ControlSocket is where a successor connects to take this process over; empty when
	// there is none.
	ControlSocket string `json:"control_socket,omitempty"`
	// SchedPolicy is the scheduling policy the process's threads run under, as the
	// sidecar's --sched-policy names it (batch or normal); empty when none was set (not
	// Linux, or refused by the system).
	SchedPolicy string `json:"sched_policy,omitempty"`
	// Predecessor is the process this one took over; nil for a process started afresh.
	Predecessor *ProcessPeer `json:"predecessor,omitempty"`
	// Handover is the handover that made this process; nil for one started afresh.
	Handover *Handover `json:"handover,omitempty"`
	// Build is the running binary: tracecar's version, its VCS revision, the Go version.
	Build buildinfo.Info `json:"build"`
}

// ProcessPeer is another sidecar process.
type ProcessPeer struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
}

// Handover describes the handover from the predecessor.
type Handover struct {
	// At is when the listeners and the runtime state were received.
	At time.Time `json:"at"`
	// ConnectionsFrom is when this process, serving, asked for the connections, and
	// ConnectionsTo when the last had arrived (zero until then): the span in which clients
	// may wait for their connection to move.
	ConnectionsFrom time.Time `json:"connections_from"`
	ConnectionsTo   time.Time `json:"connections_to,omitzero"`
	// Received counts the client connections this process took over.
	Received int `json:"connections_received"`
	// ClosedByPredecessor counts those the predecessor drained and closed instead (TLS,
	// or not quiet within its drain timeout), as it reported at the end.
	ClosedByPredecessor int `json:"connections_closed_by_predecessor"`
	// Done is false while the connections are arriving, and stays false when the
	// predecessor went away before it was done (this process keeps what it received).
	Done bool `json:"done"`
}

// build is the running binary, as /tracecar/status names it.
var build = buildinfo.Read()

// WithProcess makes /tracecar/status report the process that f describes, and the binary
// it runs (Process.Build, unless f sets it).
func WithProcess(f func() Process) Option {
	return func(s *Server) { s.process = f }
}

// WithWriteGate makes every request ask gate first: while it returns an error, requests
// other than GET (and HEAD) get 503 with its message, and every response closes its
// connection.
// A sidecar that hands itself over to a new process refuses changes this way, so that no
// change is made to the state it has handed over.
func WithWriteGate(gate func() error) Option {
	return func(s *Server) { s.writeGate = gate }
}

// gated answers a request that the write gate refuses, and reports whether it did. While
// the gate is closed every response closes its connection, reads too: the listener is the
// new process's, and a client's next connection reaches it.
func (s *Server) gated(ctx *fasthttp.RequestCtx, method string) bool {
	if s.writeGate == nil {
		return false
	}
	err := s.writeGate()
	if err == nil {
		return false
	}
	ctx.SetConnectionClose()
	if method == http.MethodGet {
		return false
	}
	writeError(ctx, errorf(http.StatusServiceUnavailable, "%v", err))
	return true
}
