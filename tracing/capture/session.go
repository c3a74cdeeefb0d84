package capture

import (
	"errors"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
)

// The data path: what a capture costs a request. Request copies from the frame's view
// what the writer needs (the statement's text or id, and its parameters) into a reused
// Record, and Response adds what the response says (its kind, error code, row count) and
// queues the Record for the writer: no parsing beyond the view's, no clock read but the
// one the sidecar makes anyway when it has one, no allocation once the free list holds
// enough Records, and never a wait: a full queue drops the request and counts it.

// QueueSize bounds the Records waiting for the writer.
const QueueSize = 16384

// freeSize bounds the Records kept for reuse: about what arrives between two drains of
// the writer at tens of thousands of requests a second, so that the Records in use stay
// few and warm in the cache (a Record taken from a longer queue of free ones has gone
// cold); a burst beyond it allocates.
const freeSize = 1024

// maxCopy bounds what Request copies of one request: a larger statement is captured
// without its values (capturefile.LenUnknown), and a longer text is cut.
const maxCopy = 64 << 10

// maxKept is the largest buffer a Record keeps for the next request.
const maxKept = 4 << 10

// Record is one request in a capture, from Request to Response, then queued for the
// writer. The caller keeps it with its record of the request in flight; a nil *Record is
// a request that is not captured.
type Record struct {
	s       *Session
	conn    uint32
	at      int64 // tracing.Now() at arrival
	op      cql.Opcode
	flags   byte
	version byte    // the protocol version
	ks      *string // the connection's keyspace in use
	reqLen  uint32
	// req is the request, parsed by the frame's view and copied into buf; over maxCopy,
	// only its statements' texts, cut, without values or parameters (cut).
	req    cql.Request
	buf    []byte
	cut    bool
	prepID []byte // the id a PREPARE's answer gave

	respOp  cql.Opcode
	kind    int32 // RESULT kind, or ERROR code
	rows    int32
	respLen uint32
	latency int64 // ns
}

// Session is one capture from its start to its end: the queue and the counters that the
// data path writes. Its methods are safe for concurrent use.
type Session struct {
	start   int64 // tracing.Now() at the start
	queue   *ring // requests for the writer
	free    *ring // Records to reuse
	conns   atomic.Uint32
	dropped atomic.Uint64
	ended   atomic.Bool   // the writer has ended: a late response is not queued
	done    chan struct{} // closed when the writer has ended
}

// NewConn returns the number of a connection in this capture, from 1: a connection asks
// once, on its first request captured.
func (s *Session) NewConn() uint32 { return s.conns.Add(1) }

// take returns a Record to fill.
func (s *Session) take() *Record {
	if r := s.free.pop(); r != nil {
		return r
	}
	return &Record{}
}

// release gives a Record back for reuse.
func (s *Session) release(r *Record) {
	if cap(r.buf) > maxKept {
		r.buf, r.req = nil, cql.Request{} // and the request's arrays, sized like it
	}
	r.ks = nil
	s.free.push(r)
}

// Request sees a request of n bytes through the view f that the sidecar decoded it into,
// on connection conn, whose keyspace in use is ks (nil for none), arrived at now (from
// tracing.Now). It returns the Record that the caller passes to Response with the
// response, or nil for a request that is not captured (an event, a stream the proxy does
// not follow). It does not retain f or its bytes.
func (s *Session) Request(f *cql.Frame, conn uint32, ks *string, now int64, n int) *Record {
	h := &f.Header
	if h.Stream < 0 {
		return nil
	}
	r := s.take()
	r.s, r.conn, r.at, r.op, r.flags, r.ks = s, conn, now, h.Opcode, h.Flags, ks
	r.version, r.reqLen = h.ProtoVersion(), uint32(n)
	r.cut, r.prepID = false, r.prepID[:0]
	req, _ := f.Request()
	if req.Len() <= maxCopy {
		r.buf = req.CopyTo(&r.req, r.buf)
	} else {
		r.cut = true
		r.buf = cutCopy(req, &r.req, r.buf)
	}
	return r
}

