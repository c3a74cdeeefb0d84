package tracing

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing/statements"
)

// Defaults of Options.
const (
	DefaultRingSize   = 10000
	DefaultQueueSize  = 4096
	DefaultCaptureMax = 4096
	// DefaultMaxQueryLen is the default of Options.MaxQueryLen.
	DefaultMaxQueryLen = 4096
)

// Options configure a Tracer. The zero value gives a ring of DefaultRingSize sessions, bound
// values redacted, no logging, no extra sinks and no node-event fetching. New reads it
// once; it must not change afterwards.
type Options struct {
	// RingSize is the number of sessions the in-memory ring keeps for SlowLog and Session;
	// 0 means DefaultRingSize.
	RingSize int
	// BindValues includes bound values in session parameters, as hex. By default they are
	// redacted: "param[0]":"<redacted: 8 bytes>", because slow logs leak PII.
	BindValues bool
	// QueryLiterals keeps literal values in recorded query text. By default they are
	// replaced by "?" (cql.NormalizeQuery), because query text carries values as much as
	// bound values do. Role and user passwords are redacted either way.
	QueryLiterals bool
	// MaxQueryLen bounds the recorded query text in bytes; a longer one is cut, ends with
	// cql.TruncatedMark and gets the parameter "query_truncated" (or "query_truncated[i]"
	// in a batch) set to "true". 0 means DefaultMaxQueryLen; a negative value means no
	// bound.
	MaxQueryLen int
	// Logger is the "tracing" logger, for sink and fetch errors. The zero value logs nothing.
	Logger zerolog.Logger
	// SlowLog, when not nil, is the "slowlog" logger: it gets one line per recorded session,
	// through its own bounded queue (the sink named "log").
	SlowLog *zerolog.Logger
	// Sinks are extra sinks (OTel, CQL table). The Tracer puts each behind a bounded queue
	// and closes them in Close.
	Sinks []Sink
	// NodeEvents fetches the node's own trace events of sampled and client sessions, which
	// are merged into the session with Source "node" before it is recorded. Nil skips that.
	NodeEvents NodeEventSource
	// QueueSize is the capacity of each sink's queue and of the node-event fetch queue;
	// 0 means DefaultQueueSize. A full queue drops the session and counts it.
	QueueSize int
	// CaptureMax bounds the bytes of a request frame kept per stream in fast mode, so that
	// a slow request can be decoded after its response; 0 means DefaultCaptureMax. A
	// longer frame is kept truncated, and its session says so.
	CaptureMax int
	// AddedLatency, when set, is called once per request traced with events (full,
	// sampled and client sessions, slow or not) with the time the request spent in the
	// sidecar: its duration minus the wait between "sent to node" and "node responded".
	// It runs on the data path and must be short and safe for concurrent use; the
	// runtime guardrail feeds its added-latency figure from it.
	AddedLatency func(time.Duration)
	// TraceContextKeys are the custom payload keys a request's W3C traceparent is read
	// from, tried in order; the first one present counts. Nil means TraceparentKey alone.
	// The tracestate is read from TracestateKey in any case.
	TraceContextKeys []string
	// Exemplar, when set, is called for each recorded session that carries a trace
	// context, with its opcode, its duration and its trace id in hex, so that the latency
	// histograms can carry an exemplar that links to the trace. It runs on the data path
	// of recorded sessions only, and must be short and safe for concurrent use.
	Exemplar func(op cql.Opcode, d time.Duration, traceID string)
	// Work, when set, counts the CPU time of the work tracing adds to recorded sessions
	// (see WorkMeter), for the runtime guardrail.
	Work WorkMeter
	// NoNodeTracing samples without asking the node to trace (--node-tracing off): a
	// sampled or parent-sampled request is forwarded without the CQL tracing flag, so the
	// node keeps no trace of its own (its statement text, and on Cassandra its bound
	// values) and the session has no node events. By default the flag is set, except on a
	// request that carries a secret (cql.CarriesSecret), which never gets it.
	NoNodeTracing bool
	// Floor, when set, runs the trace floor (Config.FloorInterval): the Tracer hands it
	// every change of the floor's setting, and turns it off in Close. Nil leaves the floor's
	// setting without effect.
	Floor FloorRunner
	// Rand returns uniform random numbers for sampling. It must be safe for concurrent
	// use. Nil means math/rand/v2's Uint64, which keeps per-thread state and does not
	// contend.
	Rand func() uint64
}

