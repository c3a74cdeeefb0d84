package sidecar

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// goroutinesOnly keeps every connection on the goroutine path, as Config.NoEventLoop does
// for one Proxy: TRACECAR_EVENT_LOOP=off sets it for the process, so that test suites
// (this package's, and those that start a sidecar in process, as reliability's) run on
// that path, as `tracecar sidecar` does.
var goroutinesOnly = os.Getenv("TRACECAR_EVENT_LOOP") == "off"

// compressors are indexed by conn.comp.
var compressors = [...]cql.Compressor{nil, cql.LZ4{}, cql.Snappy{}}

// errWriteTimeout bounds the last frames written to a client that is being closed: the
// error frames of a failed node, or a ProtocolError.
var errWriteTimeout = 5 * time.Second // a variable for tests

// Causes of the end of a connection on the goroutine path (see conn.stop). A client's
// error or EOF, and a malformed client frame (*protocolError), are the others.
var (
	errNodeWrite  = errors.New("write to node failed")
	errNodeLost   = errors.New("node connection lost")
	errClientGone = errors.New("client connection closed")
	errDrained    = errors.New("drained")
	errShutdown   = errors.New("closed by the proxy")
)

// connState is where a connection is on its way to closed. It only moves forward (see
// conn.advance):
//
//	open → draining → ending → closed
//
// draining is set by Proxy.drain, ending by conn.stop with the cause, and closed when both
// sockets are closed. A state may be skipped.
type connState int32

const (
	stateOpen     connState = iota
	stateDraining           // no new request is read; the last answer ends the connection
	stateEnding             // a cause is recorded: the last frames are being written
	stateClosed             // both sockets are closed
)

// protocolError is a malformed frame from a client: the connection is answered with a
// ProtocolError on stream and closed.
type protocolError struct {
	stream int16
	msg    string
}

func (e *protocolError) Error() string { return "malformed frame from client: " + e.msg }

// conn is one client connection and its node connection. Two goroutines work on it: the
// request goroutine (serve) reads the client and writes the node, and the response
// goroutine (responses) reads the node and writes the client. Each owns its reader, its
// writer and its scratch buffers; they share only the stream table, the atomics, and the
// state and cause of the connection's end (see stop).
type conn struct {
	p      *Proxy
	group  *group
	client net.Conn
	node   net.Conn // set under mu by open, before the response goroutine starts
	log    zerolog.Logger
	tr     *tracing.Conn // nil without a tracer

	clientAddr netip.AddrPort
	nodeAddr   netip.AddrPort
	advertise  netip.AddrPort // written into system.local and events about the node
	peerPort   uint16         // written into peers and events about other nodes

	version byte         // the protocol version of the first accepted frame
	comp    atomic.Int32 // index into compressors, set by STARTUP
	ready   atomic.Bool  // handshake done: the full frame limit applies, see limits.go
	// inSystem is set when USE made system the connection's keyspace (statement.go).
	inSystem atomic.Bool

	streams  streamTable
	counters connCounters

	// Request goroutine.
	cr      *bufio.Reader
	toNode  *frameWriter
	reqBuf  []byte // frames larger than cr's buffer
	reqBody []byte // decompressed request bodies
	// sentQ are the traced requests written to toNode since its last flush: tracing is
	// told they were sent once the flush returns.
	sentQ []tracing.Ticket
	// inspected is the body inspect read for the current frame (aliasing the frame or
	// reqBody), or nil when it cannot be read; inspectedAll says inspect read it, so that
	// statBody does not decompress it again. A compressed QUERY is read whole only when
	// the start of its body, decompressed into reqPrefix, does not say whether it reads a
	// system table.
	inspected    []byte
	inspectedAll bool
	reqPrefix    [queryPrefix]byte

	// Response goroutine (the request goroutine until the node is dialled).
	nr       *bufio.Reader
	toClient *frameWriter
	respBuf  []byte
	respBody []byte // decompressed response bodies for statement statistics
	lost     []inflight
	// doneQ are the traced responses written to toClient since its last flush.
	doneQ []tracing.Ticket

	// Ending: see "Ending a connection" in the package doc. state is a connState; it only
	// moves forward, by compare-and-swap, so that the frame loops and the event loop read
	// it without mu. cause is written under mu before state becomes stateEnding.
	state   atomic.Int32
	cause   error
	reqDone chan struct{} // closed when the request goroutine stops reading
	// done is closed once the transport closed the connection for good: the response
	// goroutine ended, or the loop closed it.
	done chan struct{}
	// mu serialises the changes of state and their effect on the sockets with setting node
	// and with toLoop.
	mu        sync.Mutex
	loopState // the event loop's, once the connection moved to one
}

