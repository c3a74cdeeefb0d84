// Package handover moves a running proxy's connections to a new process, between two
// frames, so that a driver sees nothing of an upgrade. (The parking of idle connections is
// package idlepark's.) It holds the exchange on the control socket (control_linux.go), the state a connection
// carries to the next process (State), the old process's run (Handoff, handoff_linux.go)
// and the new one's (Adopt, adopt_linux.go).
//
//   - Handoff, in the old process, takes each plaintext connection on an event loop to a
//     quiet point: the loop stops reading its client, forwards what the node still answers,
//     and once no request is in flight and nothing waits to be written, takes both sockets
//     out of its epoll set, with the bytes it read and did not forward yet (the start of a
//     frame from either side). These, and the connection's state (State), go to the new
//     process over SCM_RIGHTS. The old process closes its descriptors only once the new one
//     has acknowledged the connection, which it does before it reads either socket: so a
//     connection is served by one process at any time, and when the new process dies before
//     acknowledging, the old one serves on.
//   - Adopt, in the new process, makes each received connection one of the proxy's own, on
//     an event loop (or the goroutine path), without the version gate or a node dial: the
//     node connection, with its authentication, keyspace and event registrations, is the
//     one the old process had.
//
// Connections on the goroutine path (TLS on either side, or the event loop off) cannot move
// (Go's TLS state cannot be handed over): they drain and close, as they do at a shutdown,
// and the drivers reconnect, to the new process.
//
// The package knows nothing of the proxy: it declares what it needs of it (Source, Conn,
// Sink, Parkable), and package sidecar, which imports it, provides that. The arrow points
// from the proxy to the handover, because the proxy is what the handover acts on, and the
// per-frame code must not reach a handover by an interface call.
package handover

import (
	"errors"
	"os"
	"time"
)

// ErrControlInUse is returned by ListenControl when a live process serves the control
// socket already: a second sidecar takes it over with --takeover.
var ErrControlInUse = errors.New("a live process serves this control socket")

// ErrHandoverUnsupported is returned by the handover's functions on systems other than
// Linux.
var ErrHandoverUnsupported = errors.New("sidecar: a handover needs Linux")

// Peer is a sidecar process on the other end of a handover.
type Peer struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
}

// Self is this process as a Peer: its pid, and when the process started.
func Self() Peer { return Peer{PID: os.Getpid(), StartedAt: processStart} }

var processStart = time.Now()

// ListenerFile is a listening socket handed to a successor: its name (such as "cql" or
// "admin") and a duplicate of its descriptor.
type ListenerFile struct {
	Name string
	File *os.File
}

// Framing modes of a moved connection: how its bytes are cut into frames.
const (
	FramingFrames   = "frames"   // v3 and v4, and v5 before its handshake's end: frames on the socket
	FramingSegments = "segments" // v5 after READY or AUTHENTICATE: segments both ways
)

// State is what a connection carries to the next process besides its two sockets.
// Fields are added, never changed, so that a newer process reads an older one's; a process
// refuses a framing mode or version it does not know.
type State struct {
	ID          uint64 `json:"id"`
	Version     byte   `json:"version"`                // protocol version
	Framing     string `json:"framing"`                // FramingFrames or FramingSegments
	SegmentsLZ4 bool   `json:"segments_lz4,omitempty"` // the segments have the lz4 form
	Compression string `json:"compression,omitempty"`  // "lz4" or "snappy", from STARTUP
	Ready       bool   `json:"ready"`                  // the handshake is done
	InSystem    bool   `json:"in_system,omitempty"`    // USE system
	User        string `json:"user,omitempty"`         // the SASL PLAIN username, for tracing
	// ClientPending and NodePending are the bytes read from each socket and not forwarded
	// yet: the start of a frame.
	ClientPending []byte `json:"client_pending,omitempty"`
	NodePending   []byte `json:"node_pending,omitempty"`
	// ShardAware says the connection came on the shard-aware port; Shard is its ScyllaDB
	// shard, from its node's SUPPORTED, nil when none is known. The node connection, and
	// so the shard, moves with it.
	ShardAware bool   `json:"shard_aware,omitempty"`
	Shard      *Shard `json:"shard,omitempty"`
}

// Shard is a connection's ScyllaDB shard, and the sharding that owns tokens.
type Shard struct {
	Shard     int  `json:"shard"`
	NrShards  int  `json:"nr_shards"`
	IgnoreMSB uint `json:"ignore_msb"`
}

// ackMsg answers a State: OK once the new process serves it, else why not (the old
// process then serves it on, and drains it).
type ackMsg struct {
	ID     uint64 `json:"id"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// doneMsg ends a handover with its counts, and the caller's final bytes.
type doneMsg struct {
	Moved  int    `json:"moved"`
	Closed int    `json:"closed"`
	Final  []byte `json:"final,omitempty"`
}

// Result counts the connections of a handover.
type Result struct {
	// Moved counts the connections the successor took over.
	Moved int
	// Closed counts the connections the old process closed instead: TLS ones, and those
	// not quiet within the drain timeout or refused by the successor (drained first).
	Closed int
	// Final is what the old process's caller sent once every connection had moved or
	// ended (Handoff's final): what it counted until the end. Adopt returns it.
	Final []byte
}
