// Package cqlconn is loadcheck's own CQL connection: many requests in flight at once by
// stream id, protocol v4 or v5 (in segments), compressed or not, over TCP or TLS, through
// tracecar's codec (internal/cql). The replay sends each captured request on it as it was
// sent, and the wire client its workloads' requests at v5, which gocql v1.7 does not
// speak. It knows nothing of workloads or runs.
package cqlconn

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// A replay sends each captured request as it was sent: a QUERY as a QUERY (with its
// consistency, page size and serial consistency), an EXECUTE as an EXECUTE, a BATCH as a
// BATCH. gocql would prepare every statement, so the replay speaks the protocol itself,
// through tracecar's codec: one connection carries many requests at once, by stream id.

// replayStreams bounds the requests in flight on one connection.
const replayStreams = 1024

// Conn is one connection. Its methods are safe for concurrent use.
type Conn struct {
	nc      net.Conn
	comp    cql.Compressor
	wmu     sync.Mutex
	free    chan int16
	waiters []chan Response
	done    chan struct{}
	errMu   sync.Mutex
	err     error
	buf     []byte // the frames queued for the writer, back to back, under wmu
	spare   []byte // the writer's other buffer, under wmu
	writing bool   // a request is writing the queue (the writer), under wmu
	timeout time.Duration
	// version is the protocol version of the connection's frames: V4, or V5, whose frames
	// travel in segments once STARTUP has been answered (framed, under wmu; the reader
	// switches when it delivers READY). v5 compresses segments, never frames.
	version byte
	framed  bool
	lz4     bool
	seg     []byte // the writer's segments, its own
	// metaIDs are the result metadata ids of the statements prepared on the connection, by
	// statement id (v5).
	metaMu  sync.RWMutex
	metaIDs map[string][]byte
}

// Response is a response: its header and its message (after the prefix), decompressed.
type Response struct {
	Header cql.Header
	// msg is the message after the response's prefix, but for a page of rows (rows set),
	// whose row count N and paging state State the reader takes, so that a page is not
	// copied.
	msg   []byte
	rows  bool
	N     int
	State []byte
}

// Options are how a connection is made: loadcheck's --tls, --timeout,
// --protocol-version (5, else v4) and --compression.
type Options struct {
	TLS             *tls.Config
	Timeout         time.Duration
	ProtocolVersion int
	Compression     string
}

// Dial opens a connection to addr and completes its handshake, compressed as opts say.
func Dial(ctx context.Context, o Options, addr string) (*Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("replay: connect to %s: %w", addr, err)
	}
	if o.TLS != nil {
		tc := o.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tn := tls.Client(nc, tc)
		if err := tn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("replay: TLS to %s: %w", addr, err)
		}
		nc = tn
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &Conn{nc: nc, free: make(chan int16, replayStreams),
		waiters: make([]chan Response, replayStreams), done: make(chan struct{}), timeout: o.Timeout, version: cql.V4}
	if o.ProtocolVersion == 5 {
		c.version = cql.V5
		c.lz4 = o.Compression == "lz4"
	}
	for i := range replayStreams {
		c.free <- int16(i)
		c.waiters[i] = make(chan Response, 1)
	}
	opts := map[string]string{"CQL_VERSION": "3.0.0"}
	switch o.Compression {
	case "lz4":
		opts["COMPRESSION"] = "lz4"
	case "snappy":
		opts["COMPRESSION"] = "snappy"
	}
	go c.read()
	r, err := c.Do(ctx, cql.OpStartup, cql.Startup{Options: opts}.AppendBody(nil, c.version), false)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("replay: STARTUP to %s: %w", addr, err)
	}
	switch r.Header.Opcode {
	case cql.OpReady:
	case cql.OpAuthenticate:
		c.Close()
		return nil, fmt.Errorf("replay: %s asks for authentication, which the replay does not do", addr)
	default:
		c.Close()
		return nil, fmt.Errorf("replay: STARTUP to %s: answered with %s", addr, r.Header.Opcode)
	}
	if c.version == cql.V5 {
		c.wmu.Lock()
		c.framed = true // from here on, every frame goes in segments, compressed there
		c.wmu.Unlock()
		return c, nil
	}
	c.comp = cql.CompressorByName(opts["COMPRESSION"])
	return c, nil
}

// Close closes the connection and waits for its reader.
func (c *Conn) Close() {
	c.nc.Close()
	<-c.done
}

func (c *Conn) fail(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.errMu.Unlock()
}