func (p *Proxy) newConn(nc net.Conn, g *group) *conn {
	setNoDelay(nc)
	c := &conn{
		p:          p,
		group:      g,
		client:     nc,
		clientAddr: addrPort(nc.RemoteAddr()),
		reqDone:    make(chan struct{}),
		done:       make(chan struct{}),
	}
	// A connection bound for an event loop uses its own reader and writer only for the
	// version gate: small ones, or 1,000 connections would leave 32 MiB of garbage behind.
	size := readBufferSize
	if p.loopBound(nc) {
		size = gateBufferSize
	}
	c.cr, c.toClient = bufio.NewReaderSize(nc, size), newFrameWriter(nc, size)
	local := addrPort(nc.LocalAddr())
	c.advertise = local
	if a := p.advertise; a.Addr().IsValid() {
		port := a.Port()
		if port == 0 {
			port = local.Port()
		}
		c.advertise = netip.AddrPortFrom(a.Addr(), port)
	}
	c.peerPort = uint16(p.cfg.PeerPort)
	if c.peerPort == 0 {
		c.peerPort = c.advertise.Port()
	}
	c.log = p.log.With().Str("client", c.clientAddr.String()).Logger()
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

func (c *conn) compressor() cql.Compressor { return compressors[c.comp.Load()] }

// serve runs the connection: the version gate, the node dial, then the request loop. It
// returns once both goroutines have ended.
func (c *conn) serve(ctx context.Context) {
	defer c.finish()
	if err := c.open(ctx); err != nil {
		if !isClosed(err) {
			c.log.Debug().Err(err).Msg("connection not opened")
		}
		c.closeAll()
		return
	}
	if !c.p.cfg.NoEventLoop && !goroutinesOnly && c.toLoop() {
		<-c.done
		return
	}
	c.startGoroutinePath()
	go c.responses()
	err := c.requests()
	close(c.reqDone)
	c.requestsEnded(err)
	<-c.done
}

// requestsEnded stops the connection for the reason the request loop ended with err,
// unless it is a drained read with requests still in flight: then the response goroutine
// stops it after the last answer.
func (c *conn) requestsEnded(err error) {
	var pe *protocolError
	switch {
	case c.getState() >= stateEnding:
		// Stopped by the response goroutine or the proxy: that cause stands.
	case isTimeout(err) && c.getState() == stateDraining:
		// reqDone is closed before this check, and the response goroutine checks reqDone
		// after taking a stream: one of the two sees the last answer.
		if c.streams.len() == 0 {
			c.stop(errDrained)
		}
	case errors.As(err, &pe):
		c.stop(pe)
	case errors.Is(err, errNodeWrite):
		c.stop(err)
	default:
		if !isClosed(err) {
			c.log.Debug().Err(err).Msg("client read")
		}
		c.stop(fmt.Errorf("%w: %w", errClientGone, err))
	}
}

// getState returns the connection's state.
func (c *conn) getState() connState { return connState(c.state.Load()) }

// draining reports whether the connection reads no new requests: it is draining, ending
// or closed.
func (c *conn) draining() bool { return c.getState() >= stateDraining }

// advance moves the state forward to s, and reports whether it moved: it does not when the
// connection already is at s or beyond.
func (c *conn) advance(s connState) bool {
	for {
		old := c.state.Load()
		if connState(old) >= s {
			return false
		}
		if c.state.CompareAndSwap(old, int32(s)) {
			return true
		}
	}
}

// end moves the connection to ending for cause, on either path, and reports whether it
// did: the first cause stands, a later one is dropped. c.mu must be held.
func (c *conn) end(cause error) bool {
	if c.getState() >= stateEnding {
		return false
	}
	c.cause = cause
	return c.advance(stateEnding)
}

// stop ends a connection on the goroutine path for cause, from any goroutine; the first
// cause stands, a later one is dropped. It wakes both goroutines: the request goroutine's
// read of the client fails at once, and so does the response goroutine's read of the node,
// which is closed (nothing more goes to it). The response goroutine then writes the last
// frames and closes the connection: see close.
func (c *conn) stop(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inLoop() || !c.end(cause) {
		return
	}
	if c.node != nil {
		c.node.Close()
	}
	c.client.SetReadDeadline(time.Unix(1, 0))
	if cause != errDrained {
		// The response goroutine may be blocked writing to a client that does not read:
		// the last frames get errWriteTimeout, as on the event loop.
		c.client.SetWriteDeadline(time.Now().Add(errWriteTimeout))
	}
}

// close is the goroutine path's one close path, run by the response goroutine once both
// loops have stopped: it writes what the cause calls for after what is queued for the
// client (a ProtocolError for a malformed client frame; a Server error for each request in
// flight when the node was lost or could not be written), then closes both sockets.
func (c *conn) close() {
	<-c.reqDone
	c.mu.Lock()
	cause := c.cause
	closed := c.getState() == stateClosed
	c.mu.Unlock()
	if !closed {
		c.client.SetWriteDeadline(time.Now().Add(errWriteTimeout))
		c.toClient.write(c.lastFrames(nil, cause))
		c.toClient.flush()
	}
	c.closeAll()
}

// finish releases what the connection holds once both goroutines have ended.
func (c *conn) finish() {
	c.closeAll()
	if c.tr != nil {
		c.tr.Close()
	}
	c.p.unregister(c)
}

// closeAll closes both sockets at once, if they are not closed yet; a connection in a loop
// is closed by its loop. It is safe for concurrent use.
func (c *conn) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.getState() == stateClosed {
		return
	}
	if c.inLoop() {
		c.postLoop(cmdClose)
		return
	}
	if c.getState() < stateEnding {
		c.cause = errShutdown
	}
	c.advance(stateClosed)
	c.client.Close()
	if c.node != nil {
		c.node.Close()
	}
}

