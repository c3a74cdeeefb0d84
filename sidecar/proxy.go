package sidecar

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tracecar/tracecar/sidecar/pipeline"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// Stats are a Proxy's counters since New.
type Stats struct {
	// Connections is the number of client connections open now.
	Connections int
	// Accepted counts the client connections accepted.
	Accepted uint64
	// NodeFailures counts client connections closed because their node connection failed
	// or could not be opened.
	NodeFailures uint64
	// Requests counts the requests forwarded to the node, by opcode.
	Requests map[cql.Opcode]uint64
	// Responses counts the frames forwarded from the node to clients, events included.
	Responses uint64
	// Rewritten counts the responses and events whose addresses were rewritten.
	Rewritten uint64
	// Rejected counts the frames answered with a ProtocolError for their version.
	Rejected uint64
	// Refused counts the connections closed because MaxConnections were open.
	Refused uint64
	// TooBig counts the frames refused for their size (see Config.MaxFrameSize).
	TooBig uint64
	// Bytes forwarded each way, counted on the client side.
	BytesFromClients, BytesToClients uint64
	// Segments counts the protocol v5 segments read, from clients and from the node;
	// Resegmented those not forwarded as they came: a frame in them changed (they got a
	// fresh CRC, or their frames were segmented again), or they ended a frame larger than
	// a segment, which is segmented again whole.
	Segments, Resegmented uint64
}

// TotalRequests returns the sum of Requests.
func (s Stats) TotalRequests() uint64 {
	var n uint64
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Proxy relays CQL connections to one node. Create it with New and run it with Serve. A
// Proxy is safe for concurrent use.
type Proxy struct {
	cfg Config
	// sh is what the pipelines of the proxy's connections share: the tracer, statement
	// statistics, the capture, the metrics and the logger, the limits and addresses, and
	// what the proxy learns from the node for every connection (sidecar/pipeline).
	sh      *pipeline.Shared
	cfgErr  error
	nodeTLS *tls.Config // Config.NodeTLS with its ServerName set
	noLoop  bool        // Config.NoEventLoop, or TRACECAR_EVENT_LOOP=off
	loops   *loopGroup  // the event loops: the process's (processLoops)

	// dial opens a node connection; tests replace it.
	dial func(ctx context.Context) (net.Conn, error)

	mu      sync.Mutex
	conns   map[*conn]struct{}
	retired pipeline.Counts // counters of closed connections
	serving *group          // the group of the Serve call running, for adopted connections

	accepted     atomic.Uint64
	adopted      atomic.Uint64 // connections handed over by an old process (handover.go)
	nodeFailures atomic.Uint64
	rejected     atomic.Uint64
	limitCounters
	held byteBudget // bytes of client frames held whole, see limits.go
	// shards is the state of ScyllaDB's shard-awareness (shards.go).
	shards shardProxy
}

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
		cfg:    cfg,
		noLoop: cfg.NoEventLoop || eventLoopOff(),
		loops:  &processLoops,
		conns:  make(map[*conn]struct{}),
	}
	advertise, err := cfg.check()
	p.cfgErr = err
	p.sh = pipeline.NewShared(pipeline.Settings{
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
	p.sh.LearnSharding = p.learnSharding
	p.shards.auto = make(chan net.Listener, 1)
	p.held.init(int64(max(cmp.Or(cfg.MaxRequestDataInFlight, DefaultMaxRequestDataInFlight), cfg.MaxFrameSize)))
	// One request counter per connection, read by the metrics and the tracer.
	if m := p.sh.Metrics; m != nil {
		m.CountRequests(func() map[cql.Opcode]uint64 { return p.Stats().Requests })
	}
	if tr != nil {
		tr.CountRequests(func() uint64 { return p.Stats().TotalRequests() })
	}
	p.nodeTLS = nodeTLSConfig(cfg.NodeTLS, cfg.NodeAddr)
	d := net.Dialer{Timeout: cfg.DialTimeout}
	p.dial = func(ctx context.Context) (net.Conn, error) {
		nc, err := d.DialContext(ctx, "tcp", cfg.NodeAddr)
		if err != nil || p.nodeTLS == nil {
			return nc, err
		}
		return p.dialTLS(ctx, nc)
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
	if !p.noLoop && p.nodeTLS == nil {
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
				p.sh.Log.Warn().Err(aerr).Dur("retry_in", delay).Msg("accept")
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
		c := p.newConn(p.acceptTLS(nc), g, aware)
		g.wg.Add(1) // done by retire
		go c.serve(ctx)
	}
	ln.Close()
	if !aware {
		p.setServing(nil)
	}
	p.drain(g)
	return err
}

// setServing records the group of the Serve call running, which adopted connections join
// (Adopt), or nil once it stops accepting.
func (p *Proxy) setServing(g *group) {
	p.mu.Lock()
	p.serving = g
	p.mu.Unlock()
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

// group is the set of connections accepted by one Serve call.
type group struct {
	wg sync.WaitGroup
	// aware says it is ServeShardAware's, whose connections get a node connection on the
	// shard they ask for (shards.go); a connection learns it from its group, which costs
	// it no field of its own.
	aware bool
}

// drain stops the connections of g from reading new requests, waits up to DrainTimeout for
// their requests in flight, then closes what remains and waits for it to end.
func (p *Proxy) drain(g *group) {
	conns := p.connsOf(g)
	if len(conns) > 0 {
		p.sh.Log.Info().Int("connections", len(conns)).Dur("timeout", p.cfg.DrainTimeout).Msg("draining")
	}
	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(p.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	conns = p.connsOf(g)
	p.sh.Log.Warn().Int("connections", len(conns)).Msg("drain timeout: closing connections with requests in flight")
	for _, c := range conns {
		c.closeAll()
	}
	<-done
}

func (p *Proxy) connsOf(g *group) []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cs []*conn
	for c := range p.conns {
		if c.group == g {
			cs = append(cs, c)
		}
	}
	return cs
}

// logs reports whether lines at lvl may be written: false when Config.LogGate says that
// they are off, true without a gate (zerolog decides). It is inlined.
func (p *Proxy) logs(lvl zerolog.Level) bool { return p.sh.Logs(lvl) }

// Stats returns the proxy's counters. It is safe for concurrent use.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	sum := p.retired
	n := len(p.conns)
	for c := range p.conns {
		c.Counters.AddTo(&sum)
	}
	p.mu.Unlock()
	st := Stats{
		Connections:      n,
		Accepted:         p.accepted.Load(),
		NodeFailures:     p.nodeFailures.Load(),
		Rejected:         p.rejected.Load(),
		Refused:          p.refused.Load(),
		TooBig:           p.sh.TooBig.Load(),
		Requests:         make(map[cql.Opcode]uint64),
		Responses:        sum.Responses,
		Rewritten:        sum.Rewritten,
		BytesFromClients: sum.BytesIn,
		BytesToClients:   sum.BytesOut,
		Segments:         sum.Segments[0] + sum.Segments[1],
		Resegmented:      sum.Resegmented[0] + sum.Resegmented[1],
	}
	for op, v := range sum.Requests {
		if v != 0 {
			st.Requests[cql.Opcode(op)] = v
		}
	}
	return st
}

// register adds c to the live connections.
func (p *Proxy) register(c *conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	if p.sh.Metrics != nil {
		p.sh.Metrics.ConnOpened()
	}
}

// unregister moves c's counters to the totals.
func (p *Proxy) unregister(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	c.Counters.AddTo(&p.retired)
	p.retireShard(c)
	p.mu.Unlock()
	if p.sh.Metrics != nil {
		p.sh.Metrics.ConnClosed()
	}
}
