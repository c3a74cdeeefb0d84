package tracing

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/cql"
)

// Per-stream state lives in pages allocated on a stream id's first traced request, so a
// connection in tracing-off mode holds only the page directory, and one that uses low
// stream ids (as drivers do) holds a page or two.
const (
	pageBits   = 6
	pageSize   = 1 << pageBits
	numStreams = 1 << 15 // v3/v4 stream ids 0..32767; negative ones are server events
	numPages   = numStreams >> pageBits
)

// States of slot.state, the hand-off of a fast-mode slot between the request side and the
// response side.
const (
	slotFree  uint32 = iota // nothing armed
	slotArmed               // a request is in flight: start and buf are valid
	slotBusy                // one side is reading or writing start and buf
)

// slot is the per-stream state of a Conn.
type slot struct {
	state atomic.Uint32

	// Fast mode, guarded by state: written by the request side between busy and armed,
	// read by the response side between busy and free.
	gen     uint32
	flags   byte
	op      cql.Opcode
	version byte
	trunc   bool
	start   int64
	size    int // the whole frame's size, when buf is truncated
	comp    cql.Compressor
	buf     []byte // the request frame, up to Options.CaptureMax bytes

	// A traced request (full, sampled, client) in flight, and one that was answered and
	// waits for ResponseSent.
	cur  atomic.Pointer[pending]
	done atomic.Pointer[pending]
}

type page [pageSize]slot

// pending is a traced request: everything its session needs, gathered on both sides. Its
// plain fields are written before it is published with an atomic store (cur, done) and
// read after the matching atomic load; sent is set by Sent at any time.
type pending struct {
	mode        string
	op          cql.Opcode
	flags       byte // the client's own flags
	version     byte
	start       int64
	parsed      int64
	sent        atomic.Int64
	responded   int64
	respSent    int64
	body        []byte // decompressed request body, custom payload removed
	decodeErr   string
	nodeID      [16]byte
	hasNodeID   bool
	err         string
	responseOp  cql.Opcode
	thresholdUS int64
	rows        int // the RESULT Rows count, or -1
}

// Conn is the tracing state of one client connection: a table of in-flight requests by
// stream id. Request-side methods (OnRequest) must be called from one goroutine, and
// response-side methods (OnResponse) from one goroutine; the two sides, Sent,
// ResponseSent and Close may run concurrently with each other.
type Conn struct {
	t           *Tracer
	client      string
	clientAddr  netip.Addr
	coordinator string
	user        atomic.Pointer[string] // SASL PLAIN username, set by SetUser
	pages       [numPages]atomic.Pointer[page]

	// Written by the request side only.
	requests   atomic.Uint64
	traced     atomic.Uint64
	reqScratch []byte

	outstanding atomic.Int32 // traced requests in cur, so OnResponse in off mode can skip

	// Response side only.
	respScratch []byte
	out         []byte

	// PREPARE requests in flight, by stream, for the prepared-statement map.
	prepMu    sync.Mutex
	prepQuery map[int16]string
	prepCount atomic.Int32

	closeOnce sync.Once
}

// slot returns the slot of stream, allocating its page; request side only.
func (c *Conn) slot(stream int16) *slot {
	i := int(stream) >> pageBits
	pg := c.pages[i].Load()
	if pg == nil {
		pg = new(page)
		c.pages[i].Store(pg)
	}
	return &pg[int(stream)&(pageSize-1)]
}

// peek returns the slot of stream, or nil when its page was never allocated.
func (c *Conn) peek(stream int16) *slot {
	if stream < 0 {
		return nil
	}
	pg := c.pages[int(stream)>>pageBits].Load()
	if pg == nil {
		return nil
	}
	return &pg[int(stream)&(pageSize-1)]
}

// OnRequest sees a request frame (header and body, the body compressed with comp when
// h.Flags has cql.FlagCompression) before the sidecar forwards it. When the request is
// sampled it sets cql.FlagTracing in frame[1], so the caller must forward frame and not a
// header re-encoded from h. It does not retain frame.
//
// With tracing off it costs a few compares: no clock read, no allocation. In fast mode it
// costs one monotonic clock read and a copy of the frame into a reused per-stream buffer.
// Call it from the connection's request goroutine only.
func (c *Conn) OnRequest(h cql.Header, frame []byte, comp cql.Compressor) {
	c.OnRequestAt(h, frame, comp, 0)
}

