// Package sidecar is tracecar's CQL proxy. It sits in front of one node: every client
// connection gets a connection of its own to the node, and frames go through as bytes, with
// their stream ids, so that authentication, USE, REGISTER, prepared statements and
// compression stay the client's own.
//
// The proxy decodes only what it must. It reads the version of a connection's first frame
// (to answer versions other than 3 and 4 as Cassandra does), the COMPRESSION option of
// STARTUP, and the text of QUERY and PREPARE requests and the id of EXECUTE requests, to
// find the queries on system.local, system.peers and system.peers_v2. Only the responses to
// those, and TOPOLOGY_CHANGE and STATUS_CHANGE events, are decoded and re-encoded, with the
// node's addresses replaced by the sidecar's, so that drivers never route around it.
//
// # Data paths
//
// A connection starts on its own goroutine, which answers unsupported protocol versions and
// dials the node. Then a plaintext TCP connection moves to an event loop (loop.go): a
// goroutine locked to an OS thread, around a level-triggered epoll set of non-blocking
// sockets, one loop per two of GOMAXPROCS (TRACECAR_EVENT_LOOPS=n overrides). A loop waits
// in a raw epoll_wait and keeps its P, so GOMAXPROCS grows by one per loop; reads and
// writes are raw system calls too, as they never block. Every ready socket is read into the loop's one buffer, every whole
// frame in it gets the per-frame work below and is appended to one output buffer, and that
// goes out in one write; what the peer does not take waits for EPOLLOUT, and the socket
// that fed it is not read until it is gone (backpressure). A frame larger than the read
// buffer is gathered on its own, in a buffer that grows as its bytes arrive, and a client's
// is charged to Config.MaxRequestDataInFlight as on the goroutine path (limits.go); frame
// limits, SUPPORTED filtering and statement statistics are per-frame work, the same on both
// paths. Connections that are not plain TCP (TLS: crypto/tls needs
// a net.Conn), and every connection when Config.NoEventLoop is set, take the goroutine path
// instead: one goroutine per direction, reading frames from one side and writing them to
// the other, flushing only when no whole frame is left in its input buffer, so frames that
// arrive together leave in one syscall there too.
//
// # Per-request work
//
// Both paths do the same work on each frame, through conn.request and conn.response:
// request inspects a request (STARTUP compression; OPTIONS; the AUTH_RESPONSE username;
// QUERY, PREPARE and EXECUTE of system tables by table reference, with the EXECUTE probe of
// statement.go; the text of a PREPARE), hands it to statement statistics
// (Config.Statements) and to tracing (tracing.Conn.Begin: one atomic load when tracing is
// off), records it in the connection's stream table with the Tickets of both, and counts
// it; the caller takes the record by stream id, and response notes the end of the
// handshake, hands the response to statement statistics and tracing (End, with the
// record's Ticket), learns a prepared statement from a RESULT Prepared into the one
// prepared-statement registry (shared with tracing), filters SUPPORTED, rewrites system
// tables and events, and records the latency. The stream table entry (inflight) is the one
// per-request record: tracing keeps none of its own. After the write that carried a
// traced frame, the path tells tracing (conn.wrote: Sent for requests, Done for
// responses); the frame writers know nothing of tracing. Each request is counted once, in
// the connection's counters, which the metrics and the tracer read (Proxy.Stats). Neither
// request nor response allocates with tracing off or in fast mode below the threshold
// (TestRequestPathAllocs); BenchmarkRequestPath measures them per mode.
//
// # Ending a connection
//
// On the event loop a connection ends in one place, loop.close, run on the loop: client
// EOF or error, a write error to the client, a drained connection with nothing in flight,
// and the last frames written (a ProtocolError for a malformed client frame; a Server
// error for each request in flight when the node connection fails, or cannot be written)
// all lead there, and it closes both sockets and releases the connection's goroutine in
// serve. Proxy.drain and closeAll from other goroutines post a command to the loop.
//
// On the goroutine path a connection is a state machine, conn.state, that only moves
// forward, by compare-and-swap, so that the frame loops read it with one atomic load:
//
//	open → draining → ending → closed
//
// Any state may be skipped: a connection ends without draining, and closeAll goes straight
// to closed.
//
//   - draining (conn.drain): the client's read deadline is set in the past, so the request
//     goroutine forwards what its reader holds and stops; the connection ends with cause
//     "drained" when the last request in flight is answered, seen by whichever goroutine
//     comes last (the request goroutine when nothing is in flight as it stops; else the
//     response goroutine once it answers the last one).
//   - ending (conn.stop, from either goroutine): the first cause stands; it is a client EOF
//     or read error, a malformed client frame (with its ProtocolError), a failed node read
//     (node lost) or write, a client write error, or drained. stop closes the node socket,
//     which ends the response goroutine's read and stops forwarding, and sets the client's
//     read deadline in the past, which ends the request goroutine's; the client's write
//     deadline is set to errWriteTimeout, so that no last frame waits on a client that does
//     not read.
//   - closed (conn.close, the one close path, on the response goroutine once the request
//     goroutine has stopped, so the set of requests in flight is final): it writes after
//     what is queued for the client what the cause calls for (the ProtocolError for a
//     malformed frame; a Server error for each request in flight when the node was lost or
//     could not be written), then closes both sockets. closeAll skips to closed at once.
//
// The cause is a field written under conn.mu rather than a context: the goroutines block
// in reads, which a context cannot interrupt, and each wakes from its socket (closed, or a
// deadline in the past) anyway. conn.mu also serialises these steps with setting the node
// socket and with the move to a loop (toLoop), so that drain and closeAll either act on the
// goroutine path or post to the loop; the loop sets closed in loop.close, and reads
// draining.
package sidecar

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// Defaults of Config.
const (
	DefaultDrainTimeout = 10 * time.Second
	DefaultDialTimeout  = 5 * time.Second

	// DefaultMaxRequestDataInFlight is the default of Config.MaxRequestDataInFlight.
	DefaultMaxRequestDataInFlight = 128 << 20
)

