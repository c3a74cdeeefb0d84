package sidecar

import (
	"sync"
	"syscall"
	"time"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/sidecar/idlepark"
)

// Parking: an idle connection on the goroutine path keeps no goroutine.
//
// Each side of a connection on the goroutine path is a goroutine blocked in a read, and a
// goroutine that forwarded frames keeps the stack it grew to (4 to 8 KiB) while it waits:
// two per connection, most of what an idle connection cost. So a side that has had nothing
// to do for a while parks: its goroutine returns, and the process's parker (package idlepark)
// watches its socket instead, in an epoll set of its own; the first byte, or the peer's
// close, starts a new goroutine for the side, which reads on where the old one stopped.
// Nothing is lost in between: a parked side holds nothing unread and nothing unwritten.
//
//   - The parker looks at the connections every idlepark.DefaultIdle (Parker.SetIdle). A connection whose byte counts
//     did not move since its last look, and is open, is asked to park: the read deadline of
//     each side still running is put in the past (park.want).
//   - The side's reader, whose read ends at that deadline, asks conn.timedOut what to do:
//     park, when it waits between frames holding nothing; otherwise read on (the deadline
//     cleared), or end as before when the deadline was drain's or stop's.
//   - The side's goroutine returns to runRequests or runResponses with errParked, which
//     hands the socket to the parker (parkSide) unless the connection started to end in
//     between; then it reads on.
//   - A side also parks at once after the last frame of the handshake it carries (STARTUP
//     or AUTH_RESPONSE from the client, READY or AUTH_SUCCESS from the node) when nothing
//     follows it: most connections of a driver's pool then sit idle, and a burst of new
//     connections never holds a goroutine each (parkAfter).
//   - drain, stop and closeAll, which wake the goroutines to end a connection, start the
//     parked ones first (unparkAll), under mu: they end as before.
//
// Only plain TCP connections of protocol v3 and v4 park: a TLS connection's reader may
// hold a decrypted record the socket does not show, and v5's segment loops are not taught
// to. Without epoll nothing parks.

// startParking lets the connection park when it can (see the package's parking notes):
// on the goroutine path, before its goroutines start.
func (c goroutines) startParking() {
	pk := idlepark.Process()
	if pk == nil || c.core.v5 != nil || c.core.cr.raw == nil || c.nr.raw == nil {
		return
	}
	c.core.mu.Lock()
	c.park = &parkState{g: c, pk: pk} // under mu, which drain, stop and closeAll read it under
	c.core.carrier = c.park
	c.core.mu.Unlock()
	c.core.cr.idle = c.requestsIdle
	c.nr.idle = c.responsesIdle
	pk.Add(c.park)
}

// parkAfter has the side that reads r park at its next wait between frames, when the frame
// it forwarded, of opcode op, ends the handshake's part of that side (see above).
func (c goroutines) parkAfter(r *frameReader, op cql.Opcode) {
	switch op {
	case cql.OpStartup, cql.OpAuthResponse, cql.OpReady, cql.OpAuthSuccess:
		r.parkNow = r.idle != nil
	}
}

func (c goroutines) requestsIdle(between bool) idleAction  { return c.timedOut(sideRequests, between) }
func (c goroutines) responsesIdle(between bool) idleAction { return c.timedOut(sideResponses, between) }

// timedOut is what side s does when its read ended at a read deadline; between says that
// its reader holds nothing and waits for a frame. A deadline the parker did not set is
// drain's or stop's, on the client: the read fails, as without parking.
func (c goroutines) timedOut(s int, between bool) idleAction {
	c.core.mu.Lock()
	defer c.core.mu.Unlock()
	if c.park == nil || !c.park.want[s] || s == sideRequests && c.core.draining() {
		return idleFail
	}
	c.park.want[s] = false
	c.socket(s).SetReadDeadline(time.Time{})
	if !between || c.core.getState() != stateOpen {
		return idleRetry
	}
	return idlePark
}

// socket returns the socket that side s reads.
func (c goroutines) socket(s int) interface{ SetReadDeadline(time.Time) error } {
	if s == sideRequests {
		return c.core.client
	}
	return c.core.node
}

// rawSocket returns the socket that side s reads, to hand to the parker.
func (c goroutines) rawSocket(s int) syscall.RawConn {
	if s == sideRequests {
		return c.core.cr.raw
	}
	return c.nr.raw
}

// parkSide hands side s, whose goroutine returned with errParked, to the parker, and
// reports whether it did: it does not once the connection started to end (a drain, a stop
// or a close came in between, which found nothing parked to wake), and then the goroutine
// reads on.
func (c goroutines) parkSide(s int) bool {
	c.core.mu.Lock()
	defer c.core.mu.Unlock()
	if c.core.getState() != stateOpen {
		return false
	}
	tok, ok := c.park.pk.Watch(c.park, s, c.rawSocket(s))
	if !ok {
		return false
	}
	c.park.token[s] = tok
	if c.park.token[1-s] != 0 {
		// Both sides parked: nobody reads a frame, and the views go back to the pool.
		viewPool.Put(c.core.pipe.Views)
		c.core.pipe.Views = nil
	}
	return true
}

// viewPool holds the frame views of connections whose sides are both parked.
var viewPool = sync.Pool{New: func() any { return new(pipeline.Views) }}

// AskPark is the parker's look at the connection: when it moved no byte since the last
// look and is open, the sides still running are asked to park. Only the parker calls it.
func (ps *parkState) AskPark() {
	c := ps.g
	c.core.mu.Lock()
	defer c.core.mu.Unlock()
	n := c.core.pipe.Counters.BytesIn.Load() + c.core.pipe.Counters.BytesOut.Load()
	idle := n == c.park.seen
	c.park.seen = n
	if !idle || c.core.getState() != stateOpen {
		return
	}
	for s := range 2 {
		if c.park.token[s] == 0 && !c.park.want[s] {
			c.park.want[s] = true
			c.socket(s).SetReadDeadline(time.Unix(1, 0))
		}
	}
}

// stopParking takes the connection out of the parker's looks, once it is closed.
func (c goroutines) stopParking() {
	if c.park != nil {
		c.park.pk.Remove(c.park)
	}
}

// post: the goroutine path drains and closes a connection on its sockets (carrier).
func (ps *parkState) post(draining bool) bool { return false }

// release takes the connection out of the parker's looks, once it is finished (carrier).
func (ps *parkState) release() { ps.g.stopParking() }

// holdLarge: a connection that parks is not of v5, and the goroutine path waits for room
// (carrier).
func (ps *parkState) holdLarge(int) (bool, error) { return false, nil }

// The sides of a connection on the goroutine path.
const (
	sideRequests  = 0 // the request goroutine: reads the client
	sideResponses = 1 // the response goroutine: reads the node
)
