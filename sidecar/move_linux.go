//go:build linux

package sidecar

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/tracecar/tracecar/sidecar/handover"
)

// The event loop's part in a handover (see handover.go and package handover): the loop
// commands that take a connection to a quiet point and detach it, or serve it again; and
// what package handover needs of the proxy and of its connections (handover.Source,
// handover.Sink, handover.Conn), on types of their own.

// Loop commands of a handover, beside those of loop.go.
const (
	cmdMove       loopCmdKind = iota + 16 // take the connection to a quiet point and detach it
	cmdMoveCancel                         // stop a move not yet detached; the client is read again
	cmdAttach                             // serve a detached connection again (the successor failed)
)

// handoverCmd is the argument of a handover's loop command.
type handoverCmd struct {
	replies *handover.Replies // cmdMove: where the outcome goes
	d       handover.Detached // cmdAttach: the sockets and bytes to serve again
}

// loopMove is a connection's part in a move, on its loop; loop goroutine only.
type loopMove struct {
	moving  bool
	replies *handover.Replies
}

// handover runs a handover's loop command.
func (l *loop) handover(cmd loopCmd) {
	c := cmd.c
	switch cmd.kind {
	case cmdMove:
		if c.getState() != stateOpen || c.move.moving || c.sides[0].fd < 0 {
			cmd.h.replies.Put(handover.Reply{Conn: (*movingConn)(c), Outcome: handover.Refused})
			return
		}
		c.move = loopMove{moving: true, replies: cmd.h.replies}
		cs := &c.sides[0]
		cs.paused = true
		l.setEvents(cs)
		l.tryMove(c)
	case cmdMoveCancel:
		if !c.move.moving {
			return // its outcome is on its way already
		}
		q := c.move.replies
		c.move = loopMove{}
		cs, ns := &c.sides[0], &c.sides[1]
		if c.getState() == stateOpen && !cs.budgetWait && len(ns.out) == 0 {
			cs.paused = false
			l.setEvents(cs)
		}
		q.Put(handover.Reply{Conn: (*movingConn)(c), Outcome: handover.Canceled})
	case cmdAttach:
		d := cmd.h.d
		if c.getState() == stateClosed {
			unix.Close(d.FDs[0])
			unix.Close(d.FDs[1])
			return
		}
		cs, ns := &c.sides[0], &c.sides[1]
		cs.fd, ns.fd = d.FDs[0], d.FDs[1]
		cs.pend, ns.pend = d.ClientPend, d.NodePend
		l.add(c)
	}
}

// tryMove detaches a moving connection once it is quiet: no request in flight, and nothing
// waiting to be written either way. The loop calls it after each event of the connection.
func (l *loop) tryMove(c *conn) {
	if !c.move.moving {
		return
	}
	if c.getState() != stateOpen {
		// Drained or ending meanwhile: that wins, and the connection ends here.
		l.moveOver(c, handover.Refused)
		return
	}
	cs, ns := &c.sides[0], &c.sides[1]
	if c.Streams.Len() != 0 || len(cs.out) != 0 || len(ns.out) != 0 {
		return
	}
	if c.v5 != nil && (c.v5.fromClient.Gathering() || c.v5.fromNode.Gathering()) {
		// v5: a frame larger than a segment, half gathered from its segments (a STARTUP
		// not answered yet, after which the segments start, is a request in flight).
		return
	}
	var d handover.Detached
	c.Streams.SetSpares(nil) // its table is empty (and holds no slots), and leaves this loop
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
	q.Put(handover.Reply{Conn: (*movingConn)(c), Outcome: handover.Detach, Detached: d})
}

// moveOver ends a move that will not detach.
func (l *loop) moveOver(c *conn, o handover.Outcome) {
	q := c.move.replies
	c.move = loopMove{}
	q.Put(handover.Reply{Conn: (*movingConn)(c), Outcome: o})
}

func (p *Proxy) servingGroup() *group {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serving
}

// allConns returns the proxy's connections.
func (p *Proxy) allConns() []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	return cs
}

// handoverProxy is the proxy as package handover sees it: handover.Source in the old
// process, handover.Sink in the new one.
type handoverProxy Proxy

func (hp *handoverProxy) p() *Proxy { return (*Proxy)(hp) }

