package sidecar

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// A handover moves a running proxy's connections to a new process, between two frames, so
// that a driver sees nothing of an upgrade (control_linux.go has the exchange on the
// control socket, handover_linux.go the moves):
//
//   - Proxy.Handoff, in the old process, takes each plaintext connection on an event loop
//     to a quiet point: the loop stops reading its client, forwards what the node still
//     answers, and once no request is in flight and nothing waits to be written, takes
//     both sockets out of its epoll set, with the bytes it read and did not forward yet
//     (the start of a frame from either side). These, and the connection's state
//     (movedConn), go to the new process over SCM_RIGHTS. The old process closes its
//     descriptors only once the new one has acknowledged the connection, which it does
//     before it reads either socket: so a connection is served by one process at any time,
//     and when the new process dies before acknowledging, the old one serves on.
//   - Proxy.Adopt, in the new process, makes each received connection one of its own, on
//     an event loop (or the goroutine path), without the version gate or a node dial: the
//     node connection, with its authentication, keyspace and event registrations, is the
//     one the old process had.
//
// Connections on the goroutine path (TLS on either side, or the event loop off) cannot move
// (Go's TLS state cannot be handed over): they drain and close, as they do at a shutdown,
// and the drivers reconnect, to the new process.
//
// A connection's place in the handover does not touch its state machine (shutdown.go):
// while it moves it is open, paused on its loop; once acknowledged it goes straight to
// closed in the old process, with the cause errMoved.

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

// errMoved is the cause of the end of a connection that moved to another process.
var errMoved = errors.New("moved to the successor process")

// Framing modes of a moved connection: how its bytes are cut into frames.
const (
	framingFrames   = "frames"   // v3 and v4, and v5 before its handshake's end: frames on the socket
	framingSegments = "segments" // v5 after READY or AUTHENTICATE: segments both ways (segments.go)
)

// movedConn is what a connection carries to the next process besides its two sockets.
// Fields are added, never changed, so that a newer process reads an older one's; a process
// refuses a framing mode or version it does not know.
type movedConn struct {
	ID          uint64 `json:"id"`
	Version     byte   `json:"version"`                // protocol version
	Framing     string `json:"framing"`                // framingFrames or framingSegments
	SegmentsLZ4 bool   `json:"segments_lz4,omitempty"` // the segments have the lz4 form
	Compression string `json:"compression,omitempty"`  // "lz4" or "snappy", from STARTUP
	Ready       bool   `json:"ready"`                  // the handshake is done (limits.go)
	InSystem    bool   `json:"in_system,omitempty"`    // USE system (statement.go)
	User        string `json:"user,omitempty"`         // the SASL PLAIN username, for tracing
	// ClientPending and NodePending are the bytes read from each socket and not forwarded
	// yet: the start of a frame.
	ClientPending []byte `json:"client_pending,omitempty"`
	NodePending   []byte `json:"node_pending,omitempty"`
}

// ackMsg answers a movedConn: OK once the new process serves it, else why not (the old
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

// HandoffResult counts the connections of a handover.
type HandoffResult struct {
	// Moved counts the connections the successor took over.
	Moved int
	// Closed counts the connections the old process closed instead: TLS ones, and those
	// not quiet within DrainTimeout or refused by the successor (drained first).
	Closed int
	// Final is what the old process's caller sent once every connection had moved or
	// ended (Handoff's final): what it counted until the end. Adopt returns it.
	Final []byte
}

// connHandover is what a connection adopted from another process holds until its
// transport takes it.
type connHandover struct {
	nodePend []byte // bytes read from the node by the old process and not forwarded yet
}

// takeNodePend returns, for either transport, the bytes an old process read from the node
// and did not forward.
func (c *conn) takeNodePend() []byte {
	b := c.handover.nodePend
	c.handover.nodePend = nil
	return b
}

// compressionNames are the names of compressors, by conn.comp.
var compressionNames = [...]string{"", "lz4", "snappy"}

