//go:build linux

package handover

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Adopt takes over the connections that the predecessor hands over (Handoff there), each
// served by sink from the moment it is acknowledged. It returns once the predecessor says
// the handover is done, or goes away (the connections adopted until then are served on;
// the others are the predecessor's, which kept them or died with them), or ctx is done.
func Adopt(ctx context.Context, sink Sink, pred *Predecessor) (Result, error) {
	var res Result
	stop := context.AfterFunc(ctx, func() { pred.ctl.uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	// Serve may have been started just now, by the same caller: give it time to begin.
	for t := time.Now(); !sink.Serving() && time.Since(t) < 5*time.Second && ctx.Err() == nil; {
		time.Sleep(time.Millisecond)
	}
	// The event loops start with the first connection (raising GOMAXPROCS, which stops the
	// world, and locking a thread each): start them now, not while a client waits for its
	// connection to arrive.
	sink.StartLoops()
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
			res.Moved += adoptOne(sink, pred, body, fds)
		case msgDone:
			closeFDs(fds)
			var d doneMsg
			json.Unmarshal(body, &d)
			res.Closed, res.Final = d.Closed, d.Final
			if err := pred.ctl.send(msgEnd, nil); err != nil {
				return res, err
			}
			sink.Log().Info().Int("adopted", res.Moved).Int("closed_by_predecessor", d.Closed).
				Int("predecessor_pid", pred.peer.PID).Msg("handover done: the predecessor has handed over its connections")
			return res, nil
		default:
			closeFDs(fds)
			return res, fmt.Errorf("control socket: unexpected message %q", kind)
		}
	}
}

// adoptOne adopts one connection, acknowledging it before it reads either socket, and
// returns 1 when it serves it. The descriptors are closed once, here or by Import: once
// Import has them, they are its own, also when it fails, and their numbers may already
// name other files.
func adoptOne(sink Sink, pred *Predecessor, body []byte, fds []int) int {
	var m State
	nack := func(err error) int {
		sink.Log().Warn().Err(err).Msg("handover: connection refused: the predecessor serves it on")
		pred.ctl.sendJSON(msgAck, ackMsg{ID: m.ID, Reason: err.Error()})
		return 0
	}
	if err := json.Unmarshal(body, &m); err != nil {
		closeFDs(fds)
		return nack(err)
	}
	if len(fds) != 2 {
		closeFDs(fds)
		return nack(fmt.Errorf("%d descriptors, want 2", len(fds)))
	}
	serve, err := sink.Import(m, fds[0], fds[1])
	if err != nil {
		return nack(err) // Import closed them
	}
	// Acknowledged before either socket is read: from here it is this process's, and the
	// predecessor closes its descriptors. A failed ack means the predecessor is gone, and
	// with it its descriptors: the connection is this process's all the same. Its client
	// waits until a transport reads it: the move to a loop is made here, without waiting
	// for a goroutine to start.
	pred.ctl.sendJSON(msgAck, ackMsg{ID: m.ID, OK: true})
	serve()
	return 1
}
