//go:build linux

package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The moves of a handover (see handover.go): Proxy.Handoff in the old process, its part
// on the event loops (the loop commands below), and Proxy.Adopt in the new process.

// Loop commands of a handover, beside those of loop.go.
const (
	cmdMove       loopCmdKind = iota + 16 // take the connection to a quiet point and detach it
	cmdMoveCancel                         // stop a move not yet detached; the client is read again
	cmdAttach                             // serve a detached connection again (the successor failed)
)

// handoverCmd is the argument of a handover's loop command.
type handoverCmd struct {
	replies *moveQueue // cmdMove: where the outcome goes
	d       detached   // cmdAttach: the sockets and bytes to serve again
}

// loopMove is a connection's part in a move, on its loop; loop goroutine only.
type loopMove struct {
	moving  bool
	replies *moveQueue
}

// detached is a connection taken out of its loop at a quiet point: its two descriptors
// (client, node) and the bytes read from each and not forwarded.
type detached struct {
	fds                  [2]int
	clientPend, nodePend []byte
}

type moveOutcome uint8

const (
	moveDetached moveOutcome = iota // quiet, out of the loop: d holds it
	moveEnded                       // it closed meanwhile (the client left, the node failed)
	moveRefused                     // not open (draining, ending): it ends here
	moveCanceled                    // cmdMoveCancel: it is served here again
)

type moveReply struct {
	c       *conn
	outcome moveOutcome
	d       detached
}

// moveQueue carries the loops' replies to the handoff without ever blocking a loop.
type moveQueue struct {
	mu    sync.Mutex
	items []moveReply
	wake  chan struct{}
}

func newMoveQueue() *moveQueue { return &moveQueue{wake: make(chan struct{}, 1)} }