// drain stops reading the client: requests already read are answered, new ones are not
// read. The connection closes when its last request in flight is answered. It is safe for
// concurrent use.
func (c *conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.advance(stateDraining) {
		return
	}
	if c.inLoop() {
		c.postLoop(cmdDrain)
		return
	}
	c.client.SetReadDeadline(time.Unix(1, 0))
}

// open answers frames of unsupported versions until one of version 3 or 4 arrives, then
// dials the node. On error the client has been answered as well as it could be.
func (c *conn) open(ctx context.Context) error {
	for {
		b, err := c.cr.Peek(1)
		if err != nil {
			return err
		}
		v := b[0]
		if v == cql.V3 || v == cql.V4 {
			c.version = v
			break
		}
		if err := c.rejectVersion(v); err != nil {
			return err
		}
	}
	nc, err := c.p.dial(ctx)
	if err != nil {
		err = fmt.Errorf("connect to node %s: %w", c.p.cfg.NodeAddr, err)
		c.p.nodeFailures.Add(1)
		c.log.Warn().Err(err).Msg("node unreachable")
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
	c.nodeAddr = addrPort(nc.RemoteAddr())
	if c.p.tr != nil {
		c.tr = c.p.tr.NewConn(c.clientAddr, c.nodeAddr)
	}
	c.log.Debug().Str("node", c.nodeAddr.String()).Uint8("version", c.version).Msg("connection opened")
	return nil
}

// startGoroutinePath sets up the buffers of the goroutine path.
func (c *conn) startGoroutinePath() {
	c.nr = bufio.NewReaderSize(c.node, readBufferSize)
	c.toNode = newFrameWriter(c.node, writeBufferSize)
	if c.cr.Size() < readBufferSize {
		// Bound for a loop that could not take it: full-size buffers, the small reader's
		// bytes read first, and what the gate queued for the client written out.
		c.cr = bufio.NewReaderSize(c.cr, readBufferSize)
		c.toClient.flush()
		c.toClient = newFrameWriter(c.client, writeBufferSize)
	}
}

// gateBufferSize is the size of the client reader and writer of a connection bound for an
// event loop: they hold the first frames until the move (an OPTIONS or a STARTUP, or a
// frame of a version to refuse); a larger first frame is still read whole.
const gateBufferSize = 1 << 10

// loopBound reports whether a client connection will move to an event loop once open:
// plain TCP on both sides, and the loop not turned off.
func (p *Proxy) loopBound(nc net.Conn) bool {
	_, tcp := nc.(*net.TCPConn)
	return tcp && p.nodeTLS == nil && !p.cfg.NoEventLoop && !goroutinesOnly
}

// wrote tells tracing that the frames of tickets went out: requests to the node (Sent),
// or responses to the client (Done). Both paths call it after the write that carried them,
// from the side that owns tickets; only requests traced with events are listed.
func (c *conn) wrote(tickets []tracing.Ticket, toClient bool) {
	if len(tickets) == 0 {
		return
	}
	now := tracing.Now()
	for _, t := range tickets {
		if toClient {
			c.tr.Done(t, now)
		} else {
			t.Sent(now)
		}
	}
}

// rejectVersion answers a frame of protocol version v, which is not 3 or 4, with the
// ProtocolError that Cassandra sends, so that drivers step down. Versions 1 and 2 have an
// 8-byte header with a one-byte stream id; later ones have the 9-byte header, and the
// answer is written as version 4. The client may then send a supported version on this
// connection or another.
func (c *conn) rejectVersion(v byte) error {
	if v&cql.ResponseBit != 0 || v == 0 {
		return &protocolError{msg: fmt.Sprintf("invalid version byte 0x%02x", v)}
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
	if pe := c.tooBig(stream, n); pe != nil {
		return pe
	}
	if _, err := c.cr.Discard(hsize + int(n)); err != nil {
		return noEOF(err)
	}
	c.p.rejected.Add(1)
	msg := cql.UnsupportedVersionMessage(v)
	c.log.Debug().Uint8("version", v).Msg("unsupported protocol version")
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
func (c *conn) frameBuffered(r *bufio.Reader) bool {
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

// requests is the request loop: it forwards the client's frames to the node until the
// client goes away, sends a malformed frame, is drained, or the node cannot be written.
func (c *conn) requests() error {
	r := c.cr
	for {
		hb, err := r.Peek(cql.HeaderSize)
		if err != nil {
			if len(hb) > 0 {
				return noEOF(err)
			}
			return err
		}
		h, perr := c.requestHeader(hb)
		if perr != nil {
			return perr
		}
		n := cql.HeaderSize + int(h.Length)
		if e := c.log.Trace(); e != nil {
			e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg("frame from client")
		}

		var frame []byte
		peeked := n <= r.Size()
		switch {
		case peeked:
			if frame, err = r.Peek(n); err != nil {
				return noEOF(err)
			}
		case c.tr != nil || c.readsBody(h.Opcode):
			if c.reqBuf, err = c.readWhole(r, n); err != nil {
				return err
			}
			frame = c.reqBuf
		}

		if t := c.request(h, frame, n); t.Events() {
			c.sentQ = append(c.sentQ, t)
		}

		switch {
		case frame == nil:
			err = c.toNode.copyFrame(r, n)
		case peeked:
			err = c.toNode.write(frame)
			r.Discard(n)
		default:
			err = c.toNode.write(frame)
			c.p.held.release(n)
			if cap(c.reqBuf) > maxKeptBuffer {
				c.reqBuf = nil
			}
		}
		if err == nil && !frameReady(r) {
			if err = c.toNode.flush(); err == nil {
				c.wrote(c.sentQ, false)
				c.sentQ = c.sentQ[:0]
			}
		}
		if err != nil {
			if c.toNode.err != nil {
				return fmt.Errorf("%w: %w", errNodeWrite, err)
			}
			return err // the client went away in the middle of a frame
		}
	}
}

// responses is the response goroutine: it forwards the node's frames to the client until
// the response loop ends, stops the connection for that reason unless it was stopped
// already, and closes it.
func (c *conn) responses() {
	defer close(c.done)
	err := c.forwardResponses()
	switch {
	case err == nil:
		c.stop(errDrained)
	case errors.Is(err, errClientGone):
		c.stop(err)
	default:
		c.stop(fmt.Errorf("%w: %w", errNodeLost, err))
	}
	c.close()
}

// requestsStopped reports whether the request goroutine has stopped reading.
func (c *conn) requestsStopped() bool {
	select {
	case <-c.reqDone:
		return true
	default:
		return false
	}
}

// forwardResponses is the response loop. It returns nil when the connection was drained,
// errClientGone when the client could not be written, and the node read error otherwise.
func (c *conn) forwardResponses() error {
	r := c.nr
	var arrived int64 // when the last read from the node returned, if metrics are on
	for {
		fill := r.Buffered() < cql.HeaderSize
		hb, err := r.Peek(cql.HeaderSize)
		if err != nil {
			return err
		}
		h, err := c.responseHeader(hb)
		if err != nil {
			return err
		}
		n := cql.HeaderSize + int(h.Length)
		if e := c.log.Trace(); e != nil {
			e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg("frame from node")
		}

		var req inflight
		left := -1
		if h.Stream >= 0 {
			req, _, left = c.streams.take(h.Stream)
		}
		event := h.Stream < 0 && h.Opcode == cql.OpEvent
		var frame []byte
		fill = fill || r.Buffered() < n
		switch {
		case n <= r.Size():
			if frame, err = r.Peek(n); err != nil {
				return err
			}
		case c.tr != nil || req.kind != kindNone || event || req.stat.WantsBody(h.Opcode):
			if c.respBuf, err = cql.AppendRead(c.respBuf[:0], r, n); err != nil {
				return err
			}
			frame = c.respBuf
		}

		// The response arrived when the read that completed it returned: one clock read per
		// read from the node, shared by every frame that read delivered. It is the response
		// time that tracing and statement statistics see, and the start of the added latency.
		if fill {
			arrived = 0
		}
		if arrived == 0 && (c.p.metrics != nil || req.stat.Active()) {
			arrived = tracing.Now()
		}
		out, done := c.response(h, frame, req, arrived)
		if done.Events() {
			c.doneQ = append(c.doneQ, done)
		}

		switch {
		case frame == nil:
			inc(&c.counters.bytesOut, uint64(n))
			err = c.toClient.copyFrame(r, n)
		default:
			inc(&c.counters.bytesOut, uint64(len(out)))
			err = c.toClient.write(out)
			if n <= r.Size() {
				r.Discard(n)
			} else if cap(c.respBuf) > maxKeptBuffer {
				c.respBuf = nil
			}
		}
		c.queued(req, arrived)
		drained := left == 0 && c.draining() && c.requestsStopped()
		if err == nil && (drained || !frameReady(r)) {
			if err = c.toClient.flush(); err == nil {
				c.wrote(c.doneQ, true)
				c.doneQ = c.doneQ[:0]
			}
		}
		if err != nil {
			if c.toClient.err != nil {
				return errClientGone
			}
			return err // the node went away in the middle of a frame
		}
		if drained {
			return nil
		}
	}
}

// isClosed reports whether err only says that a connection ended.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, errClientGone)
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
