// Package node is tracecar's embedded in-memory CQL node: a single-node Cassandra 4.1
// look-alike that speaks protocol v3, v4 and v5 (segments with CRCs, lz4 or not; the
// result metadata id of prepared statements), so that gocql, the DataStax Python driver
// and the Node.js driver run against it unchanged. It is the default target of the sidecar and
// the load checker, and the fixture of every end-to-end test.
//
// Server handles connections (handshake, auth, compression, tracing, write coalescing);
// Engine parses and executes CQL against sharded, sorted in-memory storage, including the
// system, system_schema, system_virtual_schema and system_traces tables drivers read.
package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/engine"
)

// Config configures a Server. The zero value serves an unauthenticated node.
type Config struct {
	// Auth, as "USER:PASS", turns on PasswordAuthenticator (SASL PLAIN) and, in the engine
	// Serve creates, roles and permissions (EngineConfig.Auth), USER being the first
	// superuser. Empty means no auth.
	Auth string
	// Logger is the "node" logger. At debug level it writes one line per request, which has
	// a real cost, as in CASSANDRA-14318. Nil means no logging.
	Logger *zerolog.Logger
	// ClusterName is reported in system.local. Empty means "Test Cluster".
	ClusterName string
	// TLS, when set, makes clients speak TLS: it must hold a certificate. A client that
	// fails the handshake is logged with the reason and disconnected. Nil means plaintext.
	TLS *tls.Config
	// Engine, when set, is an engine shared with the other nodes of a cluster (see Cluster),
	// and Node is this server's index among its EngineConfig.Nodes. Nil means an engine of
	// its own, created by Serve for the address it listens on.
	Engine *engine.Engine
	Node   int
	// MaxFrameSize is the largest frame, header included, accepted from a client, as
	// Cassandra's native_transport_max_frame_size; a larger one gets a ProtocolError on its
	// stream and the connection closes. Until STARTUP is answered (and, with Auth, until
	// AUTH_SUCCESS) the limit is cql.MaxStartupFrameSize. Zero means
	// cql.DefaultMaxFrameSize; it is capped at cql.MaxBodySize.
	MaxFrameSize int
	// MemoryLimit bounds, in bytes, the user tables' data of the engine Serve creates
	// (EngineConfig.MemoryLimit). Zero means no limit.
	MemoryLimit int64
	// ScyllaSupported makes OPTIONS answer with ScyllaDB's SUPPORTED keys as well
	// (ScyllaSupportedOptions), so that shard-aware drivers, and the sidecar's removal of
	// the shard-aware port, can be tested against the node.
	ScyllaSupported bool
	// MaxProtocolVersion is the highest protocol version the node speaks, 3 to 5; a client
	// offering a higher one gets Cassandra's ProtocolError and steps down. Zero means 5,
	// as Cassandra 4.1, and with ScyllaSupported 4, as ScyllaDB, which does not speak v5;
	// 4 makes the node a v4 one (ScyllaDB, Cassandra 3).
	MaxProtocolVersion byte
	// NoMaterializedViews refuses materialized views as a stock Cassandra 4.1 does
	// (EngineConfig.NoMaterializedViews); the zero value has them, as ScyllaDB.
	NoMaterializedViews bool
	// Shards, with ScyllaSupported, makes the node emulate ScyllaDB's sharding: each
	// connection belongs to one of Shards shards, reported in SUPPORTED as SCYLLA_SHARD; a
	// connection on the shard-aware port (ServeShardAware) gets the shard source port %
	// Shards, one on the ordinary port the shard with the fewest connections; and an EXECUTE
	// whose partition key another shard owns (biased-token-round-robin) is counted
	// (CrossShardRequests). Zero means ScyllaSupportedOptions' one shard and no
	// shard-aware port.
	Shards int
	// ScyllaOverride, with ScyllaSupported, is written over the SCYLLA_* keys of every
	// SUPPORTED (a nil value removes the key): for tests of how clients and the sidecar
	// take malformed ones. Nil changes nothing.
	ScyllaOverride map[string][]string
}

// Server is the embedded in-memory CQL node: a single-node Cassandra 4 look-alike speaking
// protocol v3, v4 and v5 (up to Config.MaxProtocolVersion). It is safe for concurrent use.
type Server struct {
	cfg    Config
	user   string
	pass   string
	engine *engine.Engine
	nop    zerolog.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	addr     netip.AddrPort
	prob     atomic.Uint64 // math.Float64bits of the node's trace probability
	requests atomic.Uint64
	accepted atomic.Uint64

	shardConns []atomic.Int64 // connections per shard, when Config.Shards > 0
	crossShard atomic.Uint64
	awarePort  atomic.Int32 // of ServeShardAware's listener
}

// PasswordAuthenticator is the authenticator class name sent in AUTHENTICATE.
const PasswordAuthenticator = "org.apache.cassandra.auth.PasswordAuthenticator"