// FloorRunner arms the statements due for a floor trace; *statements.Stats implements it.
type FloorRunner interface {
	SetFloor(statements.FloorConfig)
}

// Stats are the Tracer's counters since New, as a copy owned by the caller.
type Stats struct {
	// Requests counts the request frames the proxy forwarded, from the counter set by
	// CountRequests (0 without one).
	Requests uint64 `json:"requests"`
	// Traced counts the requests that got a session: full, sampled and client requests,
	// and fast-mode requests that turned out slow.
	Traced uint64 `json:"traced"`
	// SlowSessions counts the sessions recorded into the sinks (slow ones, and every
	// sampled and client session).
	SlowSessions uint64 `json:"slow_sessions"`
	// Dropped counts, per sink name, the sessions dropped because that sink's queue was
	// full. "node_events" counts the sessions recorded without node events because the
	// fetch queue was full.
	Dropped map[string]uint64 `json:"dropped"`
	// Errors counts, per sink name, the writes that returned an error.
	Errors map[string]uint64 `json:"errors"`
	// Mode is the current Config's Mode.
	Mode string `json:"mode"`
	// OTLPExport counts the failed exports of the OTel sink, and the spans they lost; nil
	// without one.
	OTLPExport *ExportStats `json:"otlp_export,omitempty"`
	// TraceContextInvalid counts, per InvalidReason, the trace contexts that were ignored
	// because they were malformed; every reason is present.
	TraceContextInvalid map[string]uint64 `json:"trace_context_invalid"`
}

// exportCounter is a sink that counts failed exports, as OTelSink does.
type exportCounter interface{ ExportStats() ExportStats }

// snapshot is the data path's view of a Config, precomputed so that a request pays for
// one atomic load and a few compares.
type snapshot struct {
	cfg         Config
	off         bool  // !Enable && Probability == 0
	enabled     bool  // Enable
	fast        bool  // Enable && Fast
	thresholdUS int64 // ThresholdMicros
	sample      bool  // Probability > 0
	sampleAll   bool  // Probability == 1 (or close enough)
	sampleBelow uint64
	follow      bool // FollowClientSampling
	// gen changes every time a Config with Enable=false is installed, so that a fast
	// slot armed before tracing was switched off is not matched to a later response.
	gen uint32
}

func newSnapshot(c Config, gen uint32) *snapshot {
	s := &snapshot{
		cfg:         c,
		off:         !c.Enable && c.Probability == 0,
		enabled:     c.Enable,
		fast:        c.Enable && c.Fast,
		thresholdUS: c.ThresholdMicros,
		sample:      c.Probability > 0,
		follow:      c.FollowClientSampling,
		gen:         gen,
	}
	if s.sample {
		v := c.Probability * (1 << 64)
		if c.Probability >= 1 || v >= math.MaxUint64 {
			s.sampleAll = true
		} else {
			s.sampleBelow = uint64(v)
		}
	}
	return s
}

// Tracer is the tracing engine of one sidecar: the configuration, the prepared-statement
// map, the slow-log ring and the sink queues. Create it with New. A Tracer is safe for
// concurrent use; each client connection gets its own Conn from NewConn.
type Tracer struct {
	snap    atomic.Pointer[snapshot]
	cfgMu   sync.Mutex // serialises writers of snap
	opts    Options
	log     zerolog.Logger
	rand    func() uint64
	ring    *ring
	prep    *Statements
	queries *queryCache
	queues  []*sinkQueue
	fetch   *fetcher               // nil without Options.NodeEvents
	filter  atomic.Pointer[Filter] // nil: every request

	ctxKeys    []string // Options.TraceContextKeys
	ctxInvalid [numInvalidReasons]atomic.Uint64

	slow         atomic.Uint64
	tracedResp   atomic.Uint64 // fast sessions counted on the response side
	sinksClosing atomic.Bool
	closeOnce    sync.Once
	closeErr     error

	connMu  sync.Mutex
	conns   map[*Conn]struct{}
	retired struct{ traced uint64 } // counters of closed Conns, under connMu

	// requests counts the requests for Stats: the sidecar's own counter (CountRequests).
	requests atomic.Pointer[func() uint64]
}

