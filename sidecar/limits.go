package sidecar

import (
	"sync"
	"sync/atomic"
	"time"
)

// What a hostile or broken client can make the proxy hold is bounded here:
//   - a frame's claimed length is checked against the connection's limit before any of its
//     body is read, and a frame that must be held whole grows its buffer as bytes arrive
//     (cql.AppendRead; on the event loop, gatherRoom), never from the length field;
//   - until the handshake is done (READY, or AUTH_SUCCESS with authentication) the limit is
//     cql.MaxStartupFrameSize, so an unauthenticated client cannot make the proxy hold more;
//   - toward a client that does not read, a connection buffers at most writeBufferSize bytes
//     (frameWriter never grows): then its response goroutine blocks, stops reading the node,
//     and the node's own writes block in turn, which is backpressure rather than growth (on
//     the event loop: what one read from the node brought waits for EPOLLOUT, and the node
//     is not read until it is written);
//   - Config.MaxConnections bounds the connections, and with them the buffers;
//   - Config.MaxRequestDataInFlight bounds the bytes of the frames held whole by all
//     connections together, so that many authenticated clients sending frames just under
//     the limit, slowly, wait for each other instead of adding up. The goroutine path waits
//     in readWhole; the event loop, which must not block, stops reading the connection and
//     retries every budgetPoll (loop.holdFrame, loop.retryBudget). The loop holds whole
//     every frame larger than its read buffer, so it charges all of those.

// limitCounters are the Proxy's counters of refused connections and frames.
type limitCounters struct {
	refused         atomic.Uint64 // connections closed by refuse
	refusedUnlogged atomic.Int64  // refused since the last log line
	refusedLogged   atomic.Int64  // unix nanoseconds of the last log line
	tooBig          atomic.Uint64 // frames refused for their size
}

// byteBudget is a counting semaphore of bytes. Its zero value is not usable: call init.
type byteBudget struct {
	mu   sync.Mutex
	used int64
	max  int64
	wake chan struct{} // closed and replaced by every release
}

func (b *byteBudget) init(max int64) {
	b.max, b.wake = max, make(chan struct{})
}

// budgetPoll is how often a waiter checks that its connection is still open.
const budgetPoll = 100 * time.Millisecond

// acquire takes n bytes, waiting while they do not fit; it returns false, without them, once
// stop reports true. A request larger than the whole budget is let through alone.
func (b *byteBudget) acquire(n int64, stop func() bool) bool {
	for {
		ok, wake := b.take(n)
		if ok {
			return true
		}
		t := time.NewTimer(budgetPoll)
		select {
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		if stop() {
			return false
		}
	}
}

// tryAcquire takes n bytes if they fit now, without waiting: the event loop's way, as a
// loop must not block (its waiters retry every budgetPoll, see loop.retryBudget).
func (b *byteBudget) tryAcquire(n int64) bool {
	ok, _ := b.take(n)
	return ok
}

// take takes n bytes if they fit, or returns the channel that the next release closes.
func (b *byteBudget) take(n int64) (bool, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n <= b.max || b.used == 0 {
		b.used += n
		return true, nil
	}
	return false, b.wake
}

// release returns n bytes and wakes the waiters.
func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.used -= int64(n)
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}
