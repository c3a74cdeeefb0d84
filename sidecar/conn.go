package sidecar

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// conn is one client connection and its node connection: the connection's core, which
// both transports carry (see "Layers" in the package doc). On the goroutine path two
// goroutines work on it: the request goroutine reads the client and writes the node, and
// the response goroutine reads the node and writes the client; each owns its reader, its
// writer and its scratch buffers (goroutines.go, type goroutines), and they share only the
// stream table, the atomics, and the state and cause of the connection's end
// (shutdown.go). On the event loop, its loop does the work of both goroutines (loopconn.go,
// type loopConn). The transports' own state is in their types, which point at the conn;
// the conn reaches its transport only through carrier, on its ending.
type conn struct {
	// pipe is the connection's protocol state and the per-frame work on it (package
	// pipeline: conn.go, frame.go), a named field rather than an embedded one, so that every
	// call across the seam reads c.pipe.X: the transports below call it (a request, a
	// response, a write done, what is queued), and apply the effects it returns.
	pipe pipeline.Conn

	p      *connEnv
	group  *group
	client net.Conn
	node   net.Conn // set under mu by Proxy.openConn, before the response goroutine starts

	// The version gate's reader and writer of the client, and the goroutine path's.
	cr       *frameReader
	toClient *frameWriter
	lost     []pipeline.Inflight // the requests failed when the node was lost (nodeLost)

	// lifecycle is the connection's end, on either transport (shutdown.go).
	lifecycle
	// carrier is the transport's part in that end, where the transports differ; set under
	// mu by the transport that takes the connection (the event loop, or the goroutine
	// path's parking), nil otherwise.
	carrier  carrier
	handover connHandover // what an old process handed over (handover.go)

	// v5 is protocol v5's segment state (segments.go), for a connection of version 5 only:
	// set with the version, before either side reads, and nil for the others, which it
	// would cost 270 bytes each.
	v5 *v5conn
}

// carrier is what the connection's core asks of the transport that carries it, where the
// transports differ: the event loop (loopConn) does a connection's drain and close on its
// loop, and the goroutine path's parking (parkState) wakes the parked sides first. Its
// calls are on the connection's ending, and for a v5 frame larger than a segment; none is
// per frame.
type carrier interface {
	// post hands the drain (draining) or the close of the connection to the transport, and
	// reports whether it took it (the event loop); else the core acts on the sockets.
	// c.mu is held.
	post(draining bool) bool
	// wake starts what of the connection sleeps (parked sides), so that it sees the drain
	// (draining: the request side) or the close. c.mu is held.
	wake(draining bool)
	// release lets go of the transport's hold on the connection once it is finished.
	release()
	// holdLarge charges a client frame gathered from v5 segments to the budget of frames
	// held whole, when the transport cannot wait for room (segments.holdLarge), and reports
	// whether it did.
	holdLarge(size int) (handled bool, err error)
}

// connEnv is what a connection uses of its proxy, and no more (conn.p): the configuration,
// what the pipelines share, the dial, the counters a connection adds to and the budget of
// frames held whole. A Proxy holds it (Proxy.env), so that the connection's files point down to it
// rather than up to the Proxy that registers and serves them.
type connEnv struct {
	cfg Config
	// sh is what the pipelines of the proxy's connections share: the tracer, statement
	// statistics, the capture, the metrics and the logger, the limits and addresses, and
	// what the proxy learns from the node for every connection (sidecar/internal/pipeline).
	sh      *pipeline.Shared
	nodeTLS *tls.Config // Config.NodeTLS with its ServerName set
	noLoop  bool        // Config.NoEventLoop, or TRACECAR_EVENT_LOOP=off

	// dial opens a node connection; tests replace it.
	dial func(ctx context.Context) (net.Conn, error)
	// forget takes a finished connection out of the proxy's (Proxy.unregister).
	forget func(*conn)

	// lastWrite bounds the last frames written to a client being closed (errWriteTimeout);
	// set by New, before any connection.
	lastWrite time.Duration

	nodeFailures atomic.Uint64
	rejected     atomic.Uint64
	held         byteBudget // bytes of client frames held whole, see limits.go
}

// logs reports whether lines at lvl may be written: false when Config.LogGate says that
// they are off, true without a gate (zerolog decides). It is inlined.
func (p *connEnv) logs(lvl zerolog.Level) bool { return p.sh.Logs(lvl) }

// maxVersion returns the highest protocol version the proxy lets through.
func (p *connEnv) maxVersion() byte {
	if v := p.cfg.MaxProtocolVersion; v >= int(cql.V3) && v < int(cql.MaxVersion) {
		return byte(v)
	}
	return cql.MaxVersion
}

// speaks reports whether the proxy lets protocol version v (without the response bit)
// through.
func (p *connEnv) speaks(v byte) bool { return v >= cql.V3 && v <= p.maxVersion() }

// loopBound reports whether a client connection will move to an event loop once open:
// plain TCP on both sides, and the loop not turned off.
func (p *connEnv) loopBound(nc net.Conn) bool {
	_, tcp := nc.(*net.TCPConn)
	return tcp && p.nodeTLS == nil && !p.noLoop
}

// setVersion fixes the connection's protocol version, before the node is dialled.
func (c *conn) setVersion(v byte) {
	c.pipe.Version = v
	if v == cql.V5 {
		c.v5 = new(v5conn)
	}
}

// segmentsFromClient reports whether the client sends segments (protocol v5, once it has
// the answer to its STARTUP); request side.
func (c *conn) segmentsFromClient() bool { return c.v5 != nil && c.v5.client.Load() }

// segmentsFromNode reports whether the node sends segments; response side.
func (c *conn) segmentsFromNode() bool { return c.v5 != nil && c.v5.node }

