package pipeline

import (
	"cmp"
	"math/bits"
	"sync"
	"time"
	"unsafe"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/statements"
)

// Inflight is what the proxy remembers about a request between forwarding it and seeing its
// response: the one per-request record of the data path. Tracing and statement statistics
// keep their state for the request in it too (trace, stat).
type Inflight struct {
	Start  int64              // tracing.Now() at arrival; set only when metrics are on
	stmt   *tracing.Statement // the system statement an EXECUTE runs, or nil
	Stream int16              // the request's stream id
	Used   bool               // the slot holds a request
	Op     cql.Opcode         // the request's opcode
	kind   rewriteKind        // what its response needs, kindNone on the common path
	trace  tracing.Ticket     // the request's tracing record, zero when not traced
	stat   statements.Ticket  // the request's statement statistics, see StatementStats
	probe  string             // the statement id of an EXECUTE probed for its table (statement.go)
	query  string             // the text of a PREPARE, for the prepared-statement registry
	capt   *capture.Record    // the request's workload capture record, nil when not captured
	aud    *auditReq          // the request's audit records, nil when none is audited (audit.go)
}

// StreamTable holds the requests of one connection that are waiting for their response,
// keyed by stream id. Both directions of a connection use it: the client reader adds, the
// node reader takes. It is an open-addressing hash table with linear probing and
// backward-shift deletion, so that a steady stream of requests neither allocates nor leaves
// tombstones; its size follows the connection's concurrency (at most 32768 requests), not
// the spread of stream ids that drivers such as gocql rotate through. Its slots come from a
// pool with the first request and go back once none is in flight, so that an idle
// connection holds none.
type StreamTable struct {
	mu    sync.Mutex
	slots []Inflight // len is a power of two
	shift uint8      // 32 - log2(len(slots))
	// last is log2 of the size the table had when it last emptied (0 before): its next
	// slots are that many, up to 64, so that a connection that empties its table between
	// bursts of requests does not grow it again from minStreamSlots each time.
	last uint8
	n    int
	// spare, when set, is the event loop's own store of small tables, which serves this
	// table instead of slotPools: it is set while the connection is on that loop, whose
	// goroutine alone then grows and empties the table.
	spare *SpareSlots
}

// SpareSlots keeps a few empty tables of each size up to 64 slots (maxSpareLog) for the
// connections of one event loop: a connection with few requests in flight empties its
// table with each response, and a sync.Pool's Get and Put for each (pinning the P, the
// pool's per-P queue) cost about 1.4% of the sidecar's CPU in mode off under perf. It is
// the loop goroutine's only; beyond maxSpareSlots of a size, tables go back to the pool.
type SpareSlots struct {
	free [maxSpareLog - minSlotsLog + 1][]*Inflight // by log2 of the size
}

const (
	maxSpareSlots = 8
	maxSpareLog   = 6 // the largest spare tables have 64 slots
)

// spares returns the loop's spare tables of size slots, or nil when it keeps none of that
// size (or the table is not on a loop).
func (t *StreamTable) spares(size int) *[]*Inflight {
	if t.spare == nil || size > 1<<maxSpareLog {
		return nil
	}
	return &t.spare.free[bits.TrailingZeros(uint(size))-minSlotsLog]
}

func (t *StreamTable) getSlots(size int) []Inflight {
	if free := t.spares(size); free != nil && len(*free) > 0 {
		p := (*free)[len(*free)-1]
		*free = (*free)[:len(*free)-1]
		return unsafe.Slice(p, size)
	}
	return getSlots(size)
}

// putSlots gives slots, all zero, back.
func (t *StreamTable) putSlots(slots []Inflight) {
	if free := t.spares(len(slots)); free != nil && len(*free) < maxSpareSlots {
		*free = append(*free, &slots[0])
		return
	}
	slotPool(len(slots)).Put(&slots[0])
}

// minStreamSlots is the size of a new table: 16 slots (1.9 KiB) hold 7 requests before it
// grows. A connection in its handshake, or with one request at a time, needs no more, and
// a burst of new connections leaves the pool holding their tables (64 slots were 7.5 KiB
// each, about a fifth of what 2,000 new idle connections cost the sidecar's RSS).
const minStreamSlots = 1 << minSlotsLog

// slotPools hold the slots of empty tables, one pool per size from minStreamSlots to the
// largest, maxStreamSlots (32,768 requests at a load of one half). They store the first slot,
// so that a Put does not allocate an interface box for a slice header; a table is all zero
// once empty (take clears what it removes), as a new one must be.
var slotPools [maxSlotsLog - minSlotsLog + 1]sync.Pool

const (
	minSlotsLog    = 4 // minStreamSlots is 1<<minSlotsLog
	maxSlotsLog    = 16
	maxStreamSlots = 1 << maxSlotsLog
)

func slotPool(size int) *sync.Pool {
	return &slotPools[bits.TrailingZeros(uint(size))-bits.TrailingZeros(minStreamSlots)]
}

func getSlots(size int) []Inflight {
	if p, _ := slotPool(size).Get().(*Inflight); p != nil {
		return unsafe.Slice(p, size)
	}
	return make([]Inflight, size)
}

// release gives the slots of an empty table back. t.mu must be held.
func (t *StreamTable) release() {
	if t.n == 0 && t.slots != nil {
		t.last = uint8(bits.TrailingZeros(uint(len(t.slots))))
		t.putSlots(t.slots)
		t.slots = nil
	}
}

func (t *StreamTable) index(stream int16) int {
	// Fibonacci hashing: the top bits of the product spread sequential ids.
	return int((uint32(uint16(stream)) * 2654435769) >> t.shift)
}