// OnRequestAt is OnRequest for a caller that has already read the clock for its own
// purposes (the proxy's latency metrics): now, from Now, is taken as the request's
// arrival, so that fast mode adds no clock read of its own. A zero now makes it read the
// clock itself, as OnRequest does.
func (c *Conn) OnRequestAt(h cql.Header, frame []byte, comp cql.Compressor, now int64) {
	c.requests.Store(c.requests.Load() + 1) // single writer: no locked add needed
	if !traceable(h.Opcode) || h.Stream < 0 || len(frame) < cql.HeaderSize {
		return
	}
	if h.Opcode == cql.OpPrepare {
		c.notePrepare(h, frame, comp)
	}
	s := c.t.snap.Load()
	if s.off && h.Flags&cql.FlagTracing == 0 {
		return
	}
	if f := c.t.filter.Load(); f != nil && !c.match(f, h, frame, comp) {
		return
	}
	c.onRequest(s, h, frame, comp, now)
}

// SetUser attaches the username the client authenticated with (never its password) to
// the connection's sessions. It is safe for concurrent use.
func (c *Conn) SetUser(name string) { c.user.Store(&name) }

// User returns the connection's username, or "".
func (c *Conn) User() string {
	if u := c.user.Load(); u != nil {
		return *u
	}
	return ""
}

func (c *Conn) onRequest(s *snapshot, h cql.Header, frame []byte, comp cql.Compressor, now int64) {
	var mode string
	switch {
	case h.Flags&cql.FlagTracing != 0:
		mode = ModeClient
	case s.sample && (s.sampleAll || c.t.rand() < s.sampleBelow):
		mode = ModeSampled
	case s.fast:
		c.armFast(s, h, frame, comp, now)
		return
	case s.enabled:
		mode = ModeFull
	default:
		return
	}
	if now == 0 {
		now = c.t.now()
	}
	sl := c.slot(h.Stream)
	if sl.state.Load() == slotArmed && sl.state.CompareAndSwap(slotArmed, slotBusy) {
		sl.state.Store(slotFree) // a stale fast request on this stream
	}
	p := newPending()
	p.mode, p.op, p.flags, p.version = mode, h.Opcode, h.Flags, h.ProtoVersion()
	p.start, p.thresholdUS = now, s.thresholdUS
	var body []byte
	var err error
	body, c.reqScratch, err = frameBody(h.Flags, frame, comp, c.reqScratch)
	if err == nil {
		_, body, err = cql.ParseRequestPrefix(h.Flags, body)
	}
	if err == nil {
		err = walkRequest(h.Opcode, body, &params{})
	}
	if err != nil {
		p.decodeErr = err.Error()
	}
	p.body = append(p.body[:0], body...)
	p.parsed = c.t.now()
	if mode == ModeSampled {
		frame[1] |= cql.FlagTracing
	}
	c.traced.Store(c.traced.Load() + 1)
	if sl.cur.Swap(p) == nil {
		c.outstanding.Add(1)
	}
}

// armFast keeps the start time and a copy of the frame in the stream's slot: no parsing,
// and no allocation once the slot's buffer has grown.
func (c *Conn) armFast(s *snapshot, h cql.Header, frame []byte, comp cql.Compressor, now int64) {
	sl := c.slot(h.Stream)
	if sl.cur.Load() != nil && sl.cur.Swap(nil) != nil {
		c.outstanding.Add(-1) // a traced request that never saw its response
	}
	if !sl.state.CompareAndSwap(slotFree, slotBusy) && !sl.state.CompareAndSwap(slotArmed, slotBusy) {
		return // the response side is reading this slot: skip this one request
	}
	if now == 0 {
		now = c.t.now()
	}
	sl.start = now
	sl.gen = s.gen
	sl.op, sl.flags, sl.version = h.Opcode, h.Flags, h.ProtoVersion()
	sl.comp = comp
	sl.size = len(frame)
	n := len(frame)
	sl.trunc = n > c.t.opts.CaptureMax
	if sl.trunc {
		n = c.t.opts.CaptureMax
		if h.Flags&cql.FlagCompression != 0 {
			n = cql.HeaderSize // a cut compressed body cannot be read: keep the header
		}
	}
	sl.buf = append(sl.buf[:0], frame[:n]...)
	sl.state.Store(slotArmed)
}