func (q *moveQueue) put(r moveReply) {
	q.mu.Lock()
	q.items = append(q.items, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *moveQueue) take() []moveReply {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.items
	q.items = nil
	return r
}

// handover runs a handover's loop command.
func (l *loop) handover(cmd loopCmd) {
	c := cmd.c
	switch cmd.kind {
	case cmdMove:
		if c.getState() != stateOpen || c.move.moving || c.sides[0].fd < 0 {
			cmd.h.replies.put(moveReply{c: c, outcome: moveRefused})
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
		q.put(moveReply{c: c, outcome: moveCanceled})
	case cmdAttach:
		d := cmd.h.d
		if c.getState() == stateClosed {
			unix.Close(d.fds[0])
			unix.Close(d.fds[1])
			return
		}
		cs, ns := &c.sides[0], &c.sides[1]
		cs.fd, ns.fd = d.fds[0], d.fds[1]
		cs.pend, ns.pend = d.clientPend, d.nodePend
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
		l.moveOver(c, moveRefused)
		return
	}
	cs, ns := &c.sides[0], &c.sides[1]
	if c.streams.len() != 0 || len(cs.out) != 0 || len(ns.out) != 0 {
		return
	}
	if c.v5 != nil && (c.v5.fromClient.Gathering() || c.v5.fromNode.Gathering()) {
		// v5: a frame larger than a segment, half gathered from its segments (a STARTUP
		// not answered yet, after which the segments start, is a request in flight).
		return
	}
	var d detached
	c.streams.spare = nil // its table is empty (and holds no slots), and leaves this loop
	for i := range c.sides {
		s := &c.sides[i]
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
		l.setSide(s.fd, nil)
		d.fds[i] = s.fd
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
	d.clientPend, d.nodePend = bytes.Clone(cs.pend), bytes.Clone(ns.pend)
	*cs = side{c: c, fd: -1, client: true, peer: ns}
	*ns = side{c: c, fd: -1, peer: cs}
	q := c.move.replies
	c.move = loopMove{}
	q.put(moveReply{c: c, outcome: moveDetached, d: d})
}

// moveOver ends a move that will not detach.
func (l *loop) moveOver(c *conn, o moveOutcome) {
	q := c.move.replies
	c.move = loopMove{}
	q.put(moveReply{c: c, outcome: o})
}

// transit is a connection sent to the successor and not acknowledged yet.
type transit struct {
	c *conn
	d detached
}

// peerEvent is what the successor said, in order: an ack, the end, or its going away.
type peerEvent struct {
	ack ackMsg
	end bool
	err error
}

// handoff is one run of Proxy.Handoff.
type handoff struct {
	p       *Proxy
	s       *Successor
	replies *moveQueue
	events  chan peerEvent

	seen     map[*conn]bool
	moving   int                 // moves posted, outcome not in yet
	sent     map[uint64]*transit // sent, not acknowledged
	nextID   uint64
	draining []*conn // ending here: TLS, refused, not quiet in time
	expired  bool
	res      HandoffResult
	final    func() []byte
}

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
	h := &handoff{p: p, s: s, replies: newMoveQueue(), events: make(chan peerEvent, 64),
		seen: make(map[*conn]bool), sent: make(map[uint64]*transit), final: final}
	go h.readPeer()
	p.log.Info().Int("successor_pid", s.peer.PID).Int("connections", p.Stats().Connections).
		Dur("timeout", p.cfg.DrainTimeout).Msg("handover: moving the connections to the successor")
	res, err := h.run(ctx)
	if err != nil {
		p.log.Warn().Err(err).Int("moved", res.Moved).Msg("handover failed: serving on with what was not moved")
		return res, err
	}
	p.log.Info().Int("moved", res.Moved).Int("closed", res.Closed).Msg("handover done")
	return res, nil
}

// readPeer turns the successor's messages into events, in order, until it goes away.
func (h *handoff) readPeer() {
	for {
		kind, body, fds, err := h.s.ctl.recv()
		closeFDs(fds)
		switch {
		case err != nil:
			h.events <- peerEvent{err: err}
			return
		case kind == msgAck:
			var a ackMsg
			if err := json.Unmarshal(body, &a); err != nil {
				h.events <- peerEvent{err: fmt.Errorf("control socket: ack: %w", err)}
				return
			}
			h.events <- peerEvent{ack: a}
		case kind == msgEnd:
			h.events <- peerEvent{end: true}
			return
		default:
			h.events <- peerEvent{err: fmt.Errorf("control socket: unexpected message %q", kind)}
			return
		}
	}
}

// handoffPoll is how often a handoff looks for connections it has not seen (one that was
// still being opened) and for the end of those that drain.
const handoffPoll = 5 * time.Millisecond

func (h *handoff) run(ctx context.Context) (HandoffResult, error) {
	deadline := time.NewTimer(h.p.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(handoffPoll)
	defer tick.Stop()
	h.scan()
	for !h.finished() {
		select {
		case <-h.replies.wake:
			if err := h.onReplies(); err != nil {
				return h.abort(err)
			}
		case ev := <-h.events:
			switch {
			case ev.err != nil:
				return h.abort(fmt.Errorf("successor gone: %w", ev.err))
			case ev.end:
				return h.abort(errors.New("successor ended the handover early"))
			}
			h.onAck(ev.ack)
		case <-tick.C:
			h.scan()
		case <-deadline.C:
			h.expire()
		case <-ctx.Done():
			return h.abort(ctx.Err())
		}
	}
	h.res.Closed = len(h.draining)
	done := doneMsg{Moved: h.res.Moved, Closed: h.res.Closed}
	if h.final != nil {
		done.Final = h.final()
	}
	if err := h.s.ctl.sendJSON(msgDone, done); err != nil {
		return h.res, err
	}
	ev := <-h.events
	switch {
	case ev.err != nil:
		return h.res, fmt.Errorf("successor gone at the end of the handover: %w", ev.err)
	case !ev.end:
		return h.res, errors.New("control socket: ack after done")
	}
	return h.res, nil
}

// scan starts the moves of the connections not seen yet.
func (h *handoff) scan() {
	for _, c := range h.p.allConns() {
		if h.seen[c] {
			continue
		}
		c.mu.Lock()
		st, inLoop := c.getState(), c.inLoop()
		bound := !inLoop && h.p.loopBound(c.client) // toLoop drops c.client, under mu
		c.mu.Unlock()
		switch {
		case st == stateOpen && inLoop:
			h.seen[c] = true
			h.moving++
			c.lp.post(loopCmd{kind: cmdMove, c: c, h: &handoverCmd{replies: h.replies}})
		case st == stateOpen && bound && !h.expired:
			// Still in the version gate, or dialling the node: it reaches a loop soon.
		default:
			h.seen[c] = true
			h.stay(c, h.p.immovable())
		}
	}
}

// immovable says why a connection on the goroutine path cannot move.
func (p *Proxy) immovable() string {
	switch {
	case p.cfg.TLS != nil:
		return "a TLS connection cannot move (Go's TLS state stays in its process)"
	case p.nodeTLS != nil:
		return "a connection with TLS to the node cannot move (Go's TLS state stays in its process)"
	}
	return "a connection on the goroutine path (the event loop is off) cannot move"
}

// stay drains c here and closes it: it does not move.
func (h *handoff) stay(c *conn, why string) {
	if c.getState() == stateOpen {
		h.p.log.Info().Str("client", c.clientAddr.String()).Msg("handover: " + why + ": draining it and closing it; the driver reconnects, to the successor")
	}
	h.draining = append(h.draining, c)
	c.drain()
	if h.expired {
		c.closeAll()
	}
}

func (h *handoff) onReplies() error {
	for _, r := range h.replies.take() {
		h.moving--
		switch r.outcome {
		case moveDetached:
			if err := h.send(r.c, r.d); err != nil {
				h.attach(r.c, r.d)
				return err
			}
		case moveRefused:
			h.stay(r.c, "not open")
		case moveEnded:
			if h.expired {
				h.draining = append(h.draining, r.c) // closed for want of a quiet point
			}
		}
	}
	return nil
}

// send hands a detached connection to the successor.
func (h *handoff) send(c *conn, d detached) error {
	h.nextID++
	id := h.nextID
	m := c.movedState(id, d.clientPend, d.nodePend)
	if err := h.s.ctl.sendJSON(msgConn, m, d.fds[0], d.fds[1]); err != nil {
		return err
	}
	h.sent[id] = &transit{c: c, d: d}
	return nil
}

func (h *handoff) onAck(a ackMsg) {
	t := h.sent[a.ID]
	if t == nil {
		return
	}
	delete(h.sent, a.ID)
	if !a.OK {
		h.attach(t.c, t.d)
		h.stay(t.c, "refused by the successor ("+a.Reason+")")
		return
	}
	unix.Close(t.d.fds[0])
	unix.Close(t.d.fds[1])
	t.c.finishMoved()
	h.res.Moved++
}

// attach serves a detached connection here again.
func (h *handoff) attach(c *conn, d detached) {
	c.lp.post(loopCmd{kind: cmdAttach, c: c, h: &handoverCmd{d: d}})
}

// expire closes, at DrainTimeout, what has not moved or drained: like Proxy.drain.
func (h *handoff) expire() {
	h.expired = true
	n := 0
	for _, c := range h.p.allConns() {
		if t := h.inTransit(c); t || c.getState() == stateClosed {
			continue
		}
		if !h.seen[c] {
			h.seen[c] = true
			h.draining = append(h.draining, c)
		}
		c.closeAll()
		n++
	}
	if n > 0 {
		h.p.log.Warn().Int("connections", n).Msg("handover: drain timeout: closing the connections that were not quiet (requests in flight, or a client not reading)")
	}
}

func (h *handoff) inTransit(c *conn) bool {
	for _, t := range h.sent {
		if t.c == c {
			return true
		}
	}
	return false
}

// finished reports whether every connection has moved or ended.
func (h *handoff) finished() bool {
	if h.moving > 0 || len(h.sent) > 0 {
		return false
	}
	for _, c := range h.draining {
		if !c.closed.Load() {
			return false
		}
	}
	for _, c := range h.p.allConns() {
		if !h.seen[c] && c.getState() != stateClosed {
			return false
		}
	}
	return true
}

// abort serves here again every connection not acknowledged: those sent, and those on
// their way to a quiet point.
func (h *handoff) abort(err error) (HandoffResult, error) {
	// Acks that came before the successor went away stand: those connections are its.
	// readPeer sends its events in order, and the last one ends it.
acks:
	for {
		select {
		case ev := <-h.events:
			if ev.err != nil || ev.end {
				break acks
			}
			h.onAck(ev.ack)
		default:
			break acks
		}
	}
	for _, t := range h.sent {
		h.attach(t.c, t.d)
	}
	h.sent = nil
	for c := range h.seen {
		c.mu.Lock()
		lp := c.lp
		c.mu.Unlock()
		if lp != nil {
			lp.post(loopCmd{kind: cmdMoveCancel, c: c}) // ignored unless it is moving
		}
	}
	for h.moving > 0 {
		<-h.replies.wake
		for _, r := range h.replies.take() {
			h.moving--
			if r.outcome == moveDetached {
				h.attach(r.c, r.d)
			}
		}
	}
	h.res.Closed = len(h.draining)
	return h.res, err
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

// Adopt takes over the connections that the predecessor hands over (Proxy.Handoff there),
// each served here from the moment it is acknowledged, as one of the connections of the
// Serve call running (which must be), and ending with it. It returns once the predecessor
// says the handover is done, or goes away (the connections adopted until then are served
// on; the others are the predecessor's, which kept them or died with them), or ctx is
// done.
func (p *Proxy) Adopt(ctx context.Context, pred *Predecessor) (HandoffResult, error) {
	var res HandoffResult
	stop := context.AfterFunc(ctx, func() { pred.ctl.uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	// Serve may have been started just now, by the same caller: give it time to begin.
	for t := time.Now(); p.servingGroup() == nil && time.Since(t) < 5*time.Second && ctx.Err() == nil; {
		time.Sleep(time.Millisecond)
	}
	// The event loops start with the first connection (raising GOMAXPROCS, which stops the
	// world, and locking a thread each): start them now, not while a client waits for its
	// connection to arrive.
	if !p.noLoop {
		p.loops.pick()
	}
	for {
		kind, body, fds, err := pred.ctl.recv()
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return res, fmt.Errorf("predecessor gone mid-handover, with %d connections adopted: %w", res.Moved, err)
		}
		switch kind {
		case msgConn:
			res.Moved += p.adoptOne(pred, body, fds)
		case msgDone:
			closeFDs(fds)
			var d doneMsg
			json.Unmarshal(body, &d)
			res.Closed, res.Final = d.Closed, d.Final
			if err := pred.ctl.send(msgEnd, nil); err != nil {
				return res, err
			}
			p.log.Info().Int("adopted", res.Moved).Int("closed_by_predecessor", d.Closed).
				Int("predecessor_pid", pred.peer.PID).Msg("handover done: the predecessor has handed over its connections")
			return res, nil
		default:
			closeFDs(fds)
			return res, fmt.Errorf("control socket: unexpected message %q", kind)
		}
	}
}

// adoptOne adopts one connection, acknowledging it before it reads either socket, and
// returns 1 when it serves it.
func (p *Proxy) adoptOne(pred *Predecessor, body []byte, fds []int) int {
	var m movedConn
	nack := func(err error) int {
		closeFDs(fds)
		p.log.Warn().Err(err).Msg("handover: connection refused: the predecessor serves it on")
		pred.ctl.sendJSON(msgAck, ackMsg{ID: m.ID, Reason: err.Error()})
		return 0
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nack(err)
	}
	if len(fds) != 2 {
		return nack(fmt.Errorf("%d descriptors, want 2", len(fds)))
	}
	p.mu.Lock()
	g := p.serving
	if g != nil {
		g.wg.Add(1)
	}
	p.mu.Unlock()
	if g == nil {
		return nack(errors.New("the proxy is not serving"))
	}
	c, err := p.adoptConn(m, fds[0], fds[1], g)
	if err != nil {
		g.wg.Done()
		return nack(err)
	}
	// Acknowledged before either socket is read: from here it is this process's, and the
	// predecessor closes its descriptors. A failed ack means the predecessor is gone, and
	// with it its descriptors: the connection is this process's all the same. Its client
	// waits until a transport reads it: the move to a loop is made here, without waiting
	// for a goroutine to start.
	pred.ctl.sendJSON(msgAck, ackMsg{ID: m.ID, OK: true})
	if p.noLoop || !c.toLoop() {
		go c.serveAdopted() // else the loop retires it (closedOnLoop)
	}
	return 1
}
