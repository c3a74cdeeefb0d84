package handover

import (
	"time"

	"github.com/rs/zerolog"
)

// What the handover needs of the proxy, declared here and provided by package sidecar,
// which imports this one.

// Source is the proxy whose connections a handoff moves. Package sidecar provides it.
type Source interface {
	// Conns returns the proxy's connections.
	Conns() []Conn
	// Immovable says why a connection that is not on an event loop cannot move.
	Immovable() string
	// DrainTimeout is how long the handoff waits for the connections to be quiet.
	DrainTimeout() time.Duration
	// Connections counts the proxy's connections, for the log.
	Connections() int
	// Log is the proxy's logger.
	Log() *zerolog.Logger
}

// Where is where a connection is, as a handoff sees it.
type Where uint8

// The places of a connection.
const (
	Elsewhere Where = iota // not open, or open on the goroutine path: it cannot move
	OnLoop                 // open on an event loop: it can move
	InGate                 // open, in the version gate or dialling the node: on a loop soon
)

// Conn is one connection of the proxy, as a handoff moves it. Its methods are safe for
// concurrent use. A Conn is compared with ==: each connection is one value.
type Conn interface {
	// Where says where the connection is.
	Where() Where
	// Move asks the connection's event loop to take it to a quiet point and detach it; the
	// loop puts the outcome in q.
	Move(q *Replies)
	// Cancel asks its event loop to stop a move not yet detached (nothing when it is not on
	// a loop, or not moving).
	Cancel()
	// Attach asks its event loop to serve a detached connection again.
	Attach(d Detached)
	// Open reports whether the connection is open (not draining, ending or closed);
	// Closed whether its state machine is closed; Released whether its transport closed
	// it for good.
	Open() bool
	Closed() bool
	Released() bool
	// Drain drains the connection; CloseAll closes it.
	Drain()
	CloseAll()
	// Client is the client's address, for the log.
	Client() string
	// Export returns the state of the connection to hand over, with the pending bytes.
	Export(id uint64, d Detached) State
	// Moved ends the connection here: it moved, its descriptors are closed already.
	Moved()
}

// Sink is the proxy that adopts the connections of a handover. Package sidecar provides
// it.
type Sink interface {
	// Serving reports whether the proxy serves (its Serve call has begun).
	Serving() bool
	// StartLoops starts the proxy's event loops, when it has them.
	StartLoops()
	// Import makes a connection of the proxy from the sockets and the state an old
	// process handed over, without reading either socket; the descriptors are the proxy's
	// from the call on, which closes them when it fails. Once the connection is
	// acknowledged, serve starts its transport.
	Import(s State, clientFD, nodeFD int) (serve func(), err error)
	// Log is the proxy's logger.
	Log() *zerolog.Logger
}