// OnResponse sees a response frame from the node before the sidecar forwards it, and
// returns the frame to forward: frame itself, or, for a sampled request whose client did
// not ask for tracing, a copy without the tracing id (length fixed, body re-compressed with
// comp when compressed) in a buffer owned by c that stays valid until the next OnResponse.
//
// With tracing off it costs a few compares. In fast mode it costs one clock read, and a
// slow request is decoded and recorded here. Call it from the connection's response
// goroutine only.
func (c *Conn) OnResponse(h cql.Header, frame []byte, comp cql.Compressor) []byte {
	return c.OnResponseAt(h, frame, comp, 0)
}

// OnResponseAt is OnResponse with the response's arrival time already read, from Now; a
// zero now makes it read the clock itself.
func (c *Conn) OnResponseAt(h cql.Header, frame []byte, comp cql.Compressor, now int64) []byte {
	if len(frame) < cql.HeaderSize {
		return frame
	}
	if c.prepCount.Load() != 0 {
		c.notePrepared(h, frame, comp)
	}
	s := c.t.snap.Load()
	if s.off && h.Flags&cql.FlagTracing == 0 && c.outstanding.Load() == 0 {
		return frame
	}
	return c.onResponse(s, h, frame, comp, now)
}

func (c *Conn) onResponse(s *snapshot, h cql.Header, frame []byte, comp cql.Compressor, now int64) []byte {
	sl := c.peek(h.Stream)
	if sl == nil {
		return frame
	}
	if sl.cur.Load() != nil {
		if p := sl.cur.Swap(nil); p != nil {
			c.outstanding.Add(-1)
			return c.respondTraced(sl, p, h, frame, comp)
		}
	}
	if sl.state.Load() != slotArmed || !sl.state.CompareAndSwap(slotArmed, slotBusy) {
		return frame
	}
	if sl.gen == s.gen && s.enabled {
		if now == 0 {
			now = c.t.now()
		}
		d := now - sl.start
		if slow(d/1000, s.thresholdUS) {
			c.recordFast(sl, d, h, frame, comp)
		}
	}
	sl.state.Store(slotFree)
	return frame
}

// slow reports whether a request of durUS microseconds is slow: strictly above the
// threshold, and always with threshold 0 (which "logs everything").
func slow(durUS, thresholdUS int64) bool { return durUS > thresholdUS || thresholdUS == 0 }

// recordFast builds and records the session of a slow fast-mode request; the slot is
// busy (owned by the caller).
func (c *Conn) recordFast(sl *slot, d int64, h cql.Header, frame []byte, comp cql.Compressor) {
	c.t.tracedResp.Add(1)
	var ps map[string]string
	ps, c.respScratch = c.t.decodeRequest(sl.op, sl.flags, sl.buf, sl.comp, c.respScratch)
	if sl.trunc {
		ps["truncated"] = "request of " + itoa(sl.size) + " bytes, " + itoa(len(sl.buf)) + " kept"
	}
	var ri responseInfo
	ri, c.respScratch = readResponse(h, frame, comp, c.respScratch)
	end := time.Now()
	sess := &Session{
		ID:          formatUUID(cql.NewTimeUUID(end.Add(-time.Duration(d)))),
		StartedAt:   end.Add(-time.Duration(d)),
		DurationUS:  d / 1000,
		Client:      c.client,
		Username:    c.User(),
		Coordinator: c.coordinator,
		Command:     sl.op.String(),
		Request:     requestName(sl.op),
		Mode:        ModeFast,
		Parameters:  ps,
		Events:      []Event{},
		Error:       ri.err,
	}
	c.t.record(sess)
}

// respondTraced notes the response of a traced request and strips the tracing id the
// client did not ask for.
func (c *Conn) respondTraced(sl *slot, p *pending, h cql.Header, frame []byte, comp cql.Compressor) []byte {
	p.responded = c.t.now()
	p.responseOp = h.Opcode
	// The node answered, so the request went out, even if the sidecar's notice (Sent) is
	// still on its way from a descheduled writer: place the event at the hand-off.
	p.sent.CompareAndSwap(0, p.parsed)
	var ri responseInfo
	ri, c.respScratch = readResponse(h, frame, comp, c.respScratch)
	p.err = ri.err
	p.nodeID, p.hasNodeID = ri.tracingID, ri.hasTracingID
	p.rows = responseRows(h, frame, ri.body)
	out := frame
	if p.mode == ModeSampled && ri.hasTracingID {
		out = c.stripTracingID(h, frame, comp, ri.body)
	}
	if old := sl.done.Swap(p); old != nil {
		c.finish(old) // its ResponseSent never came
	}
	return out
}