// cutCopy makes dst the statements of req, each text cut to what maxCopy holds in all,
// without values or parameters, for a request too large to copy whole. It allocates: such
// requests are rare.
func cutCopy(req *cql.Request, dst *cql.Request, buf []byte) []byte {
	*dst = cql.Request{Opcode: req.Opcode, Version: req.Version, BatchType: req.BatchType, Err: errCut}
	buf = make([]byte, 0, maxCopy)
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b[:min(len(b), maxCopy-at)]...)
		return buf[at:len(buf):len(buf)]
	}
	dst.Query, dst.ID = keep(req.Query), keep(req.ID)
	for _, st := range req.Batch {
		dst.Batch = append(dst.Batch, cql.BatchStatement{Prepared: st.Prepared, Query: keep(st.Query), ID: keep(st.ID)})
	}
	return buf
}

// errCut is the error of a request that the capture kept cut.
var errCut = errors.New("request over the capture's copy limit")

// Response sees the response to r's request through its view f, arrived at arrived (from
// tracing.Now), and queues r for the writer, or drops it when the queue is full. r must
// not be used afterwards.
func (s *Session) Response(r *Record, f *cql.Frame, arrived int64) {
	if s.ended.Load() {
		return // the answer to a request captured just before the end
	}
	h := &f.Header
	r.respOp, r.kind, r.rows = h.Opcode, 0, -1
	r.respLen = uint32(cql.HeaderSize) + h.Length
	r.latency = arrived - r.at
	switch h.Opcode {
	case cql.OpResult, cql.OpError:
		// Read once for every reader of the frame; a compressed RESULT from the start of
		// its body only, so that it is never decompressed whole for the capture alone.
		resp := f.Response()
		r.kind = resp.Kind
		if h.Opcode == cql.OpError {
			r.kind = resp.ErrCode
		}
		if resp.Rows >= 0 {
			r.rows = int32(resp.Rows)
		}
		// The id that EXECUTEs will name, after the PREPARE's text.
		if resp.Prepared.ID != nil && r.op == cql.OpPrepare {
			r.prepID = append(r.prepID[:0], resp.Prepared.ID...)
		}
	}
	if !s.queue.push(r) {
		s.dropped.Add(1)
		s.release(r)
	}
}

// Response is r's Session's Response: the caller need not keep the Session.
func (r *Record) Response(f *cql.Frame, arrived int64) { r.s.Response(r, f, arrived) }

// ring is a bounded queue of Records that any number of goroutines push to and pop from
// without a lock (Dmitry Vyukov's bounded MPMC queue): every connection pushes its
// requests and takes reused Records at once, and a channel's lock, contended, would put
// the data path to sleep in the kernel. Each slot carries a sequence number that says
// whose turn it is.
type ring struct {
	mask  uint64
	_     [56]byte
	head  atomic.Uint64 // the next slot to pop
	_     [56]byte
	tail  atomic.Uint64 // the next slot to push
	_     [56]byte
	slots []ringSlot
}

type ringSlot struct {
	seq atomic.Uint64
	r   *Record
}

// newRing returns a ring of n slots, n a power of two.
func newRing(n int) *ring {
	q := &ring{mask: uint64(n - 1), slots: make([]ringSlot, n)}
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	return q
}

// push adds r, or reports false when the ring is full.
func (q *ring) push(r *Record) bool {
	pos := q.tail.Load()
	for {
		s := &q.slots[pos&q.mask]
		seq := s.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if q.tail.CompareAndSwap(pos, pos+1) {
				s.r = r
				s.seq.Store(pos + 1)
				return true
			}
			pos = q.tail.Load()
		case d < 0:
			return false
		default:
			pos = q.tail.Load()
		}
	}
}

// pop removes and returns the oldest Record, or nil when the ring is empty.
func (q *ring) pop() *Record {
	pos := q.head.Load()
	for {
		s := &q.slots[pos&q.mask]
		seq := s.seq.Load()
		switch d := int64(seq - (pos + 1)); {
		case d == 0:
			if q.head.CompareAndSwap(pos, pos+1) {
				r := s.r
				s.r = nil
				s.seq.Store(pos + q.mask + 1)
				return r
			}
			pos = q.head.Load()
		case d < 0:
			return nil
		default:
			pos = q.head.Load()
		}
	}
}
