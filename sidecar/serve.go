package sidecar

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"
	"github.com/tracecar/tracecar/internal/cql"
)

// A connection's start (see "Layers" in the package doc): made for an accepted socket
// (newConn), then the version gate and the node dial (openConn), then the dispatch to a
// transport (serveConn): the event loop when it can take the connection, else the
// goroutine path.

// newConn makes a connection of client socket nc in group g; aware says it came on the
// shard-aware port, so that it advertises the ordinary one.
func (p *Proxy) newConn(nc net.Conn, g *group, aware bool) *conn {
	setNoDelay(nc)
	c := &conn{
		p:      &p.env,
		group:  g,
		client: nc,
	}
	// A connection bound for an event loop uses its own reader and writer only for the
	// version gate: small ones, or 1,000 connections would leave 32 MiB of garbage behind.
	size := readBufferSize
	if p.env.loopBound(nc) {
		size = gateBufferSize
	}
	c.cr, c.toClient = newFrameReader(nc, size), newFrameWriter(nc, size)
	c.pipe.Init(p.env.sh, addrPort(nc.RemoteAddr()), p.advertisedLocal(nc, aware), p.env.sh.Log.GetLevel() <= zerolog.TraceLevel)
	p.register(c)
	return c
}

// serveConn runs connection c: the version gate and the node dial, then the transport, an
// event loop when the connection can move to one, else the goroutine path. On the goroutine
// path it returns once the connection is closed; a connection on a loop is the loop's, and
// serveConn returns at once, so that an idle connection there costs no goroutine stack: the
// loop retires it when it closes it.
func (p *Proxy) serveConn(ctx context.Context, c *conn) {
	if err := p.openConn(ctx, c); err != nil {
		if !isClosed(err) {
			c.pipe.Debug().Err(err).Msg("connection not opened")
		}
		c.closeAll()
		c.retire()
		return
	}
	if !p.env.noLoop && c.toLoop(p.loops) {
		return
	}
	runGoroutines(c)
}

// openConn answers c's frames of unsupported versions until one of version 3, 4 or 5 (up to
// Config.MaxProtocolVersion) arrives, then dials the node. On error the client has been
// answered as well as it could be.
func (p *Proxy) openConn(ctx context.Context, c *conn) error {
	for {
		b, err := c.cr.Peek(1)
		if err != nil {
			return err
		}
		v := b[0]
		if p.env.speaks(v) {
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
		nc, err = p.dialShard(ctx, c)
	} else {
		nc, err = p.env.dial(ctx)
	}
	if err != nil {
		err = fmt.Errorf("connect to node %s: %w", p.env.cfg.NodeAddr, err)
		p.env.nodeFailures.Add(1)
		c.pipe.Warn().Err(err).Msg("node unreachable")
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
	c.pipe.NodeAddr = addrPort(nc.RemoteAddr())
	c.pipe.Debug().Str("node", c.pipe.NodeAddr.String()).Uint8("version", c.pipe.Version).Msg("connection opened")
	return nil
}

// gateBufferSize is the size of the client reader and writer of a connection bound for an
// event loop: they hold the first frames until the move (an OPTIONS or a STARTUP, or a
// frame of a version to refuse); a larger first frame is still read whole.
const gateBufferSize = 1 << 10
