// Package node is tracecar's embedded in-memory CQL node: a single-node Cassandra 4.1
// look-alike that speaks protocol v3, v4 and v5 (segments with CRCs, lz4 or not; the
// result metadata id of prepared statements), so that gocql, the DataStax Python driver
// and the Node.js driver run against it unchanged. It is the default target of the sidecar and
// the load checker, and the fixture of every end-to-end test.
//
// Server handles connections (handshake, auth, compression, tracing, write coalescing);
// Engine parses and executes CQL against sharded, sorted in-memory storage, including the
// system, system_schema, system_virtual_schema and system_traces tables drivers read.
//
// The files, from the ground up (ci.TestNodeFilesPointDown): writer.go and segments.go, a
// connection's writing and its v5 segment reader; server.go, the Server and conn types and
// their state; shards.go (ScyllaDB's sharding, emulated) and tls.go; conn.go, a
// connection's frames and requests; events.go, the events pushed to connections; serve.go,
// New and the listeners; cluster.go, several nodes on one engine.
package node

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

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

// sample reports whether the node traces a request on its own.
func (s *Server) sample() bool {
	p := s.TraceProbability()
	return p > 0 && (p >= 1 || rand.Float64() < p)
}

// maxVersion returns the highest protocol version the node speaks: v4 for an emulated
// ScyllaDB node, which does not speak v5, unless told otherwise.
func (s *Server) maxVersion() byte {
	if v := s.cfg.MaxProtocolVersion; v >= cql.V3 && v < cql.MaxVersion {
		return v
	}
	if s.cfg.ScyllaSupported && s.cfg.MaxProtocolVersion == 0 {
		return cql.V4
	}
	return cql.MaxVersion
}

// speaks reports whether the node speaks protocol version v (without the response bit).
func (s *Server) speaks(v byte) bool { return v >= cql.V3 && v <= s.maxVersion() }

// protocolVersions is the PROTOCOL_VERSIONS of SUPPORTED: as Cassandra 4.1 lists them, v5
// no longer in beta, up to the node's highest.
func (s *Server) protocolVersions() []string {
	all := []string{"3/v3", "4/v4", "5/v5"}
	return all[:s.maxVersion()-cql.V3+1]
}

// conn serves one client connection. Requests are handled in order on the reading
// goroutine; responses are coalesced and flushed when no more input is buffered. It is
// declared with Server, since each holds the other; its methods are in conn.go.
type conn struct {
	s  *Server
	nc net.Conn
	br *bufio.Reader
	w  writer

	version byte
	comp    cql.Compressor // of frame bodies: never in v5, which compresses segments
	ready   bool           // STARTUP done and, with auth on, authenticated
	started bool           // STARTUP received
	sess    engine.Session
	// seg is the segment reader of a v5 connection once its handshake is done; nil before
	// and on v3 and v4. segments says that the answer to STARTUP being written is the last
	// unframed frame: after it, both ways are segments (lz4 ones with segLZ4).
	seg      *segIn
	segments bool
	segLZ4   bool

	// The event types the connection REGISTERed for.
	wantsSchemaEvents, wantsStatusEvents, wantsTopologyEvents atomic.Bool

	in   []byte // frame read buffer
	dbuf []byte // decompressed body
	out  []byte // response being built
	peer netip.Addr
	// exec is the EXECUTE being handled (the connection handles one request at a time):
	// decoded in place, its bound values reuse one backing array (cql.DecodeExecuteInto),
	// which request would otherwise allocate, with the Execute, for every request.
	exec cql.Execute
	// shard is the connection's shard (Config.Shards); rk the routing key of the last
	// EXECUTE counted.
	shard int
	rk    []byte
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, connBufferSize)}
	c.sess.Node = s.cfg.Node
	c.w.w = bufio.NewWriterSize(nc, connBufferSize)
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		c.peer = ap.Addr()
	}
	return c
}

// frameLimit returns the largest frame, header included, that the client may send now.
func (c *conn) frameLimit() int {
	if !c.ready {
		return min(c.s.maxFrame(), cql.MaxStartupFrameSize)
	}
	return c.s.maxFrame()
}