func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// rejectVersion answers a frame of protocol version v, which the proxy does not let
// through, with the ProtocolError that Cassandra sends, so that drivers step down. Versions
// 1 and 2 have an 8-byte header with a one-byte stream id; later ones have the 9-byte
// header, and the answer is written as version 4, which every driver parses. The client
// may then send a supported version on this connection or another.
func (c *conn) rejectVersion(v byte) error {
	if v&cql.ResponseBit != 0 || v == 0 {
		return &pipeline.ProtocolError{Msg: fmt.Sprintf("invalid version byte 0x%02x", v)}
	}
	hsize := cql.HeaderSize
	if v <= 2 {
		hsize = 8
	}
	hb, err := c.cr.Peek(hsize)
	if err != nil {
		return noEOF(err)
	}
	n := binary.BigEndian.Uint32(hb[hsize-4:])
	var stream int16
	if v <= 2 {
		stream = int16(int8(hb[2]))
	} else {
		stream = int16(binary.BigEndian.Uint16(hb[2:4]))
	}
	if pe := c.pipe.TooBig(stream, n); pe != nil {
		return pe
	}
	if _, err := c.cr.Discard(hsize + int(n)); err != nil {
		return noEOF(err)
	}
	c.p.rejected.Add(1)
	msg := cql.UnsupportedVersionMessage(v, c.p.maxVersion())
	logVersionProbe(c.pipe.Debug(), v, c.p.maxVersion())
	body := cql.Error{Code: cql.ErrCodeProtocol, Message: msg}.AppendBody(nil, cql.V4)
	var f []byte
	if v <= 2 {
		f = append(f, cql.ResponseBit|v, 0, byte(stream), byte(cql.OpError))
		f = binary.BigEndian.AppendUint32(f, uint32(len(body)))
		f = append(f, body...)
	} else {
		f = cql.AppendHeader(f, cql.Header{Version: cql.ResponseBit | cql.V4, Stream: stream, Opcode: cql.OpError, Length: uint32(len(body))})
		f = append(f, body...)
	}
	if err := c.toClient.write(f); err != nil {
		return err
	}
	if !c.frameBuffered(c.cr) {
		return c.toClient.flush()
	}
	return nil
}

// frameBuffered reports whether r holds the whole next frame, whatever its version.
func (c *conn) frameBuffered(r *frameReader) bool {
	if r.Buffered() == 0 {
		return false
	}
	b, _ := r.Peek(1)
	if b[0] <= 2 {
		if r.Buffered() < 8 {
			return false
		}
		h, _ := r.Peek(8)
		return uint64(r.Buffered()) >= 8+uint64(binary.BigEndian.Uint32(h[4:8]))
	}
	return frameReady(r)
}

// The DataStax drivers' DSE protocol versions, which they offer first to learn whether the
// node is DataStax Enterprise.
const (
	dseV1 = 0x41
	dseV2 = 0x42
)

// logVersionProbe logs, at debug, a version the proxy answered with Cassandra's
// ProtocolError: the normal step of a driver's negotiation, never an error. A DataStax
// driver's first offer is a DSE version (0x41, 0x42), and it is named as that probe.
func logVersionProbe(e *zerolog.Event, v, max byte) {
	if e == nil {
		return
	}
	e = e.Str("version", fmt.Sprintf("0x%02x", v))
	switch v {
	case dseV1, dseV2:
		e.Msgf("a driver's DSE protocol probe (DSE_V%d), answered as Cassandra answers it: the driver steps down to a Cassandra version", v-dseV1+1)
	default:
		e.Msgf("the client offered protocol version %d; answered with Cassandra's ProtocolError (versions 3 to %d), so that it steps down", v, max)
	}
}

// group is the set of connections accepted by one Serve call.
type group struct {
	wg sync.WaitGroup
	// aware says it is ServeShardAware's, whose connections get a node connection on the
	// shard they ask for (shards.go); a connection learns it from its group, which costs
	// it no field of its own.
	aware bool
}

// connHandover is what a connection adopted from another process holds until its
// transport takes it.
type connHandover struct {
	nodePend []byte // bytes read from the node by the old process and not forwarded yet
}

// takeNodePend returns, for either transport, the bytes an old process read from the node
// and did not forward.
func (c *conn) takeNodePend() []byte {
	b := c.handover.nodePend
	c.handover.nodePend = nil
	return b
}

// v5conn is what a connection holds for protocol v5's segments.
type v5conn struct {
	// startup says that a v5 STARTUP was forwarded: its READY or AUTHENTICATE starts the
	// segments. lz4 says that it asked for lz4: the segments have the lz4 header.
	startup, lz4 atomic.Bool
	// client says that the client sends segments: the answer to its STARTUP is on its way
	// to it. The request side reads it; the response side sets it.
	client atomic.Bool
	// node says that the node sends segments (response side only).
	node bool
	// largeHeld is what the client frame gathered from its segments (larger than a segment)
	// holds of the proxy-wide budget of frames held whole, from its first segment to its
	// last (request side only; holdLarge).
	largeHeld int

	fromClient, fromNode cql.SegmentReader
	// reqOut and respOut hold the segments of frames that changed, one per side.
	reqOut, respOut []byte
	// respFrames gathers the frames of a node segment once one of them changed.
	respFrames []byte
	// respSeg holds a node segment larger than the response reader's buffer (goroutine
	// path; the request side uses reqBuf, charged to the budget of frames held whole).
	respSeg []byte
}

// reader returns the segment reader of a side: the client's, or the node's.
func (v *v5conn) reader(client bool) *cql.SegmentReader {
	if client {
		return &v.fromClient
	}
	return &v.fromNode
}
