package loadcheck

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// A replay sends each captured request as it was sent: a QUERY as a QUERY (with its
// consistency, page size and serial consistency), an EXECUTE as an EXECUTE, a BATCH as a
// BATCH. gocql would prepare every statement, so the replay speaks the protocol itself,
// through tracecar's codec: one connection carries many requests at once, by stream id.

// replayStreams bounds the requests in flight on one replay connection.
const replayStreams = 1024

// rconn is one replay connection. Its methods are safe for concurrent use.
type rconn struct {
	nc      net.Conn
	comp    cql.Compressor
	wmu     sync.Mutex
	bw      *bufio.Writer
	free    chan int16
	waiters []chan rresp
	done    chan struct{}
	errMu   sync.Mutex
	err     error
	buf     []byte // the writer's frame, under wmu
	timeout time.Duration
}

// rresp is a response: its header and its message (after the prefix), decompressed.
type rresp struct {
	h   cql.Header
	msg []byte
}

// dialReplay opens a replay connection to addr and completes its handshake, compressed as
// cfg says.
func dialReplay(ctx context.Context, cfg *Config, addr string) (*rconn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("replay: connect to %s: %w", addr, err)
	}
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
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
	c := &rconn{nc: nc, bw: bufio.NewWriterSize(nc, 64<<10), free: make(chan int16, replayStreams),
		waiters: make([]chan rresp, replayStreams), done: make(chan struct{}), timeout: cfg.Timeout}
	for i := range replayStreams {
		c.free <- int16(i)
		c.waiters[i] = make(chan rresp, 1)
	}
	opts := map[string]string{"CQL_VERSION": "3.0.0"}
	switch cfg.Compression {
	case "lz4":
		opts["COMPRESSION"] = "lz4"
	case "snappy":
		opts["COMPRESSION"] = "snappy"
	}
	go c.read()
	r, err := c.do(ctx, cql.OpStartup, cql.Startup{Options: opts}.AppendBody(nil, cql.V4), false)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("replay: STARTUP to %s: %w", addr, err)
	}
	switch r.h.Opcode {
	case cql.OpReady:
	case cql.OpAuthenticate:
		c.close()
		return nil, fmt.Errorf("replay: %s asks for authentication, which the replay does not do", addr)
	default:
		c.close()
		return nil, fmt.Errorf("replay: STARTUP to %s: answered with %s", addr, r.h.Opcode)
	}
	c.comp = cql.CompressorByName(opts["COMPRESSION"])
	return c, nil
}

func (c *rconn) close() {
	c.nc.Close()
	<-c.done
}

func (c *rconn) fail(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.errMu.Unlock()
}

func (c *rconn) failure() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		return errors.New("replay connection closed")
	}
	return c.err
}

// read reads responses and hands each to the request waiting on its stream.
func (c *rconn) read() {
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
		msg, err := cql.SkipResponsePrefix(h.Flags, body)
		if err != nil {
			msg = nil
		}
		select {
		case c.waiters[h.Stream] <- rresp{h: h, msg: append([]byte(nil), msg...)}:
		default: // a response nobody waits for (timed out)
		}
	}
}

// do sends one request and waits for its response.
func (c *rconn) do(ctx context.Context, op cql.Opcode, body []byte, compress bool) (rresp, error) {
	var stream int16
	select {
	case stream = <-c.free:
	case <-c.done:
		return rresp{}, c.failure()
	case <-ctx.Done():
		return rresp{}, ctx.Err()
	}
	ch := c.waiters[stream]
	select { // a late response to an earlier, timed-out request on this stream
	case <-ch:
	default:
	}
	h := cql.Header{Version: cql.V4, Stream: stream, Opcode: op}
	c.wmu.Lock()
	frame := c.buf[:0]
	var err error
	if compress && c.comp != nil {
		h.Flags |= cql.FlagCompression
		frame = cql.AppendHeader(frame, h)
		frame, err = c.comp.Compress(frame, body)
		cql.SetBodyLength(frame, len(frame)-cql.HeaderSize)
	} else {
		h.Length = uint32(len(body))
		frame = append(cql.AppendHeader(frame, h), body...)
	}
	if err == nil {
		_, err = c.bw.Write(frame)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.buf = frame
	c.wmu.Unlock()
	if err != nil {
		c.free <- stream
		return rresp{}, fmt.Errorf("replay: write: %w", err)
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		c.free <- stream
		return r, nil
	case <-c.done:
		return rresp{}, c.failure()
	case <-t.C:
		// The stream stays out of use: a late answer would be taken for another's.
		return rresp{}, fmt.Errorf("replay: no response within %v", c.timeout)
	case <-ctx.Done():
		return rresp{}, ctx.Err()
	}
}

// result reads a response: the rows of a RESULT, or the error of an ERROR.
func result(r rresp) (int, error) {
	switch r.h.Opcode {
	case cql.OpResult:
		if n, ok := cql.RowsCount(r.msg); ok {
			return n, nil
		}
		return 0, nil
	case cql.OpError:
		e, err := cql.DecodeError(r.msg)
		if err != nil {
			return 0, fmt.Errorf("replay: undecodable error: %w", err)
		}
		return 0, e
	}
	return 0, fmt.Errorf("replay: unexpected %s", r.h.Opcode)
}

// query runs a statement as text, without values, at consistency ONE: the schema's and
// the preload's DDL.
func (c *rconn) query(ctx context.Context, text string) error {
	body := cql.Query{Query: text, Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, cql.V4)
	r, err := c.do(ctx, cql.OpQuery, body, true)
	if err != nil {
		return err
	}
	_, err = result(r)
	return err
}

// prepare prepares text and returns its id.
func (c *rconn) prepare(ctx context.Context, text string) ([]byte, error) {
	r, err := c.do(ctx, cql.OpPrepare, cql.Prepare{Query: text}.AppendBody(nil, cql.V4), true)
	if err != nil {
		return nil, err
	}
	if r.h.Opcode == cql.OpError {
		_, err := result(r)
		return nil, err
	}
	p, ok := cql.ReadPrepared(r.msg, cql.V4)
	if !ok {
		return nil, errors.New("replay: PREPARE answered without a statement id")
	}
	return append([]byte(nil), p.ID...), nil
}
