//go:build linux

package sidecar

import (
	"bytes"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/tracecar/tracecar/sidecar/handover"
)

// The event loop's part in a handover (see handover.go and package handover): the loop
// commands that take a connection to a quiet point and detach it, or serve it again; and
// what package handover needs of a connection (handover.Conn), on a type of its own. The
// proxy's part is in handover_linux.go.

// Loop commands of a handover, beside those of loopconn.go.
const (
	cmdMove       loopCmdKind = iota + 16 // take the connection to a quiet point and detach it
	cmdMoveCancel                         // stop a move not yet detached; the client is read again
	cmdAttach                             // serve a detached connection again (the successor failed)
)

// tryMove detaches a moving connection once it is quiet: no request in flight, and nothing
// waiting to be written either way. The loop calls it after each event of the connection.
func (l *loop) tryMove(c *loopConn) {
	if !c.move.moving {
		return
	}
	if c.getState() != stateOpen {
		// Drained or ending meanwhile: that wins, and the connection ends here.
		l.moveOver(c, handover.Refused)
		return
	}
	cs, ns := &c.sides[0], &c.sides[1]
	if c.pipe.Streams.Len() != 0 || len(cs.out) != 0 || len(ns.out) != 0 {
		return
	}
	if c.v5 != nil && (c.v5.fromClient.Gathering() || c.v5.fromNode.Gathering()) {
		// v5: a frame larger than a segment, half gathered from its segments (a STARTUP
		// not answered yet, after which the segments start, is a request in flight).
		return
	}
	var d handover.Detached
	c.pipe.Streams.SetSpares(nil) // its table is empty (and holds no slots), and leaves this loop
	for i := range c.sides {
		s := &c.sides[i]
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
		l.setSide(s.fd, nil)
		d.FDs[i] = s.fd
		if s.held > 0 {
			c.p.held.release(s.held)
		}
	}
	if cs.budgetWait {
		for i, w := range l.waiting {
			if w == cs {
				l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
				break
			}
		}
	}
	d.ClientPend, d.NodePend = bytes.Clone(cs.pend), bytes.Clone(ns.pend)
	*cs = side{c: c, fd: -1, client: true, peer: ns}
	*ns = side{c: c, fd: -1, peer: cs}
	q := c.move.replies
	c.move = loopMove{}
	q.Put(handover.Reply{Conn: (*movingConn)(c.conn), Outcome: handover.Detach, Detached: d})
}

// moveOver ends a move that will not detach.
func (l *loop) moveOver(c *loopConn, o handover.Outcome) {
	q := c.move.replies
	c.move = loopMove{}
	q.Put(handover.Reply{Conn: (*movingConn)(c.conn), Outcome: o})
}

// movingConn is a connection as package handover sees it (handover.Conn).
type movingConn conn

func (m *movingConn) c() *conn { return (*conn)(m) }

func (m *movingConn) Where() handover.Where {
	c := m.c()
	c.mu.Lock()
	st, inLoop := c.getState(), c.inLoop()
	bound := !inLoop && c.p.loopBound(c.client) // toLoop drops c.client, under mu
	c.mu.Unlock()
	switch {
	case st == stateOpen && inLoop:
		return handover.OnLoop
	case st == stateOpen && bound:
		return handover.InGate
	}
	return handover.Elsewhere
}

// lc returns the connection as its loop carries it, or nil.
func (m *movingConn) lc() *loopConn {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c().onLoop()
}

func (m *movingConn) Move(q *handover.Replies) {
	lc := m.lc()
	lc.lp.post(loopCmd{kind: cmdMove, c: lc, h: &handoverCmd{replies: q}})
}

func (m *movingConn) Cancel() {
	if lc := m.lc(); lc != nil {
		lc.lp.post(loopCmd{kind: cmdMoveCancel, c: lc}) // ignored unless it is moving
	}
}

func (m *movingConn) Attach(d handover.Detached) {
	lc := m.lc()
	lc.lp.post(loopCmd{kind: cmdAttach, c: lc, h: &handoverCmd{d: d}})
}

func (m *movingConn) Open() bool     { return m.c().getState() == stateOpen }
func (m *movingConn) Closed() bool   { return m.c().getState() == stateClosed }
func (m *movingConn) Released() bool { return m.closed.Load() }
func (m *movingConn) Drain()         { m.c().drain() }
func (m *movingConn) CloseAll()      { m.c().closeAll() }
func (m *movingConn) Client() string { return m.pipe.ClientAddr.String() }
func (m *movingConn) Moved()         { m.c().finishMoved() }

func (m *movingConn) Export(id uint64, d handover.Detached) handover.State {
	return m.c().movedState(id, d.ClientPend, d.NodePend)
}

// errMoved is the cause of the end of a connection that moved to another process.
var errMoved = errors.New("moved to the successor process")

// movedState returns the state of c to hand over, with the pending bytes.
func (c *conn) movedState(id uint64, clientPend, nodePend []byte) handover.State {
	s := c.pipe.State()
	m := handover.State{
		ID:            id,
		Version:       s.Version,
		Framing:       handover.FramingFrames,
		Compression:   s.Compression,
		Ready:         s.Ready,
		InSystem:      s.InSystem,
		User:          s.User,
		ClientPending: clientPend,
		NodePending:   nodePend,
	}
	if c.segmentsFromNode() {
		m.Framing, m.SegmentsLZ4 = handover.FramingSegments, c.v5.lz4.Load()
	}
	m.ShardAware = c.group != nil && c.group.aware
	if in, ok := c.pipe.Shard().Info(); ok {
		m.Shard = &handover.Shard{Shard: in.Shard, NrShards: in.NrShards, IgnoreMSB: in.IgnoreMSB}
	}
	return m
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
