// Package pipeline is the per-connection protocol state of the sidecar and the work it does
// on each frame: what is done to one request before it is forwarded (Conn.Request) and to
// one response (Conn.Response). It touches no socket, buffer, event loop or segment: those
// are the transports' (package sidecar), which read the frames, call the pipeline, and
// apply the Effect that a request returns when it changes the framing. The arrows point one
// way: sidecar imports pipeline, and pipeline imports neither sidecar nor a socket. It is
// internal to sidecar: no other package of the module reaches the per-frame work.
package pipeline

import (
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
)

// Conn is one connection's protocol state and the per-frame work on it (frame.go, with
// rewrite.go, statement.go, limits.go, shards.go and peers.go): the protocol
// version, the compression, the handshake, the stream table of the requests in flight, the
// views of the frames being handled, tracing, statement statistics, the workload capture
// and the counters. It touches no socket, buffer, event loop or segment: the transports
// (conn, the goroutine path, the event loop, v5's segments) own those, read the frames,
// call request and response, and apply the effect that a request returns when it changes
// the framing (a v5 STARTUP, a frame edited in place).
//
// A transport's connection holds its Conn as a named field (sidecar's conn.pipe), so that
// the per-frame calls are direct calls, each visible at its call site: a request
// (Request, which returns its effect on the framing), a response (Response), a write done
// (Wrote) and what is queued (Queued). The request side and the response side of a
// connection use it at once on the goroutine path: the fields they share are atomics, or
// set before both start (see each).
type Conn struct {
	sh *Shared
	// tr is the connection's tracing state: nil until its first request that tracing
	// considers (traceConn), and always without a tracer. It is written by the request side
	// only; the response side reads it for requests traced, which were put in the stream
	// table after it was set.
	tr atomic.Pointer[tracing.Conn]

	ClientAddr netip.AddrPort
	NodeAddr   netip.AddrPort
	advertise  netip.AddrPort // written into system.local and events about the node
	peerPort   uint16         // written into peers and events about other nodes

	Version byte // the protocol version of the first accepted frame
	// TraceOn says that the proxy's log level, fixed when the connection is made, lets trace
	// lines through (traceFrame).
	TraceOn bool
	comp    atomic.Int32 // index into compressors, set by STARTUP
	ready   atomic.Bool  // handshake done: the full frame limit applies, see limits.go
	// inSystem is set when USE made system the connection's keyspace (statement.go).
	inSystem atomic.Bool
	// shard is the connection's ScyllaDB shard and its counters, from its node's SUPPORTED
	// (response side, rewriteSupported), nil when the node did not name one of several
	// shards: a connection to a node without shards pays only this pointer (shards.go).
	shard atomic.Pointer[shardConn]

	Streams  StreamTable
	Counters Counters
	capt     captureState // the workload capture (frame.go)
	audit    auditConn    // the audit log (audit.go)

	// Views are the Views of the request and of the response being handled, each decoded
	// once for every reader (frame.go): the connection's own on the goroutine path, where
	// its two goroutines use one each, and its loop's once it moved to one, where the loop
	// handles one frame at a time (a view is 330 bytes, kept by every idle connection).
	Views *Views
}

// Effect is what the work on a request asks of the transport that carries it, which the
// pipeline does not touch itself: request returns it, and the transport applies it before
// it reads the next frame (conn.apply). Most requests return none.
type Effect uint8

const (
	// FxEdited: the frame was changed in place (the probe's skip-metadata bit), so that a
	// v5 segment that carries it needs a fresh CRC.
	FxEdited Effect = 1 << iota
	// FxSegments: a v5 STARTUP, whose answer starts the segments; fxSegmentsLZ4 with it
	// when the STARTUP asked for lz4, the form of the segments.
	FxSegments
	FxSegmentsLZ4
)

// compressors are indexed by pipeline.comp.
var compressors = [...]cql.Compressor{nil, cql.LZ4{}, cql.Snappy{}}

// traceConn returns the connection's tracing state, made on first use; request side
// only, and only with a tracer (Proxy.tr). An idle connection, or one of a node with
// tracing off, never holds one (it is about 230 bytes with its registration).
func (c *Conn) traceConn() *tracing.Conn {
	if t := c.tr.Load(); t != nil {
		return t
	}
	t := c.sh.Tracer.NewConn(c.ClientAddr, c.NodeAddr)
	c.tr.Store(t)
	return t
}

