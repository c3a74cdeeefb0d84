//go:build linux

package handover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// transit is a connection sent to the successor and not acknowledged yet.
type transit struct {
	c Conn
	d Detached
}

// peerEvent is what the successor said, in order: an ack, the end, or its going away.
type peerEvent struct {
	ack ackMsg
	end bool
	err error
}

// handoff is one run of Handoff.
type handoff struct {
	src     Source
	s       *Successor
	replies *Replies
	events  chan peerEvent

	seen     map[Conn]bool
	moving   int                 // moves posted, outcome not in yet
	sent     map[uint64]*transit // sent, not acknowledged
	nextID   uint64
	draining []Conn // ending here: TLS, refused, not quiet in time
	expired  bool
	res      Result
	final    func() []byte
}

// Handoff moves the connections of src to the successor s, which already serves the
// listeners (Successor.Offer): each plaintext connection on an event loop moves at a quiet
// point, waiting at most src.DrainTimeout for it; the others (TLS, the goroutine path, and
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
func Handoff(ctx context.Context, src Source, s *Successor, final func() []byte) (Result, error) {
	h := &handoff{src: src, s: s, replies: newReplies(), events: make(chan peerEvent, 64),
		seen: make(map[Conn]bool), sent: make(map[uint64]*transit), final: final}
	go h.readPeer()
	log := src.Log()
	log.Info().Int("successor_pid", s.peer.PID).Int("connections", src.Connections()).
		Dur("timeout", src.DrainTimeout()).Msg("handover: moving the connections to the successor")
	res, err := h.run(ctx)
	if err != nil {
		log.Warn().Err(err).Int("moved", res.Moved).Msg("handover failed: serving on with what was not moved")
		return res, err
	}
	log.Info().Int("moved", res.Moved).Int("closed", res.Closed).Msg("handover done")
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

func (h *handoff) run(ctx context.Context) (Result, error) {
	deadline := time.NewTimer(h.src.DrainTimeout())
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
	for _, c := range h.src.Conns() {
		if h.seen[c] {
			continue
		}
		switch w := c.Where(); {
		case w == OnLoop:
			h.seen[c] = true
			h.moving++
			c.Move(h.replies)
		case w == InGate && !h.expired:
			// Still in the version gate, or dialling the node: it reaches a loop soon.
		default:
			h.seen[c] = true
			h.stay(c, h.src.Immovable())
		}
	}
}

// stay drains c here and closes it: it does not move.
func (h *handoff) stay(c Conn, why string) {
	if c.Open() {
		h.src.Log().Info().Str("client", c.Client()).Msg("handover: " + why + ": draining it and closing it; the driver reconnects, to the successor")
	}
	h.draining = append(h.draining, c)
	c.Drain()
	if h.expired {
		c.CloseAll()
	}
}

func (h *handoff) onReplies() error {
	for _, r := range h.replies.take() {
		h.moving--
		switch r.Outcome {
		case Detach:
			if err := h.send(r.Conn, r.Detached); err != nil {
				r.Conn.Attach(r.Detached)
				return err
			}
		case Refused:
			h.stay(r.Conn, "not open")
		case Ended:
			if h.expired {
				h.draining = append(h.draining, r.Conn) // closed for want of a quiet point
			}
		}
	}
	return nil
}

// send hands a detached connection to the successor.
func (h *handoff) send(c Conn, d Detached) error {
	h.nextID++
	id := h.nextID
	m := c.Export(id, d)
	if err := h.s.ctl.sendJSON(msgConn, m, d.FDs[0], d.FDs[1]); err != nil {
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
		t.c.Attach(t.d)
		h.stay(t.c, "refused by the successor ("+a.Reason+")")
		return
	}
	unix.Close(t.d.FDs[0])
	unix.Close(t.d.FDs[1])
	t.c.Moved()
	h.res.Moved++
}

// expire closes, at the drain timeout, what has not moved or drained: like a proxy's
// drain.
func (h *handoff) expire() {
	h.expired = true
	n := 0
	for _, c := range h.src.Conns() {
		if t := h.inTransit(c); t || c.Closed() {
			continue
		}
		if !h.seen[c] {
			h.seen[c] = true
			h.draining = append(h.draining, c)
		}
		c.CloseAll()
		n++
	}
	if n > 0 {
		h.src.Log().Warn().Int("connections", n).Msg("handover: drain timeout: closing the connections that were not quiet (requests in flight, or a client not reading)")
	}
}

func (h *handoff) inTransit(c Conn) bool {
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
		if !c.Released() {
			return false
		}
	}
	for _, c := range h.src.Conns() {
		if !h.seen[c] && !c.Closed() {
			return false
		}
	}
	return true
}

// abort serves here again every connection not acknowledged: those sent, and those on
// their way to a quiet point.
func (h *handoff) abort(err error) (Result, error) {
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
		t.c.Attach(t.d)
	}
	h.sent = nil
	for c := range h.seen {
		c.Cancel() // ignored unless it is moving
	}
	for h.moving > 0 {
		<-h.replies.wake
		for _, r := range h.replies.take() {
			h.moving--
			if r.Outcome == Detach {
				r.Conn.Attach(r.Detached)
			}
		}
	}
	h.res.Closed = len(h.draining)
	return h.res, err
}