func compressionIndex(name string) (int32, bool) {
	for i, n := range compressionNames {
		if n == name {
			return int32(i), true
		}
	}
	return 0, false
}

// movedState returns the state of c to hand over, with the pending bytes.
func (c *conn) movedState(id uint64, clientPend, nodePend []byte) movedConn {
	m := movedConn{
		ID:            id,
		Version:       c.version,
		Framing:       framingFrames,
		Compression:   compressionNames[c.comp.Load()],
		Ready:         c.ready.Load(),
		InSystem:      c.inSystem.Load(),
		ClientPending: clientPend,
		NodePending:   nodePend,
	}
	if c.segmentsFromNode() {
		m.Framing, m.SegmentsLZ4 = framingSegments, c.v5.lz4.Load()
	}
	if t := c.tr.Load(); t != nil {
		m.User = t.User()
	}
	return m
}

// adoptConn makes a connection of p from the sockets and the state an old process handed
// over, in group g: set up as open would leave it, without reading either socket. The
// descriptors are p's from here on, also on error.
func (p *Proxy) adoptConn(m movedConn, clientFD, nodeFD int, g *group) (*conn, error) {
	cf, nf := os.NewFile(uintptr(clientFD), "client"), os.NewFile(uintptr(nodeFD), "node")
	defer cf.Close()
	defer nf.Close()
	comp, ok := compressionIndex(m.Compression)
	switch {
	case m.Framing != framingFrames && m.Framing != framingSegments:
		return nil, fmt.Errorf("framing %q is not known here", m.Framing)
	case !p.speaks(m.Version):
		return nil, fmt.Errorf("protocol version %d is not served here (--max-protocol-version %d)", m.Version, p.maxVersion())
	case m.Framing == framingSegments && m.Version < cql.V5:
		return nil, fmt.Errorf("segments at protocol version %d", m.Version)
	case !ok:
		return nil, fmt.Errorf("compression %q is not known here", m.Compression)
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
	c := p.newConn(client, g)
	c.setVersion(m.Version)
	c.comp.Store(comp)
	c.ready.Store(m.Ready)
	c.inSystem.Store(m.InSystem)
	if m.Framing == framingSegments {
		// The handshake ended in the old process: segments both ways, as segmentsAfter
		// leaves a connection.
		c.beginV5(m.SegmentsLZ4)
		c.v5.node = true
		c.v5.client.Store(true)
	}
	c.node = node
	c.nodeAddr = addrPort(node.RemoteAddr())
	if p.tr != nil && m.User != "" {
		c.traceConn().SetUser(m.User)
	}
	if n := len(m.ClientPending); n > 0 {
		// The bytes the old process read go first, into the client reader, where both
		// transports take what a connection's gate read (toLoop, startGoroutinePath).
		c.cr.preload(m.ClientPending)
	}
	c.handover.nodePend = m.NodePending
	c.debug().Str("node", c.nodeAddr.String()).Uint8("version", c.version).Msg("connection adopted from the predecessor process")
	return c, nil
}

// serveAdopted runs an adopted connection that stays off the loops on the goroutine path,
// as serve runs an accepted one once open.
func (c *conn) serveAdopted() {
	c.runGoroutines()
}

// finishMoved ends a connection that moved to another process, in this one: its sockets
// are the other process's, and this one's descriptors are closed already.
func (c *conn) finishMoved() {
	c.mu.Lock()
	if c.getState() < stateEnding {
		c.cause = errMoved
	}
	c.mu.Unlock()
	if c.advance(stateClosed) {
		c.closedOnLoop()
	}
}

// Accepted returns the number of client connections accepted since New; connections
// adopted from an old process are not among them (Adopted). It is safe for concurrent use.
func (p *Proxy) Accepted() uint64 { return p.accepted.Load() }

// Adopted returns the number of client connections adopted from old processes. It is safe
// for concurrent use.
func (p *Proxy) Adopted() uint64 { return p.adopted.Load() }