// stripTracingID returns frame without the 16-byte tracing id at the start of its body and
// without FlagTracing. body is the decompressed body when frame is compressed.
func (c *Conn) stripTracingID(h cql.Header, frame []byte, comp cql.Compressor, body []byte) []byte {
	out := append(c.out[:0], frame[:cql.HeaderSize]...)
	out[1] &^= cql.FlagTracing
	if body == nil {
		if len(frame) < cql.HeaderSize+16 {
			return frame
		}
		out = append(out, frame[cql.HeaderSize+16:]...)
	} else {
		var err error
		out, err = comp.Compress(out, body[16:])
		if err != nil {
			c.t.log.Warn().Err(err).Msg("re-compress response without tracing id; forwarding it unchanged")
			return frame
		}
	}
	cql.SetBodyLength(out, len(out)-cql.HeaderSize)
	if cap(out) <= maxKeptScratch {
		c.out = out
	} else {
		c.out = nil // valid for the caller until the GC takes it
	}
	return out
}

// Sent notes that the request on stream went out to the node ("sent to node"). The
// sidecar calls it after the write that carried the request; it is a couple of loads when
// the stream is not traced. It is safe for concurrent use.
func (c *Conn) Sent(stream int16) {
	sl := c.peek(stream)
	if sl == nil {
		return
	}
	if p := sl.cur.Load(); p != nil {
		p.sent.CompareAndSwap(0, c.t.now())
	}
}

// ResponseSent notes that the response on stream went out to the client ("response
// sent") and completes its session. It is a couple of loads when the stream is not
// traced. It is safe for concurrent use.
func (c *Conn) ResponseSent(stream int16) {
	sl := c.peek(stream)
	if sl == nil || sl.done.Load() == nil {
		return
	}
	if p := sl.done.Swap(nil); p != nil {
		p.respSent = c.t.now()
		c.finish(p)
	}
}

// finish builds the session of a traced request and records it when it is slow, or
// sampled, or the client's own.
func (c *Conn) finish(p *pending) {
	end := p.respSent
	if end == 0 {
		end = p.responded
	}
	d := end - p.start
	if f := c.t.opts.AddedLatency; f != nil {
		if sent := p.sent.Load(); sent != 0 && p.responded >= sent {
			f(time.Duration(d - (p.responded - sent)))
		}
	}
	if p.mode == ModeFull && !slow(d/1000, p.thresholdUS) {
		freePending(p)
		return
	}
	now := c.t.now()
	wallEnd := time.Now().Add(-time.Duration(now - end))
	started := wallEnd.Add(-time.Duration(d))

	ps := make(map[string]string, 6)
	if err := walkRequest(p.op, p.body, c.t.params(ps)); err != nil {
		ps["decode_error"] = err.Error()
	}
	if p.rows >= 0 {
		ps["returned_rows"] = itoa(p.rows)
	}
	evs := make([]Event, 0, 5)
	add := func(activity string, at int64) {
		if at != 0 {
			evs = append(evs, Event{Activity: activity, Source: SourceSidecar, SourceElapsedUS: (at - p.start) / 1000})
		}
	}
	add(EventReceived, p.start)
	add(EventParsed, p.parsed)
	add(EventSentToNode, p.sent.Load())
	add(EventNodeResponded, p.responded)
	add(EventResponseSent, p.respSent)

	id := cql.NewTimeUUID(started)
	if p.hasNodeID {
		id = p.nodeID // the node's session id, so the two traces match
	}
	sess := &Session{
		ID:          formatUUID(id),
		StartedAt:   started,
		DurationUS:  d / 1000,
		Client:      c.client,
		Username:    c.User(),
		Coordinator: c.coordinator,
		Command:     p.op.String(),
		Request:     requestName(p.op),
		Mode:        p.mode,
		Parameters:  ps,
		Events:      evs,
		Error:       p.err,
	}
	nodeID, hasNodeID := p.nodeID, p.hasNodeID
	freePending(p)
	c.t.submit(sess, nodeID, hasNodeID)
}