// Handoff moves the proxy's connections to the successor s, which already serves the
// listeners (Successor.Offer): each plaintext connection on an event loop moves at a quiet
// point, waiting at most DrainTimeout for it; the others (TLS, the goroutine path, and
// those not quiet in time) drain and close here, and are counted and logged. It returns
// once every connection has moved or ended, and the successor has acknowledged the end of
// the handover.
//
// When every connection has moved or ended, final (when not nil) gives the bytes that go
// to the successor with the end, which Adopt returns there: what this process counted
// until then.
//
// When the successor goes away before that (or ctx is done), every connection it has not
// acknowledged is served here again, and Handoff returns the error: the caller serves on,
// with its listeners.
func (p *Proxy) Handoff(ctx context.Context, s *Successor, final func() []byte) (HandoffResult, error) {
	return handover.Handoff(ctx, (*handoverProxy)(p), s, final)
}

// Adopt takes over the connections that the predecessor hands over (Proxy.Handoff there),
// each served here from the moment it is acknowledged, as one of the connections of the
// Serve call running (which must be), and ending with it. It returns once the predecessor
// says the handover is done, or goes away (the connections adopted until then are served
// on; the others are the predecessor's, which kept them or died with them), or ctx is
// done.
func (p *Proxy) Adopt(ctx context.Context, pred *Predecessor) (HandoffResult, error) {
	return handover.Adopt(ctx, (*handoverProxy)(p), pred)
}

func (hp *handoverProxy) Conns() []handover.Conn {
	cs := hp.p().allConns()
	hs := make([]handover.Conn, len(cs))
	for i, c := range cs {
		hs[i] = (*movingConn)(c)
	}
	return hs
}

// Immovable says why a connection on the goroutine path cannot move.
func (hp *handoverProxy) Immovable() string {
	switch {
	case hp.cfg.TLS != nil:
		return "a TLS connection cannot move (Go's TLS state stays in its process)"
	case hp.nodeTLS != nil:
		return "a connection with TLS to the node cannot move (Go's TLS state stays in its process)"
	}
	return "a connection on the goroutine path (the event loop is off) cannot move"
}

func (hp *handoverProxy) DrainTimeout() time.Duration { return hp.cfg.DrainTimeout }
func (hp *handoverProxy) Connections() int            { return hp.p().Stats().Connections }
func (hp *handoverProxy) Log() *zerolog.Logger        { return hp.sh.Log }
func (hp *handoverProxy) Serving() bool               { return hp.p().servingGroup() != nil }

func (hp *handoverProxy) StartLoops() {
	if !hp.noLoop {
		hp.loops.pick()
	}
}

// Import adopts one connection in the group of the Serve call running; serve, once it is
// acknowledged, moves it to a loop (or starts its goroutines).
func (hp *handoverProxy) Import(m handover.State, clientFD, nodeFD int) (func(), error) {
	p := hp.p()
	p.mu.Lock()
	g := p.serving
	if g != nil {
		g.wg.Add(1)
	}
	p.mu.Unlock()
	if g == nil {
		return nil, errors.New("the proxy is not serving")
	}
	c, err := p.adoptConn(m, clientFD, nodeFD, g)
	if err != nil {
		g.wg.Done()
		return nil, err
	}
	return func() {
		if p.noLoop || !c.toLoop() {
			go c.serveAdopted() // else the loop retires it (closedOnLoop)
		}
	}, nil
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

func (m *movingConn) Move(q *handover.Replies) {
	m.lp.post(loopCmd{kind: cmdMove, c: m.c(), h: &handoverCmd{replies: q}})
}

func (m *movingConn) Cancel() {
	m.mu.Lock()
	lp := m.lp
	m.mu.Unlock()
	if lp != nil {
		lp.post(loopCmd{kind: cmdMoveCancel, c: m.c()}) // ignored unless it is moving
	}
}

func (m *movingConn) Attach(d handover.Detached) {
	m.lp.post(loopCmd{kind: cmdAttach, c: m.c(), h: &handoverCmd{d: d}})
}

func (m *movingConn) Open() bool     { return m.c().getState() == stateOpen }
func (m *movingConn) Closed() bool   { return m.c().getState() == stateClosed }
func (m *movingConn) Released() bool { return m.closed.Load() }
func (m *movingConn) Drain()         { m.c().drain() }
func (m *movingConn) CloseAll()      { m.c().closeAll() }
func (m *movingConn) Client() string { return m.ClientAddr.String() }
func (m *movingConn) Moved()         { m.c().finishMoved() }

func (m *movingConn) Export(id uint64, d handover.Detached) handover.State {
	return m.c().movedState(id, d.ClientPend, d.NodePend)
}