func (c *Conn) failure() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		return errors.New("replay connection closed")
	}
	return c.err
}

// read reads responses and hands each to the request waiting on its stream.
func (c *Conn) read() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var buf, dec []byte
	for {
		h, body, out, err := cql.ReadFrame(br, buf)
		buf = out
		if err != nil {
			c.fail(fmt.Errorf("replay connection: %w", err))
			c.nc.Close()
			return
		}
		if c.version == cql.V5 && h.Opcode == cql.OpReady {
			c.deliver(h, body)
			c.readSegments(br)
			return
		}
		if h.Stream < 0 || int(h.Stream) >= replayStreams {
			continue // events
		}
		if h.Flags&cql.FlagCompression != 0 && c.comp != nil {
			if dec, err = c.comp.Decompress(dec[:0], body); err != nil {
				c.fail(fmt.Errorf("replay connection: %w", err))
				c.nc.Close()
				return
			}
			body = dec
		}
		c.deliver(h, body)
	}
}

// flush sends the queued frames, called with wmu held by the request that found no writer
// at work, which becomes it: all the frames queued by then in one write (in segments on a
// v5 connection), then those queued during that write, until none are left, as the drivers
// coalesce, so that a busy connection costs the node one read for many requests, and a
// request costs no goroutine switch to a writer. It returns with wmu released.
func (c *Conn) flush() {
	c.writing = true
	for len(c.buf) > 0 {
		out := c.buf
		c.buf = c.spare[:0]
		framed := c.framed
		c.wmu.Unlock()
		w := out
		if framed {
			c.seg = cql.AppendSegments(c.seg[:0], out, c.lz4)
			w = c.seg
		}
		// A node that stops reading must not hold the writer past the requests' timeout:
		// the run would never end.
		err := c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
		if err == nil {
			_, err = c.nc.Write(w)
		}
		c.wmu.Lock()
		c.spare = out[:0]
		if err != nil {
			c.writing = false
			c.wmu.Unlock()
			c.fail(fmt.Errorf("replay: write: %w", err))
			c.nc.Close()
			return
		}
	}
	c.writing = false
	c.wmu.Unlock()
}

// voidResult is the message of every Void RESULT, which the requests only read.
var voidResult = [4]byte{0, 0, 0, 1}

// deliver hands a response to the request waiting on its stream.
func (c *Conn) deliver(h cql.Header, body []byte) {
	if h.Stream < 0 || int(h.Stream) >= replayStreams {
		return // events
	}
	msg, err := cql.SkipResponsePrefix(h.Flags, body)
	if err != nil {
		msg = nil
	}
	r := Response{Header: h}
	var resp cql.Response
	resp.Parse(h.Opcode, h.ProtoVersion(), msg)
	if resp.Rows >= 0 {
		r.N, r.State, r.rows = resp.Rows, bytes.Clone(resp.PagingState), true
	}
	switch {
	case r.rows:
	case resp.Kind == cql.ResultVoid && len(msg) == 4:
		r.msg = voidResult[:] // a write's answer: nothing to copy
	default:
		r.msg = append([]byte(nil), msg...)
	}
	select {
	case c.waiters[h.Stream] <- r:
	default: // a response nobody waits for (timed out)
	}
}

// readSegments reads the responses of a v5 connection after READY: segments, each
// carrying whole frames or a part of a large one.
func (c *Conn) readSegments(br *bufio.Reader) {
	sr := cql.SegmentReader{LZ4: c.lz4}
	var in []byte
	fail := func(err error) {
		c.fail(fmt.Errorf("replay connection: %w", err))
		c.nc.Close()
	}
	for {
		n, need, frames, err := sr.Next(in)
		if err != nil {
			fail(err)
			return
		}
		if n == 0 {
			want := max(need-len(in), 1)
			if need == 0 {
				want = max(sr.HeaderSize()-len(in), 1)
			}
			if in, err = cql.AppendRead(in, br, want); err != nil {
				fail(err)
				return
			}
			continue
		}
		for len(frames) >= cql.HeaderSize {
			h, err := cql.ParseHeader(frames)
			if err != nil {
				fail(err)
				return
			}
			end := cql.HeaderSize + int(h.Length)
			c.deliver(h, frames[cql.HeaderSize:end])
			frames = frames[end:]
		}
		in = append(in[:0], in[n:]...)
	}
}