// pendings recycles pending records, with their body buffers, so that full mode does not
// allocate per request. A Sent that loaded a pending just before it was recycled may set
// the sent time of the record's next use; the hand-off fallback in respondTraced bounds
// that to a slightly early "sent to node" in a rare race.
var pendings = sync.Pool{New: func() any { return new(pending) }}

// maxPooledBody keeps huge request bodies out of the pool.
const maxPooledBody = 64 << 10

func newPending() *pending {
	p := pendings.Get().(*pending)
	p.sent.Store(0) // atomically: a stale Sent may still touch it
	p.parsed, p.responded, p.respSent = 0, 0, 0
	p.body = p.body[:0]
	p.decodeErr, p.err = "", ""
	p.nodeID, p.hasNodeID = [16]byte{}, false
	p.responseOp = 0
	p.rows = -1
	return p
}

func freePending(p *pending) {
	if cap(p.body) > maxPooledBody {
		p.body = nil
	}
	pendings.Put(p)
}

// Close ends the connection's tracing: sessions of requests still in flight are dropped,
// and the counters go to the Tracer's totals. It is safe for concurrent use and
// idempotent.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		t := c.t
		t.connMu.Lock()
		delete(t.conns, c)
		t.retired.requests += c.requests.Load()
		t.retired.traced += c.traced.Load()
		t.connMu.Unlock()
	})
}

// notePrepare remembers the query of a PREPARE request until its response tells the id.
func (c *Conn) notePrepare(h cql.Header, frame []byte, comp cql.Compressor) {
	var body []byte
	var err error
	body, c.reqScratch, err = frameBody(h.Flags, frame, comp, c.reqScratch)
	if err != nil {
		return
	}
	if _, body, err = cql.ParseRequestPrefix(h.Flags, body); err != nil {
		return
	}
	var d cql.Decoder
	d.Reset(body)
	q := d.LongString()
	if d.Err() != nil {
		return
	}
	c.prepMu.Lock()
	if c.prepQuery == nil {
		c.prepQuery = make(map[int16]string)
	}
	c.prepQuery[h.Stream] = q
	c.prepCount.Store(int32(len(c.prepQuery)))
	c.prepMu.Unlock()
}

// notePrepared completes a PREPARE: a RESULT Prepared response maps its id to the query.
func (c *Conn) notePrepared(h cql.Header, frame []byte, comp cql.Compressor) {
	c.prepMu.Lock()
	q, ok := c.prepQuery[h.Stream]
	if ok {
		delete(c.prepQuery, h.Stream)
		c.prepCount.Store(int32(len(c.prepQuery)))
	}
	c.prepMu.Unlock()
	if !ok || h.Opcode != cql.OpResult {
		return
	}
	var body []byte
	var err error
	body, c.respScratch, err = frameBody(h.Flags, frame, comp, c.respScratch)
	if err != nil {
		return
	}
	if _, body, err = cql.ParseResponsePrefix(h.Flags, body); err != nil {
		return
	}
	var d cql.Decoder
	d.Reset(body)
	if d.Int() != cql.ResultPrepared {
		return
	}
	id := d.ShortBytes()
	if d.Err() != nil {
		return
	}
	c.t.prep.Put(id, Statement{Query: q, Keyspace: preparedKeyspace(h.Version&^cql.ResponseBit, &d)})
}

// preparedKeyspace reads the keyspace of a prepared statement from the rest of its RESULT
// Prepared body (after the id): the global table spec of its bind metadata, or its first
// column's. It returns "" when the metadata names none.
func preparedKeyspace(version byte, d *cql.Decoder) string {
	if version >= 5 {
		d.ShortBytes() // result_metadata_id
	}
	flags := d.Int()
	columns := d.Int()
	if version >= 4 {
		for n := d.Int(); n > 0 && d.Err() == nil; n-- {
			d.Short() // partition key index
		}
	}
	if d.Err() != nil || flags&1 == 0 && columns <= 0 {
		return ""
	}
	ks := d.String() // the global spec's keyspace, or the first column's
	if d.Err() != nil {
		return ""
	}
	return ks
}
