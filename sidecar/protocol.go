package sidecar

import (
	"net/netip"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// pipeline is one connection's protocol state and the per-frame work on it (pipeline.go,
// with rewrite.go, statement.go, limits.go, peers.go and capture.go): the protocol
// version, the compression, the handshake, the stream table of the requests in flight, the
// views of the frames being handled, tracing, statement statistics, the workload capture
// and the counters. It touches no socket, buffer, event loop or segment: the transports
// (conn, the goroutine path, the event loop, v5's segments) own those, read the frames,
// call request and response, and apply the effect that a request returns when it changes
// the framing (a v5 STARTUP, a frame edited in place).
//
// A conn embeds its pipeline, so that the per-frame calls are direct calls on the
// connection, as they were. The request side and the response side of a connection use it
// at once on the goroutine path: the fields they share are atomics, or set before both
// start (see each).
type pipeline struct {
	p *Proxy
	// tr is the connection's tracing state: nil until its first request that tracing
	// considers (traceConn), and always without a tracer. It is written by the request side
	// only; the response side reads it for requests traced, which were put in the stream
	// table after it was set.
	tr atomic.Pointer[tracing.Conn]

	clientAddr netip.AddrPort
	nodeAddr   netip.AddrPort
	advertise  netip.AddrPort // written into system.local and events about the node
	peerPort   uint16         // written into peers and events about other nodes

	version byte // the protocol version of the first accepted frame
	// traceOn says that the proxy's log level, fixed when the connection is made, lets trace
	// lines through (traceFrame).
	traceOn bool
	comp    atomic.Int32 // index into compressors, set by STARTUP
	ready   atomic.Bool  // handshake done: the full frame limit applies, see limits.go
	// inSystem is set when USE made system the connection's keyspace (statement.go).
	inSystem atomic.Bool

	streams  streamTable
	counters connCounters
	capt     captureState // the workload capture (capture.go)

	// views are the views of the request and of the response being handled, each decoded
	// once for every reader (pipeline.go): the connection's own on the goroutine path, where
	// its two goroutines use one each, and its loop's once it moved to one, where the loop
	// handles one frame at a time (a view is 330 bytes, kept by every idle connection).
	views *frameViews
}

// effect is what the work on a request asks of the transport that carries it, which the
// pipeline does not touch itself: request returns it, and the transport applies it before
// it reads the next frame (conn.apply). Most requests return none.
type effect uint8

const (
	// fxEdited: the frame was changed in place (the probe's skip-metadata bit), so that a
	// v5 segment that carries it needs a fresh CRC.
	fxEdited effect = 1 << iota
	// fxSegments: a v5 STARTUP, whose answer starts the segments; fxSegmentsLZ4 with it
	// when the STARTUP asked for lz4, the form of the segments.
	fxSegments
	fxSegmentsLZ4
)

// compressors are indexed by pipeline.comp.
var compressors = [...]cql.Compressor{nil, cql.LZ4{}, cql.Snappy{}}

// traceConn returns the connection's tracing state, made on first use; request side
// only, and only with a tracer (Proxy.tr). An idle connection, or one of a node with
// tracing off, never holds one (it is about 230 bytes with its registration).
func (c *pipeline) traceConn() *tracing.Conn {
	if t := c.tr.Load(); t != nil {
		return t
	}
	t := c.p.tr.NewConn(c.clientAddr, c.nodeAddr)
	c.tr.Store(t)
	return t
}

// debug and warn return a line about the connection, or nil (on which zerolog's methods do
// nothing) when such lines are off: a line of the proxy's logger with the client's address.
// A connection has no logger of its own, whose context would cost an idle connection 600
// bytes.
func (c *pipeline) debug() *zerolog.Event { return withClient(c.p.log.Debug(), c) }

func (c *pipeline) warn() *zerolog.Event { return withClient(c.p.log.Warn(), c) }

func withClient(e *zerolog.Event, c *pipeline) *zerolog.Event {
	if e == nil {
		return nil
	}
	return e.Str("client", c.clientAddr.String())
}

func (c *pipeline) compressor() cql.Compressor { return compressors[c.comp.Load()] }