// New returns a Tracer with the DefaultConfig (tracing off) and starts one goroutine per
// sink and one for node events; Close stops them.
func New(o Options) *Tracer {
	if o.RingSize <= 0 {
		o.RingSize = DefaultRingSize
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.CaptureMax <= 0 {
		o.CaptureMax = DefaultCaptureMax
	}
	switch {
	case o.MaxQueryLen == 0:
		o.MaxQueryLen = DefaultMaxQueryLen
	case o.MaxQueryLen < 0:
		o.MaxQueryLen = 0
	}
	t := &Tracer{
		opts:    o,
		log:     o.Logger,
		rand:    o.Rand,
		ring:    newRing(o.RingSize),
		prep:    NewStatements(DefaultPreparedSize),
		queries: newQueryCache(o.QueryLiterals, o.MaxQueryLen),
		conns:   make(map[*Conn]struct{}),
	}
	t.ctxKeys = append(t.ctxKeys, o.TraceContextKeys...)
	if len(t.ctxKeys) == 0 {
		t.ctxKeys = []string{TraceparentKey}
	}
	if reflect.ValueOf(o.Logger).IsZero() {
		t.log = zerolog.Nop()
	}
	if t.rand == nil {
		t.rand = rand.Uint64
	}
	t.snap.Store(newSnapshot(DefaultConfig(), 0))
	if o.SlowLog != nil {
		t.queues = append(t.queues, newSinkQueue(metered(NewLogSink(*o.SlowLog), o.Work), o.QueueSize, t.log))
	}
	for _, s := range o.Sinks {
		t.queues = append(t.queues, newSinkQueue(metered(s, o.Work), o.QueueSize, t.log))
	}
	if o.NodeEvents != nil {
		var src NodeEventSource = redactedEvents{o.NodeEvents, o.QueryLiterals, o.MaxQueryLen}
		if o.Work != nil {
			src = meteredEvents{src, o.Work}
		}
		t.fetch = newFetcher(src, o.QueueSize, t.record, o.Work, t.log)
	}
	return t
}

// now returns the monotonic nanoseconds since t was created: one clock read, no wall clock.
func (t *Tracer) now() int64 { return Now() }

// clockEpoch is the origin of Now.
var clockEpoch = time.Now()

// Now returns monotonic nanoseconds since the process started: the clock of every
// timestamp the tracing engine keeps. A caller that reads it anyway can hand the value to
// Conn.Begin and Conn.End, so that tracing reads no clock of its own. It is never 0.
func Now() int64 { return int64(time.Since(clockEpoch)) + 1 }

// Config returns the current configuration. It is safe for concurrent use.
func (t *Tracer) Config() Config { return t.snap.Load().cfg }

// SetConfig validates c and installs it as a whole with one atomic swap, so the data path
// never sees half a change. An invalid c wraps ErrInvalidConfig and changes nothing. It is
// safe for concurrent use; UpdateConfig avoids lost updates between concurrent writers.
func (t *Tracer) SetConfig(c Config) error {
	return t.UpdateConfig(func(old Config) Config { return c })
}

// UpdateConfig applies f to the current configuration and installs the result as
// SetConfig does. Writers are serialised, so a read-modify-write through f is never lost.
// It is safe for concurrent use.
func (t *Tracer) UpdateConfig(f func(Config) Config) error {
	t.cfgMu.Lock()
	defer t.cfgMu.Unlock()
	old := t.snap.Load()
	c := f(old.cfg)
	if err := c.Validate(); err != nil {
		return err
	}
	gen := old.gen
	if !c.Enable {
		gen++
	}
	t.snap.Store(newSnapshot(c, gen))
	if fl := t.opts.Floor; fl != nil && (c.FloorInterval != old.cfg.FloorInterval || c.FloorMaxPerSecond != old.cfg.FloorMaxPerSecond) {
		fl.SetFloor(statements.FloorConfig{Interval: c.FloorInterval, MaxPerSecond: c.FloorMaxPerSecond})
	}
	if c.Mode() != old.cfg.Mode() {
		t.log.Info().Str("from", old.cfg.Mode()).Str("to", c.Mode()).Msg("tracing mode changed")
	}
	return nil
}

// SlowLog returns up to limit recorded sessions, newest first; limit <= 0 means all that
// the ring holds. The sessions' maps and slices are shared and must not be modified. It is
// safe for concurrent use.
func (t *Tracer) SlowLog(limit int) []Session { return t.ring.list(limit) }

// Session returns the recorded session whose ID is id, if the ring still holds it. It is
// safe for concurrent use.
func (t *Tracer) Session(id string) (Session, bool) { return t.ring.find(id) }

// Stats returns the counters. It is safe for concurrent use.
func (t *Tracer) Stats() Stats {
	st := Stats{
		SlowSessions: t.slow.Load(),
		Traced:       t.tracedResp.Load(),
		Dropped:      make(map[string]uint64, len(t.queues)+1),
		Errors:       make(map[string]uint64, len(t.queues)),
		Mode:         t.Config().Mode(),
	}
	if f := t.requests.Load(); f != nil {
		st.Requests = (*f)()
	}
	t.connMu.Lock()
	st.Traced += t.retired.traced
	for c := range t.conns {
		st.Traced += c.traced.Load()
	}
	t.connMu.Unlock()
	for _, q := range t.queues {
		st.Dropped[q.name] += q.dropped.Load()
		st.Errors[q.name] += q.errors.Load()
		if ec, ok := unmetered(q.sink).(exportCounter); ok {
			es := ec.ExportStats()
			st.OTLPExport = &es
		}
	}
	if t.fetch != nil {
		st.Dropped["node_events"] = t.fetch.dropped.Load()
	}
	st.TraceContextInvalid = make(map[string]uint64, numInvalidReasons-1)
	for r := ReasonLength; r < numInvalidReasons; r++ {
		st.TraceContextInvalid[r.String()] = t.ctxInvalid[r].Load()
	}
	return st
}

// record hands a finished session to the ring and to every sink queue. It never blocks.
func (t *Tracer) record(s *Session) {
	t.slow.Add(1)
	t.ring.put(s)
	if s.note != nil {
		// Its id is shown (last_trace_id) only once the session can be read.
		s.note.FloorTraced(s.ID, s.StartedAt)
	}
	if t.sinksClosing.Load() {
		return
	}
	for _, q := range t.queues {
		q.offer(s)
	}
}

// submit records s now, or after its node events are fetched when it has a node
// session id and a NodeEventSource is set.
func (t *Tracer) submit(s *Session, nodeID [16]byte, hasNodeID bool) {
	if hasNodeID && t.fetch != nil && !t.sinksClosing.Load() {
		if t.fetch.offer(s, nodeID) {
			return
		}
	}
	t.record(s)
}

// Close stops the node-event fetcher (recording what it holds, with at most half of
// ctx's remaining time for its last looks at the node), drains every sink queue and
// closes the sinks, giving up on what is left when ctx is done. Sessions recorded
// after Close reach only the ring. It is safe for concurrent use; later calls return the
// first call's result.
func (t *Tracer) Close(ctx context.Context) error {
	t.closeOnce.Do(func() {
		if fl := t.opts.Floor; fl != nil {
			fl.SetFloor(statements.FloorConfig{})
		}
		var errs []error
		if t.fetch != nil {
			// Node events are best effort, the sessions are not: the fetcher's last looks
			// get at most half of what is left, and the sinks the rest.
			fctx := ctx
			if dl, ok := ctx.Deadline(); ok {
				var cancel context.CancelFunc
				fctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
				defer cancel()
			}
			if err := t.fetch.stop(fctx); err != nil {
				errs = append(errs, err)
			}
		}
		t.sinksClosing.Store(true)
		for _, q := range t.queues {
			if err := q.stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// CountRequests sets where Stats reads its Requests: the request counter of the proxy
// that feeds the Tracer, so that a request is counted once on the data path. Without
// it, Stats reports 0 requests. It is safe for concurrent use.
func (t *Tracer) CountRequests(f func() uint64) { t.requests.Store(&f) }

// Statements returns the Tracer's prepared-statement registry, which the sidecar shares
// for its rewrite of system tables.
func (t *Tracer) Statements() *Statements { return t.prep }

// Conn is the tracing state of one client connection: its addresses, its username and
// scratch buffers; per-request state travels in Tickets. The request side (Begin,
// Ticket.Sent) must be called from one goroutine at a time, and the response side (End,
// Done) from one goroutine at a time; the two sides, SetUser and Close may run
// concurrently with each other.
type Conn struct {
	t           *Tracer
	client      string
	clientAddr  netip.Addr
	coordinator string
	user        atomic.Pointer[string] // SASL PLAIN username, set by SetUser

	// Request side.
	traced atomic.Uint64 // written by the request side only

	// Response side.
	// fast is the view of a slow fast-mode request's copy, made with the first: a view is
	// 330 bytes that most connections, idle or never slow, would keep.
	fast *cql.Frame
	out  []byte

	// free holds records to reuse: the response side puts, the request side takes.
	freeMu sync.Mutex
	free   []*record

	closeOnce sync.Once
}

// NewConn returns the per-connection state of a client connection that the sidecar relays
// from client to coordinator. Call Close when the connection ends.
func (t *Tracer) NewConn(client, coordinator netip.AddrPort) *Conn {
	c := &Conn{t: t, client: client.String(), clientAddr: client.Addr().Unmap(), coordinator: coordinator.String()}
	t.connMu.Lock()
	t.conns[c] = struct{}{}
	t.connMu.Unlock()
	return c
}

// readContext reads the trace context of a request's custom payload: the first of the
// Tracer's keys that the payload has, and then its tracestate. A malformed traceparent is
// ignored and counted, as is a malformed tracestate (whose traceparent stays). The returned
// State aliases payload. It does not allocate.
func (t *Tracer) readContext(payload []byte) TraceContext {
	if payload == nil {
		return TraceContext{}
	}
	for _, key := range t.ctxKeys {
		v, ok := cql.PayloadValue(payload, key)
		if !ok {
			continue
		}
		tc, why := ParseTraceparent(v)
		if why != valid {
			t.ctxInvalid[why].Add(1)
			return TraceContext{}
		}
		if st, ok := cql.PayloadValue(payload, TracestateKey); ok && len(st) > 0 {
			if ValidTraceState(st) {
				tc.State = st
			} else {
				t.ctxInvalid[ReasonTraceState].Add(1)
			}
		}
		return tc
	}
	return TraceContext{}
}

// TraceContextKeys returns the custom payload keys read for a traceparent, in the order
// they are tried. It is safe for concurrent use.
func (t *Tracer) TraceContextKeys() []string { return append([]string(nil), t.ctxKeys...) }

// params returns the parameter collector of a recorded session, filling m.
func (t *Tracer) params(m map[string]string) *params {
	return &params{m: m, bind: t.opts.BindValues, prep: t.prep, queries: t.queries}
}

// SetFilter installs f (the zero Filter clears it). It is safe for concurrent use.
func (t *Tracer) SetFilter(f Filter) {
	if f.IsZero() {
		t.filter.Store(nil)
		return
	}
	t.filter.Store(&f)
}

// Filter returns the filter in force.
func (t *Tracer) Filter() Filter {
	if f := t.filter.Load(); f != nil {
		return *f
	}
	return Filter{}
}
