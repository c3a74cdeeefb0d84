package sidecar

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/sidecar/handover"
)

// A handover moves a running proxy's connections to a new process, between two frames
// (package handover has the exchange on the control socket, the old process's run and the
// new one's). This file is the proxy's side of it: the names of package handover that
// cmd/tracecar uses, the state a connection exports and imports, and what package handover
// needs of the proxy (handover.Source, handover.Conn, handover.Sink), which the proxy
// provides through types of its own (handoverProxy, movingConn), so that none of it is
// among conn's methods. The event loop's part of a move is in move_linux.go.
//
// A connection's place in the handover does not touch its state machine (shutdown.go):
// while it moves it is open, paused on its loop; once acknowledged it goes straight to
// closed in the old process, with the cause errMoved.

// ErrControlInUse is returned by ListenControl when a live process serves the control
// socket already: a second sidecar takes it over with --takeover.
var ErrControlInUse = handover.ErrControlInUse

// ErrHandoverUnsupported is returned by the handover's functions on systems other than
// Linux.
var ErrHandoverUnsupported = handover.ErrHandoverUnsupported

// Peer is a sidecar process on the other end of a handover.
type Peer = handover.Peer

// Self is this process as a Peer: its pid, and when the process started.
func Self() Peer { return handover.Self() }

// ListenerFile is a listening socket handed to a successor: its name (such as "cql" or
// "admin") and a duplicate of its descriptor.
type ListenerFile = handover.ListenerFile

// HandoffResult counts the connections of a handover.
type HandoffResult = handover.Result

// Successor is the new process on the other end of the control socket, as the old process
// sees it (handover.Successor).
type Successor = handover.Successor

// Predecessor is the old process on the other end of the control socket, as the new
// process sees it (handover.Predecessor).
type Predecessor = handover.Predecessor

// ListenControl listens on the control socket at path, with mode 0600 (see
// handover.ListenControl).
func ListenControl(path string) (*net.UnixListener, error) { return handover.ListenControl(path) }

// AcceptSuccessor waits on ln for a new process that takes this one over (see
// handover.AcceptSuccessor).
func AcceptSuccessor(ln *net.UnixListener) (*Successor, error) {
	return handover.AcceptSuccessor(ln)
}

// DialPredecessor connects to the old process's control socket at path and says hello
// (see handover.DialPredecessor).
func DialPredecessor(ctx context.Context, path string) (*Predecessor, error) {
	return handover.DialPredecessor(ctx, path)
}

// adoptConn makes a connection of p from the sockets and the state an old process handed
// over, in group g: set up as open would leave it, without reading either socket. The
// descriptors are p's from here on, also on error.
func (p *Proxy) adoptConn(m handover.State, clientFD, nodeFD int, g *group) (*conn, error) {
	cf, nf := os.NewFile(uintptr(clientFD), "client"), os.NewFile(uintptr(nodeFD), "node")
	defer cf.Close()
	defer nf.Close()
	s := pipeline.State{Version: m.Version, Compression: m.Compression, Ready: m.Ready, InSystem: m.InSystem, User: m.User}
	stateErr := pipeline.CheckState(s)
	switch {
	case m.Framing != handover.FramingFrames && m.Framing != handover.FramingSegments:
		return nil, fmt.Errorf("framing %q is not known here", m.Framing)
	case !p.env.speaks(m.Version):
		return nil, fmt.Errorf("protocol version %d is not served here (--max-protocol-version %d)", m.Version, p.env.maxVersion())
	case m.Framing == handover.FramingSegments && m.Version < cql.V5:
		return nil, fmt.Errorf("segments at protocol version %d", m.Version)
	case stateErr != nil:
		return nil, stateErr
	}
	client, err := net.FileConn(cf)
	if err != nil {
		return nil, fmt.Errorf("client socket: %w", err)
	}
	node, err := net.FileConn(nf)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("node socket: %w", err)
	}
	p.adopted.Add(1)
	c := p.newConn(client, g, m.ShardAware)
	c.setVersion(m.Version)
	if m.Framing == handover.FramingSegments {
		// The handshake ended in the old process: segments both ways, as segmentsAfter
		// leaves a connection.
		segments{c}.beginV5(m.SegmentsLZ4)
		c.v5.node = true
		c.v5.client.Store(true)
	}
	c.node = node
	c.pipe.NodeAddr = addrPort(node.RemoteAddr())
	c.pipe.Restore(s) // after the node address, which the tracing state names
	c.adoptShard(m)
	if n := len(m.ClientPending); n > 0 {
		// The bytes the old process read go first, into the client reader, where both
		// transports take what a connection's gate read (toLoop, startGoroutinePath).
		c.cr.preload(m.ClientPending)
	}
	c.handover.nodePend = m.NodePending
	c.pipe.Debug().Str("node", c.pipe.NodeAddr.String()).Uint8("version", c.pipe.Version).Msg("connection adopted from the predecessor process")
	return c, nil
}

// serveAdopted runs an adopted connection that stays off the loops on the goroutine path,
// as serve runs an accepted one once open.
func (c *conn) serveAdopted() {
	runGoroutines(c)
}

// Accepted returns the number of client connections accepted since New; connections
// adopted from an old process are not among them (Adopted). It is safe for concurrent use.
func (p *Proxy) Accepted() uint64 { return p.accepted.Load() }

// Adopted returns the number of client connections adopted from old processes. It is safe
// for concurrent use.
func (p *Proxy) Adopted() uint64 { return p.adopted.Load() }