// Sizes of the per-connection buffers. A connection holds two readers and two writers of
// these sizes, plus a table of its requests in flight; frames larger than a reader's buffer
// are streamed through, or held in a scratch buffer when they must be read whole.
const (
	readBufferSize  = 16 << 10
	writeBufferSize = 16 << 10
)

// Config configures a Proxy. Only NodeAddr is required; the zero value of every other field
// selects its default.
type Config struct {
	// NodeAddr is the node's CQL address, host:port. Each client connection dials it.
	NodeAddr string
	// AdvertiseAddr is the address written into system.local's rpc_address (and its
	// native_port/rpc_port), and into events that name the node: an IP, or IP:port. Empty
	// means the local address of each client's connection; an IP without a port takes the
	// port of that local address.
	AdvertiseAddr string
	// PeerPort is the port written into peers' native_port and into events that name
	// other nodes, assuming a sidecar beside every node. Zero means the advertised port.
	PeerPort int
	// Peers maps other nodes' addresses to their sidecars' when the convention behind
	// PeerPort does not hold (see PeerMap). Nil means the convention.
	Peers *PeerMap
	// DrainTimeout bounds how long Serve waits, once its context is done, for in-flight
	// requests to be answered before it closes the connections. Zero means
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// DialTimeout bounds a dial to the node. Zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxFrameSize is the largest frame, header included, accepted from a client; a larger
	// one gets Cassandra's ProtocolError on its stream and closes the connection. Until the
	// handshake is done the limit is cql.MaxStartupFrameSize. Frames from the node are
	// bounded by cql.MaxBodySize only, as the node is trusted to honour its own limit.
	// Zero means cql.DefaultMaxFrameSize (16 MiB); more than cql.MaxBodySize is an error.
	MaxFrameSize int
	// MaxConnections bounds the client connections open at once; a connection accepted
	// beyond it is closed at once, and a warning is logged. Zero means no limit.
	MaxConnections int
	// MaxRequestDataInFlight bounds the bytes of the client frames that all connections
	// together hold whole (frames over 16 KiB that the proxy reads, not streams), as
	// Cassandra's native_transport_max_request_data_in_flight: a connection whose frame
	// does not fit waits, without reading, until others are forwarded. Zero means
	// DefaultMaxRequestDataInFlight; it is raised to MaxFrameSize if smaller.
	MaxRequestDataInFlight int
	// Logger is the "sidecar" logger: a debug line per request and a trace line per frame,
	// plus connection-level lines. Nil means no logging.
	Logger *zerolog.Logger
	// NoEventLoop keeps every connection on the goroutine path (two goroutines per
	// connection). By default plaintext TCP connections move to the event loop once open.
	NoEventLoop bool
	// Metrics receives per-request counts and latencies. Nil means none.
	Metrics Metrics
	// Statements receives each request and its response for per-statement statistics.
	// Nil means none.
	Statements StatementStats
	// TLS, when set, makes clients speak TLS to the proxy: it must hold a certificate, and
	// with ClientAuth set to tls.RequireAndVerifyClientCert and ClientCAs, clients must
	// present a certificate (mTLS). A client that fails the handshake, a plaintext one say,
	// is logged with the reason and disconnected. Nil means plaintext.
	TLS *tls.Config
	// NodeTLS, when set, makes the proxy speak TLS to the node, with this client
	// configuration (RootCAs, a client certificate). An empty ServerName is set to the
	// host of NodeAddr. Nil means plaintext.
	NodeTLS *tls.Config
}