// New returns a Server configured by cfg. The engine is created when Serve learns the
// listening address, so that system.local reports it.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, conns: make(map[*conn]struct{}), nop: zerolog.Nop()}
	if cfg.Shards > 0 {
		s.shardConns = make([]atomic.Int64, cfg.Shards)
	}
	if u, p, ok := strings.Cut(cfg.Auth, ":"); ok {
		s.user, s.pass = u, p
	}
	if cfg.Engine != nil {
		s.engine = cfg.Engine
		s.engine.OnSchemaChange(s.broadcastSchemaChange)
	}
	return s
}

// Engine returns the node's query engine, or nil before Serve has started.
func (s *Server) Engine() *engine.Engine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.engine
}

// Addr returns the address the node listens on, once Serve has started.
func (s *Server) Addr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// TraceProbability returns the share of requests the node traces on its own.
func (s *Server) TraceProbability() float64 { return math.Float64frombits(s.prob.Load()) }

// SetTraceProbability sets the share of requests the node traces on its own. It must be in [0,1].
func (s *Server) SetTraceProbability(p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("trace probability %v is not in [0,1]", p)
	}
	s.prob.Store(math.Float64bits(p))
	return nil
}

// Requests returns the number of requests served since start.
func (s *Server) Requests() uint64 { return s.requests.Load() }

// Accepted returns the number of client connections accepted since start.
func (s *Server) Accepted() uint64 { return s.accepted.Load() }

// maxFrame returns the largest frame, header included, accepted from an authenticated client.
func (s *Server) maxFrame() int {
	if n := s.cfg.MaxFrameSize; n > 0 {
		return min(n, cql.MaxBodySize)
	}
	return cql.DefaultMaxFrameSize
}

func (s *Server) logger() *zerolog.Logger {
	if s.cfg.Logger != nil {
		return s.cfg.Logger
	}
	return &s.nop
}

// Serve accepts connections on ln until ctx is done or ln fails, then closes every
// connection. It returns nil when ctx ended it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ap, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		return fmt.Errorf("node: listener address %s: %w", ln.Addr(), err)
	}
	s.mu.Lock()
	s.addr = ap
	if s.engine == nil {
		s.engine = engine.NewEngine(engine.EngineConfig{RPCAddr: ap, ClusterName: s.cfg.ClusterName, Auth: s.cfg.Auth,
			NoMaterializedViews: s.cfg.NoMaterializedViews, MemoryLimit: s.cfg.MemoryLimit})
		s.engine.OnSchemaChange(s.broadcastSchemaChange)
	}
	s.mu.Unlock()
	return s.serve(ctx, ln, false)
}

// ServeShardAware accepts connections on ln, the node's shard-aware port, until ctx is
// done: a connection from source port p belongs to shard p % Config.Shards, and SUPPORTED
// names ln's port as SCYLLA_SHARD_AWARE_PORT (SCYLLA_SHARD_AWARE_PORT_SSL with TLS). It
// needs Config.Shards and an engine: Config.Engine, or Serve started first.
func (s *Server) ServeShardAware(ctx context.Context, ln net.Listener) error {
	if s.cfg.Shards <= 0 {
		ln.Close()
		return errors.New("node: a shard-aware port needs Config.Shards")
	}
	ap, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		return fmt.Errorf("node: listener address %s: %w", ln.Addr(), err)
	}
	s.awarePort.Store(int32(ap.Port()))
	return s.serve(ctx, ln, true)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, aware bool) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer func() {
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("node: accept: %w", err)
		}
		s.accepted.Add(1)
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		c := newConn(s, s.wrapTLS(nc))
		s.mu.Lock()
		s.conns[c] = struct{}{}
		c.shard = s.assignShard(nc.RemoteAddr(), aware)
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			if s.shardConns != nil {
				s.shardConns[c.shard].Add(-1)
			}
			s.mu.Unlock()
		}()
	}
}

func (s *Server) broadcastSchemaChange(sc cql.SchemaChange) {
	s.broadcast(cql.Event{Type: cql.EventSchemaChange, Schema: sc})
}

// broadcast pushes ev to every connection that REGISTERed for its type.
func (s *Server) broadcast(ev cql.Event) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		if c.wants(ev.Type) {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.push(ev)
	}
}

// sample reports whether the node traces a request on its own.
func (s *Server) sample() bool {
	p := s.TraceProbability()
	return p > 0 && (p >= 1 || rand.Float64() < p)
}

// writer coalesces responses: frames are appended to a buffer and written in one syscall
// once the reader has no more buffered input, or when an event is pushed.
type writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
	// seg says that the frames go out as v5 segments (lz4 ones with lz4), pend holds the
	// frames of the segment being filled, sbuf the segments encoded (segments.go).
	seg, lz4   bool
	pend, sbuf []byte
}

func (w *writer) write(b []byte, flush bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.seg {
		w.err = w.writeSegments(b, flush)
		return w.err
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = err
		return err
	}
	if flush {
		w.err = w.w.Flush()
	}
	return w.err
}

func (w *writer) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

var _ io.Writer = (*bufio.Writer)(nil)
