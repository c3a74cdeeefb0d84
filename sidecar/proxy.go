package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

var nopLogger = zerolog.Nop()

// New returns a Proxy for cfg. A nil tr means no tracing. Configuration errors are
// reported by Serve.
func New(cfg Config, tr *tracing.Tracer) *Proxy {
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxFrameSize == 0 {
		cfg.MaxFrameSize = cql.DefaultMaxFrameSize
	}
	p := &Proxy{
		env:   connEnv{cfg: cfg, noLoop: cfg.NoEventLoop || eventLoopOff(), lastWrite: errWriteTimeout},
		loops: &processLoops,
		conns: make(map[*conn]struct{}),
	}
	p.env.forget = p.unregister
	advertise, err := cfg.check()
	p.cfgErr = err
	p.env.sh = pipeline.NewShared(pipeline.Settings{
		Tracer:     tr,
		Log:        cmp.Or(cfg.Logger, &nopLogger),
		LogGate:    cfg.LogGate,
		Metrics:    cfg.Metrics,
		Statements: cfg.Statements,
		Capture:    cfg.Capture,
		Audit:      cfg.Audit,
		Peers:      cfg.Peers,
		MaxFrame:   uint32(cfg.MaxFrameSize),
		Advertise:  advertise,
		PeerPort:   uint16(cfg.PeerPort),
	})
	p.env.sh.LearnSharding = p.learnSharding
	p.shards.auto = make(chan net.Listener, 1)
	p.env.held.init(int64(max(cmp.Or(cfg.MaxRequestDataInFlight, DefaultMaxRequestDataInFlight), cfg.MaxFrameSize)))
	// One request counter per connection, read by the metrics and the tracer.
	if m := p.env.sh.Metrics; m != nil {
		m.CountRequests(func() map[cql.Opcode]uint64 { return p.Stats().Requests })
	}
	if tr != nil {
		tr.CountRequests(func() uint64 { return p.Stats().TotalRequests() })
	}
	p.env.nodeTLS = nodeTLSConfig(cfg.NodeTLS, cfg.NodeAddr)
	d := net.Dialer{Timeout: cfg.DialTimeout}
	p.env.dial = func(ctx context.Context) (net.Conn, error) {
		nc, err := d.DialContext(ctx, "tcp", cfg.NodeAddr)
		if err != nil || p.env.nodeTLS == nil {
			return nc, err
		}
		return p.env.dialTLS(ctx, nc)
	}
	return p
}

// Serve accepts client connections on ln and relays each to the node, until ctx is done or
// ln fails. It then stops accepting (closing ln), lets the requests in flight be answered
// for up to DrainTimeout, closes the connections that remain, and returns once all of its
// connections have ended: nil when ctx ended it, the accept error otherwise.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	return p.serve(ctx, ln, false)
}