// StatementStats is the data path's hook for per-statement statistics;
// *statements.Stats implements it. Its methods are called from every connection's
// goroutines at once. Enabled is one atomic load; Request is called for a PREPARE, and
// for any other request only while Enabled; Response is called for each response whose
// request's Ticket is active, at the point where the response is matched to its request.
type StatementStats interface {
	Enabled() bool
	// Request sees a request, through the view the proxy decoded it into, and its
	// arrival time (tracing.Now).
	Request(f *cql.Frame, now int64) statements.Ticket
	// Response sees the response, through its view, and its arrival time. It reads from
	// the view only what it needs.
	Response(t statements.Ticket, f *cql.Frame, now int64)
}

// Metrics is what the proxy reports per request. Its methods are called on the data path,
// from every connection's goroutines at once, so they must be safe for concurrent use,
// cheap, and allocation-free. *metrics.Metrics implements it.
type Metrics interface {
	// CountRequests sets where the requests series reads its counts by opcode: the
	// proxy's own request counter, so that the data path counts a request once.
	CountRequests(func() map[cql.Opcode]uint64)
	// Latency records the time from a request's arrival until its response was queued for
	// the client.
	Latency(op cql.Opcode, d time.Duration)
	// AddedLatency records the time a response spent in the sidecar itself: from the read
	// that brought it from the node until it was queued for the client.
	AddedLatency(d time.Duration)
	// ConnOpened and ConnClosed count client connections.
	ConnOpened()
	ConnClosed()
}

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
	cfg       Config
	tr        *tracing.Tracer
	log       *zerolog.Logger
	metrics   Metrics
	stmts     StatementStats
	maxFrame  uint32
	advertise netip.AddrPort // zero Addr: the client connection's local address
	cfgErr    error
	nodeTLS   *tls.Config // Config.NodeTLS with its ServerName set

	// dial opens a node connection; tests replace it.
	dial func(ctx context.Context) (net.Conn, error)

	mu      sync.Mutex
	conns   map[*conn]struct{}
	retired counts // counters of closed connections

	accepted     atomic.Uint64
	nodeFailures atomic.Uint64
	rejected     atomic.Uint64
	limitCounters
	held byteBudget // bytes of client frames held whole, see limits.go

	checked  checkedStmts               // prepared ids that read no system table
	prepared *tracing.Statements        // the prepared-statement registry, shared with tr
	nodeRPC  atomic.Pointer[netip.Addr] // the rpc_address the node reported
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
		cfg:      cfg,
		tr:       tr,
		log:      cfg.Logger,
		metrics:  cfg.Metrics,
		stmts:    cfg.Statements,
		maxFrame: uint32(cfg.MaxFrameSize),
		conns:    make(map[*conn]struct{}),
	}
	if p.log == nil {
		p.log = &nopLogger
	}
	p.held.init(int64(max(cmp.Or(cfg.MaxRequestDataInFlight, DefaultMaxRequestDataInFlight), cfg.MaxFrameSize)))
	// One request counter per connection, read by the metrics and the tracer.
	if p.metrics != nil {
		p.metrics.CountRequests(func() map[cql.Opcode]uint64 { return p.Stats().Requests })
	}
	if tr != nil {
		tr.CountRequests(func() uint64 { return p.Stats().TotalRequests() })
		p.prepared = tr.Statements()
	} else {
		p.prepared = tracing.NewStatements(tracing.DefaultPreparedSize)
	}
	switch {
	case cfg.NodeAddr == "":
		p.cfgErr = errors.New("sidecar: no node address")
	case cfg.MaxFrameSize < cql.HeaderSize || cfg.MaxFrameSize > cql.MaxBodySize:
		p.cfgErr = fmt.Errorf("sidecar: max frame size %d: want %d to %d bytes", cfg.MaxFrameSize, cql.HeaderSize, cql.MaxBodySize)
	case cfg.MaxRequestDataInFlight < 0:
		p.cfgErr = fmt.Errorf("sidecar: max request data in flight %d: want 0 (the default) or more", cfg.MaxRequestDataInFlight)
	case cfg.MaxConnections < 0:
		p.cfgErr = fmt.Errorf("sidecar: max connections %d: want 0 (no limit) or more", cfg.MaxConnections)
	case cfg.PeerPort < 0 || cfg.PeerPort > 65535:
		p.cfgErr = fmt.Errorf("sidecar: peer port %d: want 0 to 65535", cfg.PeerPort)
	}
	if cfg.AdvertiseAddr != "" && p.cfgErr == nil {
		p.advertise, p.cfgErr = parseAdvertise(cfg.AdvertiseAddr)
	}
	p.nodeTLS = nodeTLSConfig(cfg.NodeTLS, cfg.NodeAddr)
	if cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil && p.cfgErr == nil {
		p.cfgErr = errors.New("sidecar: client TLS configuration has no certificate")
	}
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