// put records a copy of r and returns the number of requests in flight. A request that
// reuses the stream id of one still in flight (a client bug) replaces it. r is passed, and
// taken (takeInto), by pointer: the record is 120 bytes, copied once each way.
func (t *StreamTable) put(r *Inflight) int {
	r.Used = true
	t.mu.Lock()
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.index(r.Stream); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if !s.Used {
			*s = *r
			t.n++
			break
		}
		if s.Stream == r.Stream {
			*s = *r
			break
		}
	}
	n := t.n
	t.mu.Unlock()
	return n
}

// grow doubles the table. t.mu must be held.
func (t *StreamTable) grow() {
	old := t.slots
	size := 2 * len(old)
	if old == nil {
		// At most a spare's size: one burst of thousands must not make every later
		// request after an idle spell take a table of that size again.
		size = max(minStreamSlots, 1<<min(t.last, maxSpareLog))
	}
	t.slots = t.getSlots(size)
	t.shift = uint8(32 - bits.Len(uint(size-1)))
	mask := size - 1
	for _, r := range old {
		if !r.Used {
			continue
		}
		i := t.index(r.Stream)
		for t.slots[i].Used {
			i = (i + 1) & mask
		}
		t.slots[i] = r
	}
	if old != nil {
		clear(old)
		t.putSlots(old)
	}
}

// take removes and returns the request with the given stream id, and the number of requests
// still in flight.
func (t *StreamTable) Take(stream int16) (Inflight, bool, int) {
	var r Inflight
	ok, n := t.takeInto(stream, &r)
	return r, ok, n
}

// takeInto is take into *dst, which is left as it was when no request has the stream id.
func (t *StreamTable) takeInto(stream int16, dst *Inflight) (bool, int) {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return false, 0
	}
	mask := len(t.slots) - 1
	i := t.index(stream)
	for {
		s := &t.slots[i]
		if !s.Used {
			n := t.n
			t.mu.Unlock()
			return false, n
		}
		if s.Stream == stream {
			break
		}
		i = (i + 1) & mask
	}
	*dst = t.slots[i]
	// Backward-shift deletion: move later members of the probe run into the hole, so that
	// lookups never need tombstones.
	j := i
	for {
		j = (j + 1) & mask
		s := &t.slots[j]
		if !s.Used {
			break
		}
		home := t.index(s.Stream)
		// s may fill the hole at i only if its home is not within (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = Inflight{}
	t.n--
	n := t.n
	t.release()
	t.mu.Unlock()
	return true, n
}

// Len returns the number of requests in flight.
func (t *StreamTable) Len() int {
	t.mu.Lock()
	n := t.n
	t.mu.Unlock()
	return n
}

// TakeAll removes every request and appends it to dst.
func (t *StreamTable) TakeAll(dst []Inflight) []Inflight {
	t.mu.Lock()
	for i := range t.slots {
		if t.slots[i].Used {
			dst = append(dst, t.slots[i])
			t.slots[i] = Inflight{}
		}
	}
	t.n = 0
	t.release()
	t.mu.Unlock()
	return dst
}

// Recheck reports whether req, copied from the table earlier, is still in flight (its
// stream holds the same entry: a request answered since, or answered and followed by
// another on its stream, is not), and then copies its tracing record, under the table's
// lock, so that the response side cannot end it meanwhile.
func (t *StreamTable) Recheck(req Inflight) (tracing.Peek, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return tracing.Peek{}, false
	}
	mask := len(t.slots) - 1
	for i := t.index(req.Stream); ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch {
		case !s.Used:
			return tracing.Peek{}, false
		case s.Stream == req.Stream:
			if *s != req {
				return tracing.Peek{}, false
			}
			return s.trace.Peek(), true
		}
	}
}

// SetSpares makes the event loop's store of small tables serve this table, while the
// connection is on that loop (nil: the pool serves it). Only the loop's goroutine may call
// it, and only it grows and empties the table meanwhile.
func (t *StreamTable) SetSpares(s *SpareSlots) { t.spare = s }

// InFlight calls found, under the table's lock, for each request in flight for at least
// min at now (tracing.Now), with its start: the earliest that metrics, statement
// statistics or tracing recorded, 0 when none did (such requests are found only when min is
// 0). It is for the in-flight view, which takes the lock briefly, as the data path does
// for a put or a take.
func (t *StreamTable) InFlight(now int64, min time.Duration, found func(req Inflight, start int64)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return
	}
	for i := range t.slots {
		s := &t.slots[i]
		if !s.Used {
			continue
		}
		start := cmp.Or(s.Start, s.stat.Start(), s.trace.Start())
		if start == 0 && min > 0 {
			continue
		}
		if start != 0 && time.Duration(now-start) < min {
			continue
		}
		found(*s, start)
	}
}

// Statement returns the statement of the request, as its statement statistics entry holds
// it, while statement statistics are on.
func (r *Inflight) Statement() (text, keyspace, table string, ok bool) {
	return r.stat.Statement()
}

// RequestFor takes from the stream table into req the request that the response with
// header h answers, and returns how many requests stay in flight, -1 for an event; req is
// left as it was, zero as every caller passes it, for an event or a stream with no request
// in flight. req is the caller's, not a result, so that the record is not copied once more
// per response.
func (t *StreamTable) RequestFor(h cql.Header, req *Inflight) (left int) {
	if h.Stream < 0 {
		return -1
	}
	_, left = t.takeInto(h.Stream, req)
	return left
}
