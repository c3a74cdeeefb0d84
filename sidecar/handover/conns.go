package handover

import (
	"sync"
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

// A connection's move on its event loop, as the loop replies to the handoff: how it ended
// (Outcome), and, when it left the loop, what it holds (Detached).

// Detached is a connection taken out of its event loop at a quiet point: its two
// descriptors (client, node) and the bytes read from each and not forwarded.
type Detached struct {
	FDs                  [2]int
	ClientPend, NodePend []byte
}

// Outcome is how a connection's move on its event loop ended.
type Outcome uint8

// The outcomes of a move.
const (
	Detach   Outcome = iota // quiet, out of the loop: the Reply's Detached holds it
	Ended                   // it closed meanwhile (the client left, the node failed)
	Refused                 // not open (draining, ending): it ends here
	Canceled                // Conn.Cancel: it is served here again
)

// Reply is the outcome of one connection's move, from its event loop.
type Reply struct {
	Conn     Conn
	Outcome  Outcome
	Detached Detached
}

// Replies carries the event loops' replies to a handoff without ever blocking a loop. It
// is safe for concurrent use.
type Replies struct {
	mu    sync.Mutex
	items []Reply
	wake  chan struct{}
}

func newReplies() *Replies { return &Replies{wake: make(chan struct{}, 1)} }

// Put queues r for the handoff; it never blocks.
func (q *Replies) Put(r Reply) {
	q.mu.Lock()
	q.items = append(q.items, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Replies) take() []Reply {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.items
	q.items = nil
	return r
}