// serve is Serve, for the shard-aware port when aware (ServeShardAware).
func (p *Proxy) serve(ctx context.Context, ln net.Listener, aware bool) error {
	if p.cfgErr != nil {
		ln.Close()
		return p.cfgErr
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !aware {
		p.shards.ordinaryPort.Store(int32(ta.Port))
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	g := &group{aware: aware}
	if !aware {
		p.setServing(g)
	}
	if !p.env.noLoop && p.env.nodeTLS == nil {
		p.loops.start() // an error is reported with each connection that falls back (toLoop)
	}
	var err error
	var delay time.Duration
	for {
		nc, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() != nil {
				break
			}
			if retryAccept(aerr) {
				// Out of file descriptors, or a transient failure: back off as net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				p.env.sh.Log.Warn().Err(aerr).Dur("retry_in", delay).Msg("accept")
				if sleep(ctx, delay) {
					continue
				}
				break
			}
			err = fmt.Errorf("sidecar: accept: %w", aerr)
			break
		}
		delay = 0
		if p.refuse(nc) {
			continue
		}
		p.accepted.Add(1)
		c := p.newConn(p.env.acceptTLS(nc), g, aware)
		g.wg.Add(1) // done by retire
		go p.serveConn(ctx, c)
	}
	ln.Close()
	if !aware {
		p.setServing(nil)
	}
	p.drain(g)
	return err
}

// retryAccept reports whether an accept error may go away by itself.
func retryAccept(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// sleep waits for d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// drain stops the connections of g from reading new requests, waits up to DrainTimeout for
// their requests in flight, then closes what remains and waits for it to end.
func (p *Proxy) drain(g *group) {
	conns := p.connsOf(g)
	if len(conns) > 0 {
		p.env.sh.Log.Info().Int("connections", len(conns)).Dur("timeout", p.env.cfg.DrainTimeout).Msg("draining")
	}
	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(p.env.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	conns = p.connsOf(g)
	p.env.sh.Log.Warn().Int("connections", len(conns)).Msg("drain timeout: closing connections with requests in flight")
	for _, c := range conns {
		c.closeAll()
	}
	<-done
}

// refuseLogEvery spaces the log lines about refused connections.
const refuseLogEvery = 10 * time.Second

// refuse closes nc, just accepted, when MaxConnections connections are open, and reports
// whether it did. As Cassandra's ConnectionLimitHandler does, the client gets nothing but
// the close; a driver then tries another host or retries later. The first refusal is
// logged at once, later ones once per refuseLogEvery with their count.
func (p *Proxy) refuse(nc net.Conn) bool {
	if p.env.cfg.MaxConnections <= 0 {
		return false
	}
	p.mu.Lock()
	open := len(p.conns)
	p.mu.Unlock()
	if open < p.env.cfg.MaxConnections {
		return false
	}
	p.refused.Add(1) // before the close, which the client sees
	n := p.refusedUnlogged.Add(1)
	now := time.Now().UnixNano()
	if last := p.refusedLogged.Load(); now-last >= int64(refuseLogEvery) && p.refusedLogged.CompareAndSwap(last, now) {
		p.refusedUnlogged.Add(-n)
		p.env.sh.Log.Warn().Int("max_connections", p.env.cfg.MaxConnections).Int("open", open).Int64("refused", n).
			Str("client", nc.RemoteAddr().String()).
			Msg("connection limit reached (--max-connections): closing new client connections until some end")
	}
	nc.Close()
	return true
}

// ServeShardAware is Serve for the proxy's shard-aware port: a connection accepted on ln
// from source port p gets a node connection on the node's shard-aware port from a local
// port q with q % nr_shards == p % nr_shards, and so the shard it asked for. When the node
// does not shard, or says so in a way the proxy cannot use, or no such local port is free,
// the connection gets an ordinary node connection: the reason is logged and counted
// (ShardStats.Fallbacks), and the connection works as one on the ordinary port. SUPPORTED
// names ln's port as the shard-aware port (SCYLLA_SHARD_AWARE_PORT_SSL with Config.TLS).
func (p *Proxy) ServeShardAware(ctx context.Context, ln net.Listener) error {
	p.AdvertiseShardAware(ln)
	return p.serve(ctx, ln, true)
}

// AdvertiseShardAware names ln's port as the shard-aware port in the SUPPORTED answers
// from now on, as ServeShardAware does when it starts. A caller that serves ln on its own
// goroutine calls it first, so that no client connecting in between misses the port.
func (p *Proxy) AdvertiseShardAware(ln net.Listener) {
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		p.env.sh.SetShardAwarePort(ta.Port, p.env.cfg.TLS != nil)
	}
}

// ServeShardAwareAuto serves the shard-aware port that Config.ShardAwareHost asks for,
// once the proxy has learnt the node's shard-aware port from a SUPPORTED that a client's
// OPTIONS brought, until ctx is done. It returns nil when ctx ends before any port was
// learnt (or without Config.ShardAwareHost, when ctx ends).
func (p *Proxy) ServeShardAwareAuto(ctx context.Context) error {
	if p.env.cfg.ShardAwareHost == "" {
		<-ctx.Done() // an actor of a group that ends with the first to return
		return nil
	}
	select {
	case ln := <-p.shards.auto:
		return p.ServeShardAware(ctx, ln)
	case <-ctx.Done():
		return nil
	}
}