// parseAdvertise accepts an IP or an IP:port.
func parseAdvertise(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 0), nil
	}
	return netip.AddrPort{}, fmt.Errorf("sidecar: advertise address %q: want an IP or IP:port", s)
}

// Serve accepts client connections on ln and relays each to the node, until ctx is done or
// ln fails. It then stops accepting (closing ln), lets the requests in flight be answered
// for up to DrainTimeout, closes the connections that remain, and returns once all of its
// connections have ended: nil when ctx ended it, the accept error otherwise.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	if p.cfgErr != nil {
		ln.Close()
		return p.cfgErr
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	g := &group{}
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
				p.log.Warn().Err(aerr).Dur("retry_in", delay).Msg("accept")
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
		c := p.newConn(p.acceptTLS(nc), g)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			c.serve(ctx)
		}()
	}
	ln.Close()
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

// group is the set of connections accepted by one Serve call.
type group struct{ wg sync.WaitGroup }

// drain stops the connections of g from reading new requests, waits up to DrainTimeout for
// their requests in flight, then closes what remains and waits for it to end.
func (p *Proxy) drain(g *group) {
	conns := p.connsOf(g)
	if len(conns) > 0 {
		p.log.Info().Int("connections", len(conns)).Dur("timeout", p.cfg.DrainTimeout).Msg("draining")
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
	p.log.Warn().Int("connections", len(conns)).Msg("drain timeout: closing connections with requests in flight")
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

// Stats returns the proxy's counters. It is safe for concurrent use.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	sum := p.retired
	n := len(p.conns)
	for c := range p.conns {
		c.counters.addTo(&sum)
	}
	p.mu.Unlock()
	st := Stats{
		Connections:      n,
		Accepted:         p.accepted.Load(),
		NodeFailures:     p.nodeFailures.Load(),
		Rejected:         p.rejected.Load(),
		Refused:          p.refused.Load(),
		TooBig:           p.tooBig.Load(),
		Requests:         make(map[cql.Opcode]uint64),
		Responses:        sum.responses,
		Rewritten:        sum.rewritten,
		BytesFromClients: sum.bytesIn,
		BytesToClients:   sum.bytesOut,
	}
	for op, v := range sum.requests {
		if v != 0 {
			st.Requests[cql.Opcode(op)] = v
		}
	}
	return st
}

// connCounters are the counters of one connection. Each is written by one goroutine only,
// with a load and a store rather than a locked add, and read by Stats.
type connCounters struct {
	requests  [32]atomic.Uint64 // by opcode; opcodes above 31 count as 31
	bytesIn   atomic.Uint64     // request bytes read from the client
	responses atomic.Uint64
	rewritten atomic.Uint64
	bytesOut  atomic.Uint64 // response bytes written to the client
}

// counts are summed connCounters.
type counts struct {
	requests                                [32]uint64
	bytesIn, responses, rewritten, bytesOut uint64
}

func inc(v *atomic.Uint64, n uint64) { v.Store(v.Load() + n) }

func (c *connCounters) addTo(sum *counts) {
	for i := range c.requests {
		sum.requests[i] += c.requests[i].Load()
	}
	sum.bytesIn += c.bytesIn.Load()
	sum.responses += c.responses.Load()
	sum.rewritten += c.rewritten.Load()
	sum.bytesOut += c.bytesOut.Load()
}

// register adds c to the live connections.
func (p *Proxy) register(c *conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	p.accepted.Add(1)
	if p.metrics != nil {
		p.metrics.ConnOpened()
	}
}

// unregister moves c's counters to the totals.
func (p *Proxy) unregister(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	c.counters.addTo(&p.retired)
	p.mu.Unlock()
	if p.metrics != nil {
		p.metrics.ConnClosed()
	}
}

// now returns monotonic nanoseconds since New.