// Debug and warn return a line about the connection, or nil (on which zerolog's methods do
// nothing) when such lines are off: a line of the proxy's logger with the client's address.
// A connection has no logger of its own, whose context would cost an idle connection 600
// bytes.
func (c *Conn) Debug() *zerolog.Event { return withClient(c.sh.Log.Debug(), c) }

func (c *Conn) Warn() *zerolog.Event { return withClient(c.sh.Log.Warn(), c) }

func withClient(e *zerolog.Event, c *Conn) *zerolog.Event {
	if e == nil {
		return nil
	}
	return e.Str("client", c.ClientAddr.String())
}

func (c *Conn) compressor() cql.Compressor { return compressors[c.comp.Load()] }

// ProtocolError is a malformed frame from a client: the connection is answered with a
// ProtocolError on stream and closed.
type ProtocolError struct {
	Stream int16
	Msg    string
}

func (e *ProtocolError) Error() string { return "malformed frame from client: " + e.Msg }

// Views are the views of one request and one response (pipeline.views).
type Views struct{ req, resp cql.Frame }

// Init sets up the pipeline of a connection accepted from client on the proxy's address
// local, before its first frame. traceOn says that the proxy's logger lets trace lines
// through.
func (c *Conn) Init(sh *Shared, client, local netip.AddrPort, traceOn bool) {
	c.sh, c.ClientAddr, c.TraceOn = sh, client, traceOn
	c.advertise = local
	if a := sh.Advertise; a.Addr().IsValid() {
		port := a.Port()
		if port == 0 {
			port = local.Port()
		}
		c.advertise = netip.AddrPortFrom(a.Addr(), port)
	}
	c.peerPort = sh.PeerPort
	if c.peerPort == 0 {
		c.peerPort = c.advertise.Port()
	}
}

// Tracing returns the connection's tracing state, nil until tracing first considered one
// of its requests.
func (c *Conn) Tracing() *tracing.Conn { return c.tr.Load() }

// Ready reports whether the handshake is done: the node answered STARTUP with READY, or
// authentication with AUTH_SUCCESS.
func (c *Conn) Ready() bool { return c.ready.Load() }

// State is the protocol state of a connection that a handover carries to a new process.
type State struct {
	Version     byte
	Compression string // "", "lz4" or "snappy": what STARTUP asked for frames (not v5's segments)
	Ready       bool   // the handshake is done
	InSystem    bool   // USE made system the connection's keyspace
	User        string // the user that authenticated, when the sidecar learnt it
}

// compressionNames are the names of compressors, by Conn.comp.
var compressionNames = [...]string{"", "lz4", "snappy"}

// State returns the connection's protocol state.
func (c *Conn) State() State {
	s := State{
		Version:     c.Version,
		Compression: compressionNames[c.comp.Load()],
		Ready:       c.ready.Load(),
		InSystem:    c.inSystem.Load(),
	}
	if t := c.tr.Load(); t != nil {
		s.User = t.User()
	}
	if u := c.audit.username(); u != "" {
		s.User = u
	}
	return s
}

// CheckState returns an error when s cannot be restored here.
func CheckState(s State) error {
	if _, ok := compressionIndex(s.Compression); !ok {
		return fmt.Errorf("compression %q is not known here", s.Compression)
	}
	return nil
}

// Restore sets the protocol state of a connection handed over by an old process, which
// CheckState accepted, and of which Init and the version were set.
func (c *Conn) Restore(s State) {
	i, _ := compressionIndex(s.Compression)
	c.comp.Store(i)
	c.ready.Store(s.Ready)
	c.inSystem.Store(s.InSystem)
	if s.User != "" {
		u := s.User
		c.audit.tried.Store(&u)
		c.audit.loggedIn()
		if c.sh.Tracer != nil {
			c.traceConn().SetUser(s.User)
		}
	}
}

func compressionIndex(name string) (int32, bool) {
	for i, n := range compressionNames {
		if n == name {
			return int32(i), true
		}
	}
	return 0, false
}