// Do sends one request and waits for its response.
func (c *Conn) Do(ctx context.Context, op cql.Opcode, body []byte, compress bool) (Response, error) {
	var stream int16
	select {
	case stream = <-c.free:
	case <-c.done:
		return Response{}, c.failure()
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
	ch := c.waiters[stream]
	select { // a late response to an earlier, timed-out request on this stream
	case <-ch:
	default:
	}
	h := cql.Header{Version: c.version, Stream: stream, Opcode: op}
	c.wmu.Lock()
	start := len(c.buf)
	var err error
	if compress && c.comp != nil && !c.framed {
		h.Flags |= cql.FlagCompression
		c.buf = cql.AppendHeader(c.buf, h)
		var frame []byte
		frame, err = c.comp.Compress(c.buf, body)
		if err == nil {
			c.buf = frame
			cql.SetBodyLength(c.buf[start:], len(c.buf)-start-cql.HeaderSize)
		} else {
			c.buf = c.buf[:start]
		}
	} else {
		h.Length = uint32(len(body))
		c.buf = append(cql.AppendHeader(c.buf, h), body...)
	}
	switch {
	case err == nil && !c.writing:
		// Let the requests that are ready run first and queue theirs behind this one: on a
		// connection whose responses come in bursts, one write then carries several.
		c.writing = true
		c.wmu.Unlock()
		runtime.Gosched()
		c.wmu.Lock()
		c.flush() // releases wmu
	default:
		c.wmu.Unlock() // the writer at work sends the frame after the ones it is writing
	}
	if err != nil {
		c.free <- stream
		return Response{}, fmt.Errorf("replay: write: %w", err)
	}
	t := getTimer(c.timeout)
	defer putTimer(t)
	select {
	case r := <-ch:
		c.free <- stream
		return r, nil
	case <-c.done:
		return Response{}, c.failure()
	case <-t.C:
		// The stream stays out of use: a late answer would be taken for another's.
		return Response{}, fmt.Errorf("replay: no response within %v", c.timeout)
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

// Result reads a response: the rows of a RESULT, or the error of an ERROR.
func Result(r Response) (int, error) {
	switch r.Header.Opcode {
	case cql.OpResult:
		return r.N, nil
	case cql.OpError:
		e, err := cql.DecodeError(r.msg)
		if err != nil {
			return 0, fmt.Errorf("replay: undecodable error: %w", err)
		}
		return 0, e
	}
	return 0, fmt.Errorf("replay: unexpected %s", r.Header.Opcode)
}

// Query runs a statement as text, without values, at consistency ONE: the schema's and
// the preload's DDL.
func (c *Conn) Query(ctx context.Context, text string) error {
	body := cql.Query{Query: text, Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, c.version)
	r, err := c.Do(ctx, cql.OpQuery, body, true)
	if err != nil {
		return err
	}
	_, err = Result(r)
	return err
}

// Prepare prepares text and returns its id.
func (c *Conn) Prepare(ctx context.Context, text string) ([]byte, error) {
	r, err := c.Do(ctx, cql.OpPrepare, cql.Prepare{Query: text}.AppendBody(nil, c.version), true)
	if err != nil {
		return nil, err
	}
	if r.Header.Opcode == cql.OpError {
		_, err := Result(r)
		return nil, err
	}
	p, ok := cql.ReadPrepared(r.msg, c.version)
	if !ok {
		return nil, errors.New("replay: PREPARE answered without a statement id")
	}
	id := append([]byte(nil), p.ID...)
	if p.ResultMetadataID != nil {
		c.metaMu.Lock()
		if c.metaIDs == nil {
			c.metaIDs = map[string][]byte{}
		}
		c.metaIDs[string(id)] = append([]byte(nil), p.ResultMetadataID...)
		c.metaMu.Unlock()
	}
	return id, nil
}

// Version is the protocol version of the connection's frames.
func (c *Conn) Version() byte { return c.version }

// Execute returns the EXECUTE of the statement id with params, at the connection's
// version (from v5 with the statement's result metadata id).
func (c *Conn) Execute(dst, id []byte, params cql.QueryParams) []byte {
	e := cql.Execute{ID: id, Params: params}
	if c.version >= cql.V5 {
		c.metaMu.RLock()
		e.ResultMetadataID = c.metaIDs[string(id)]
		c.metaMu.RUnlock()
	}
	return e.AppendBody(dst, c.version)
}

// timers keeps the timers of the requests that ended, so that a request does not allocate
// one: a stopped timer's channel holds no stale value (Go 1.23), and Reset rearms it.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}
