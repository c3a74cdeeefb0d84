package sidecar

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
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

// frameLimit returns the largest frame, header included, that the client may send now.
func (c *pipeline) frameLimit() uint64 {
	if !c.ready.Load() {
		return min(cql.MaxStartupFrameSize, uint64(c.p.maxFrame))
	}
	return uint64(c.p.maxFrame)
}

// tooBig returns the ProtocolError for a frame whose claimed body of n bytes is over the
// connection's limit, or nil. Its text is Cassandra 4's.
func (c *pipeline) tooBig(stream int16, n uint32) *protocolError {
	limit := c.frameLimit()
	if uint64(n)+cql.HeaderSize <= limit {
		return nil
	}
	c.p.tooBig.Add(1)
	return &protocolError{stream: stream, msg: cql.FrameTooBigMessage(n, int(limit))}
}

// noteHandshake raises the frame limit once the node has answered STARTUP with READY, or
// authentication with AUTH_SUCCESS. It is called by pipeline.response, on either data path.
func (c *pipeline) noteHandshake(op cql.Opcode) {
	if (op == cql.OpReady || op == cql.OpAuthSuccess) && !c.ready.Load() {
		c.ready.Store(true)
	}
}

// refuseLogEvery spaces the log lines about refused connections.
const refuseLogEvery = 10 * time.Second

// refuse closes nc, just accepted, when MaxConnections connections are open, and reports
// whether it did. As Cassandra's ConnectionLimitHandler does, the client gets nothing but
// the close; a driver then tries another host or retries later. The first refusal is
// logged at once, later ones once per refuseLogEvery with their count.
func (p *Proxy) refuse(nc net.Conn) bool {
	if p.cfg.MaxConnections <= 0 {
		return false
	}
	p.mu.Lock()
	open := len(p.conns)
	p.mu.Unlock()
	if open < p.cfg.MaxConnections {
		return false
	}
	p.refused.Add(1) // before the close, which the client sees
	n := p.refusedUnlogged.Add(1)
	now := time.Now().UnixNano()
	if last := p.refusedLogged.Load(); now-last >= int64(refuseLogEvery) && p.refusedLogged.CompareAndSwap(last, now) {
		p.refusedUnlogged.Add(-n)
		p.log.Warn().Int("max_connections", p.cfg.MaxConnections).Int("open", open).Int64("refused", n).
			Str("client", nc.RemoteAddr().String()).
			Msg("connection limit reached (--max-connections): closing new client connections until some end")
	}
	nc.Close()
	return true
}

// limitCounters are the Proxy's counters of refused connections and frames.
type limitCounters struct {
	refused         atomic.Uint64 // connections closed by refuse
	refusedUnlogged atomic.Int64  // refused since the last log line
	refusedLogged   atomic.Int64  // unix nanoseconds of the last log line
	tooBig          atomic.Uint64 // frames refused for their size
}

// Keys that SUPPORTED must not carry through the proxy: they name ports of the node that a
// shard-aware driver (ScyllaDB's) would connect to directly, around the sidecar.
var bypassKeys = [...]string{"SCYLLA_SHARD_AWARE_PORT", "SCYLLA_SHARD_AWARE_PORT_SSL"}

// rewriteSupported returns a SUPPORTED response without the keys that let a driver bypass
// the proxy, or frame itself when it has none of them. The other SCYLLA_* keys (shard
// count, partitioner, sharding algorithm) pass: a driver may still compute shards, it just
// cannot reach them by another port.
//
// A node answers every connection's OPTIONS with the same frame but for its stream id, so
// the last one rewritten is kept (Proxy.supported): a frame like it costs a copy, not the
// decoding of its multimap and an encoding (about 1.2 KiB of garbage for every new
// connection).
func (c *pipeline) rewriteSupported(f *cql.Frame) []byte {
	frame := f.Raw()
	if last := c.p.supported.Load(); last != nil && last.matches(frame) {
		if last.out == nil {
			return frame
		}
		inc(&c.counters.rewritten, 1) // as encode counts the first
		c.debug().Msg(supportedRewritten)
		return last.withStream(frame)
	}
	h, prefix, body, comp, ok := responseBody(f)
	if !ok || h.Opcode != cql.OpSupported {
		return frame
	}
	m, err := cql.DecodeSupported(body)
	if err != nil {
		return frame
	}
	found := false
	for _, k := range bypassKeys {
		if _, ok := m.Options[k]; ok {
			delete(m.Options, k)
			found = true
		}
	}
	if !found {
		c.p.supported.Store(&supportedRewrite{in: bytes.Clone(frame)})
		return frame
	}
	out, ok := c.encode(h, prefix, m, comp)
	if !ok {
		return frame
	}
	c.p.supported.Store(&supportedRewrite{in: bytes.Clone(frame), out: bytes.Clone(out)})
	c.debug().Msg(supportedRewritten)
	return out
}

const supportedRewritten = "SUPPORTED: removed the shard-aware ports"

// supportedRewrite is a SUPPORTED frame from the node and its rewrite (nil: it needed
// none). Both are immutable once stored.
type supportedRewrite struct{ in, out []byte }

// matches reports whether frame is r.in but for the stream id (bytes 2 and 3 of a header
// of protocol v3 and later).
func (r *supportedRewrite) matches(frame []byte) bool {
	return len(frame) == len(r.in) && len(frame) >= cql.HeaderSize &&
		bytes.Equal(frame[:2], r.in[:2]) && bytes.Equal(frame[4:], r.in[4:])
}

// withStream returns a copy of r.out with the stream id of frame.
func (r *supportedRewrite) withStream(frame []byte) []byte {
	out := bytes.Clone(r.out)
	copy(out[2:4], frame[2:4])
	return out
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
