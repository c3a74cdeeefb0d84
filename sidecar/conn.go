package sidecar

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/tracecar/tracecar/sidecar/pipeline"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// conn is one client connection and its node connection. It is carried by one of two
// transports. On the goroutine path two goroutines work on it: the request goroutine
// (serve) reads the client and writes the node, and the response goroutine (responses)
// reads the node and writes the client; each owns its reader, its writer and its scratch
// buffers, and they share only the stream table, the atomics, and the state and cause of
// the connection's end (shutdown.go). On the event loop, its loop does the work of both
// goroutines (loopState).
type conn struct {
	// Conn is the connection's protocol state and the per-frame work on it (protocol.go,
	// Conn.go): the transports below call it, and apply what it returns.
	pipeline.Conn

	p      *Proxy
	group  *group
	client net.Conn
	node   net.Conn // set under mu by open, before the response goroutine starts

	// The version gate's reader and writer of the client, and the goroutine path's.
	cr       *frameReader
	toClient *frameWriter
	lost     []pipeline.Inflight // the requests failed when the node was lost (nodeLost)
	// goPath is the rest of the goroutine path's state, nil on a loop (goroutines.go).
	*goPath

	// lifecycle is the connection's end, on either transport (shutdown.go).
	lifecycle
	loopState              // the event loop's, once the connection moved to one
	handover  connHandover // what an old process handed over (handover.go)
	park      *parkState   // an idle connection's parking on the goroutine path (park.go), or nil

	// v5 is protocol v5's segment state (segments.go), for a connection of version 5 only:
	// set with the version, before either side reads, and nil for the others, which it
	// would cost 270 bytes each.
	v5 *v5conn
}

// setVersion fixes the connection's protocol version, before the node is dialled.
func (c *conn) setVersion(v byte) {
	c.Version = v
	if v == cql.V5 {
		c.v5 = new(v5conn)
	}
}

// segmentsFromClient reports whether the client sends segments (protocol v5, once it has
// the answer to its STARTUP); request side.
func (c *conn) segmentsFromClient() bool { return c.v5 != nil && c.v5.client.Load() }

// segmentsFromNode reports whether the node sends segments; response side.
func (c *conn) segmentsFromNode() bool { return c.v5 != nil && c.v5.node }

// newConn makes a connection of client socket nc in group g; aware says it came on the
// shard-aware port, so that it advertises the ordinary one.
func (p *Proxy) newConn(nc net.Conn, g *group, aware bool) *conn {
	setNoDelay(nc)
	c := &conn{
		p:      p,
		group:  g,
		client: nc,
	}
	// A connection bound for an event loop uses its own reader and writer only for the
	// version gate: small ones, or 1,000 connections would leave 32 MiB of garbage behind.
	size := readBufferSize
	if p.loopBound(nc) {
		size = gateBufferSize
	}
	c.cr, c.toClient = newFrameReader(nc, size), newFrameWriter(nc, size)
	c.Init(p.sh, addrPort(nc.RemoteAddr()), p.advertisedLocal(nc, aware), p.sh.Log.GetLevel() <= zerolog.TraceLevel)
	p.register(c)
	return c
}

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

// serve runs the connection: the version gate and the node dial, then the transport, an
// event loop when the connection can move to one, else the goroutine path. On the goroutine
// path it returns once the connection is closed; a connection on a loop is the loop's, and
// serve returns at once, so that an idle connection there costs no goroutine stack: the
// loop retires it when it closes it.
func (c *conn) serve(ctx context.Context) {
	if err := c.open(ctx); err != nil {
		if !isClosed(err) {
			c.Debug().Err(err).Msg("connection not opened")
		}
		c.closeAll()
		c.retire()
		return
	}
	if !c.p.noLoop && c.toLoop() {
		return
	}
	goroutines{c}.runGoroutines()
}

// open answers frames of unsupported versions until one of version 3, 4 or 5 (up to
// Config.MaxProtocolVersion) arrives, then dials the node. On error the client has been
// answered as well as it could be.
func (c *conn) open(ctx context.Context) error {
	for {
		b, err := c.cr.Peek(1)
		if err != nil {
			return err
		}
		v := b[0]
		if c.p.speaks(v) {
			c.setVersion(v)
			break
		}
		if err := c.rejectVersion(v); err != nil {
			return err
		}
	}
	var nc net.Conn
	var err error
	if c.group != nil && c.group.aware {
		nc, err = c.dialShard(ctx)
	} else {
		nc, err = c.p.dial(ctx)
	}
	if err != nil {
		err = fmt.Errorf("connect to node %s: %w", c.p.cfg.NodeAddr, err)
		c.p.nodeFailures.Add(1)
		c.Warn().Err(err).Msg("node unreachable")
		// Answer the first request so the driver sees why; Overloaded tells it that the
		// request was not processed and may go to another node.
		if hb, perr := c.cr.Peek(cql.HeaderSize); perr == nil {
			h, _ := cql.ParseHeader(hb)
			c.writeError(h.Stream, cql.ErrCodeOverloaded, "tracecar: "+err.Error())
			c.client.SetWriteDeadline(time.Now().Add(errWriteTimeout))
			c.toClient.flush()
		}
		return err
	}
	setNoDelay(nc)
	c.mu.Lock()
	closed := c.getState() >= stateEnding
	if !closed {
		c.node = nc
	}
	c.mu.Unlock()
	if closed {
		nc.Close() // closeAll ran while we dialled
		return errClientGone
	}
	c.NodeAddr = addrPort(nc.RemoteAddr())
	c.Debug().Str("node", c.NodeAddr.String()).Uint8("version", c.Version).Msg("connection opened")
	return nil
}

// gateBufferSize is the size of the client reader and writer of a connection bound for an
// event loop: they hold the first frames until the move (an OPTIONS or a STARTUP, or a
// frame of a version to refuse); a larger first frame is still read whole.
const gateBufferSize = 1 << 10

// loopBound reports whether a client connection will move to an event loop once open:
// plain TCP on both sides, and the loop not turned off.
func (p *Proxy) loopBound(nc net.Conn) bool {
	_, tcp := nc.(*net.TCPConn)
	return tcp && p.nodeTLS == nil && !p.noLoop
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
	if pe := c.TooBig(stream, n); pe != nil {
		return pe
	}
	if _, err := c.cr.Discard(hsize + int(n)); err != nil {
		return noEOF(err)
	}
	c.p.rejected.Add(1)
	msg := cql.UnsupportedVersionMessage(v, c.p.maxVersion())
	logVersionProbe(c.Debug(), v, c.p.maxVersion())
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

// writeError queues an ERROR frame for the client. It is used by the goroutine that owns
// toClient.
func (c *conn) writeError(stream int16, code int32, msg string) error {
	return c.toClient.write(c.appendError(nil, stream, code, msg))
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