// Wrote tells tracing that the frames of tickets went out: requests to the node (Sent),
// or responses to the client (Done). The transports call it after the write that carried them,
// from the side that owns tickets; only requests traced with events are listed.
func (c *Conn) Wrote(tickets []tracing.Ticket, toClient bool) {
	if len(tickets) == 0 {
		return
	}
	now := tracing.Now()
	for _, t := range tickets {
		if toClient {
			c.Tracing().Done(t, now)
		} else {
			t.Sent(now)
		}
	}
}

// EndTracing closes the connection's tracing state, if it has one, once the connection
// has ended.
func (c *Conn) EndTracing() {
	if t := c.Tracing(); t != nil {
		t.Close()
	}
}

// captureState is a connection's part in the workload capture.
type captureState struct {
	// sess is the capture the connection last took part in, and id its number there:
	// request side only.
	sess *capture.Session
	id   uint32
	// keyspace is the connection's keyspace in use, set by the answer to a USE, which the
	// proxy reads anyway (rewrite.go); read by the request side.
	keyspace atomic.Pointer[string]
}

// Counters are the counters of one connection, read by Stats at any time. Each has a
// single writer, and is added to with inc (a load and a store): the request side's
// (Requests, BytesIn, Segments[0], Resegmented[0]) are written only by the goroutine that
// reads the client, which runs Conn.Request; the response side's (Responses, Rewritten,
// BytesOut, Segments[1], Resegmented[1]) only by the goroutine that reads the node, which
// runs Conn.Response and writes the answers to the client. On the event loop both sides
// are the loop's one goroutine. A handover restores them before either side starts.
type Counters struct {
	// Requests are by opcode: a request's is below 16 (AUTH_RESPONSE is 15), and a frame
	// with a higher one counts as 0 (ERROR, which no request is), apart from the real ones.
	Requests  [16]atomic.Uint64
	BytesIn   atomic.Uint64 // request bytes read from the client
	Responses atomic.Uint64
	Rewritten atomic.Uint64 // responses re-encoded (response side only: the rewrites)
	BytesOut  atomic.Uint64 // response bytes written to the client
	// v5 Segments read and re-encoded, by side: 0 from the client, 1 from the node.
	Segments, Resegmented [2]atomic.Uint64
}

// Counts are summed connCounters.
type Counts struct {
	Requests                                [16]uint64
	BytesIn, Responses, Rewritten, BytesOut uint64
	Segments, Resegmented                   [2]uint64
}

// inc adds n to v, a counter with one writer, with a load and a store rather than a
// locked add: the per-frame path pays no bus lock, and a concurrent reader sees either
// value, never a torn one. It is correct only for a counter that one goroutine writes
// (see Counters, and a shard's figures, each written by one side); a counter with two
// writers would lose additions, and must use Add.
func inc(v *atomic.Uint64, n uint64) { v.Store(v.Load() + n) }

// RequestSlot returns the index of connCounters.requests that counts a request of opcode op.
func RequestSlot(op cql.Opcode) int {
	if op >= 16 {
		return 0
	}
	return int(op)
}

func (c *Counters) AddTo(sum *Counts) {
	for i := range c.Requests {
		sum.Requests[i] += c.Requests[i].Load()
	}
	sum.BytesIn += c.BytesIn.Load()
	sum.Responses += c.Responses.Load()
	sum.Rewritten += c.Rewritten.Load()
	sum.BytesOut += c.BytesOut.Load()
	for i := range c.Segments {
		sum.Segments[i] += c.Segments[i].Load()
		sum.Resegmented[i] += c.Resegmented[i].Load()
	}
}

// Answered counts a response of size bytes once it is queued for the client and its
// metrics are recorded (Conn.Queued), on either transport.
func (c *Counters) Answered(size int) { inc(&c.BytesOut, uint64(size)) }

// The sides of a connection, as Segments and Resegmented index them.
const (
	FromClient = 0
	FromNode   = 1
)

// SegmentRead counts a v5 segment read from side (FromClient or FromNode), and
// SegmentWritten one re-encoded from its frames for the other side: the transport calls them from the
// side's reader, the one writer of that side's counters (see Counters).
func (c *Counters) SegmentRead(side int) { inc(&c.Segments[side], 1) }

func (c *Counters) SegmentWritten(side int) { inc(&c.Resegmented[side], 1) }
