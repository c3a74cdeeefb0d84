package sidecar

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing/capture"
)

// Defaults of Config.
const (
	DefaultDrainTimeout = 10 * time.Second
	DefaultDialTimeout  = 5 * time.Second

	// DefaultMaxRequestDataInFlight is the default of Config.MaxRequestDataInFlight.
	DefaultMaxRequestDataInFlight = 128 << 20
)

// Sizes of the per-connection buffers of the goroutine path. A connection there has two
// readers and two writers of these sizes, whose buffers come from a pool only while they
// hold bytes (buffers.go); frames larger than a reader's buffer are streamed through, or held
// in a scratch buffer when they must be read whole.
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
	// LogGate is Logger's level switch when Logger comes from a logs.Registry
	// (Registry.Gate). The debug line of every request and the trace lines of every frame
	// are checked against it first, one atomic load, rather than by zerolog's check through
	// the registry's sampler (about 10 ns a line, for lines that are off). The zero Gate:
	// zerolog's check only.
	LogGate logs.Gate
	// NoEventLoop keeps every connection on the goroutine path (two goroutines per
	// connection). By default plaintext TCP connections move to the event loop once open.
	NoEventLoop bool
	// Metrics receives per-request counts and latencies. Nil means none.
	Metrics Metrics
	// Statements receives each request and its response for per-statement statistics.
	// Nil means none.
	Statements StatementStats
	// Capture is the workload capture, which sees every request and its response while it
	// runs. Nil means none.
	Capture *capture.Capture
	// Audit is the audit log, which sees every request, login and response while it is
	// enabled. Nil means none.
	Audit *audit.Log
	// TLS, when set, makes clients speak TLS to the proxy: it must hold a certificate, and
	// with ClientAuth set to tls.RequireAndVerifyClientCert and ClientCAs, clients must
	// present a certificate (mTLS). A client that fails the handshake, a plaintext one say,
	// is logged with the reason and disconnected. Nil means plaintext.
	TLS *tls.Config
	// NodeTLS, when set, makes the proxy speak TLS to the node, with this client
	// configuration (RootCAs, a client certificate). An empty ServerName is set to the
	// host of NodeAddr. Nil means plaintext.
	NodeTLS *tls.Config
	// MaxProtocolVersion is the highest protocol version the proxy lets through, 3 to 5:
	// a client that offers a higher one gets Cassandra's ProtocolError and steps down. Zero
	// means 5; 4 is for nodes without v5 (ScyllaDB, Cassandra 3).
	MaxProtocolVersion int
	// ShardAwareHost, when set, makes the proxy listen on this host with the node's
	// shard-aware port number (SCYLLA_SHARD_AWARE_PORT, or _SSL with TLS) as soon as a
	// client's OPTIONS brings the node's SUPPORTED that names it with more than one shard,
	// and advertise it in its place; ServeShardAwareAuto serves it. Empty means no such
	// listener: ServeShardAware serves one the caller made, or none.
	ShardAwareHost string
}

// StatementStats is the data path's hook for per-statement statistics; *statements.Stats
// implements it (see pipeline.StatementStats).
type StatementStats = pipeline.StatementStats

// Metrics is what the proxy reports per request; *metrics.Metrics implements it (see
// pipeline.Metrics).
type Metrics = pipeline.Metrics

// check returns the first error of cfg, whose defaults New has filled in, and the address
// that AdvertiseAddr names (a zero Addr when it is empty).
func (cfg *Config) check() (advertise netip.AddrPort, err error) {
	switch {
	case cfg.NodeAddr == "":
		return advertise, errors.New("sidecar: no node address")
	case cfg.MaxFrameSize < cql.HeaderSize || cfg.MaxFrameSize > cql.MaxBodySize:
		return advertise, fmt.Errorf("sidecar: max frame size %d: want %d to %d bytes", cfg.MaxFrameSize, cql.HeaderSize, cql.MaxBodySize)
	case cfg.MaxRequestDataInFlight < 0:
		return advertise, fmt.Errorf("sidecar: max request data in flight %d: want 0 (the default) or more", cfg.MaxRequestDataInFlight)
	case cfg.MaxConnections < 0:
		return advertise, fmt.Errorf("sidecar: max connections %d: want 0 (no limit) or more", cfg.MaxConnections)
	case cfg.PeerPort < 0 || cfg.PeerPort > 65535:
		return advertise, fmt.Errorf("sidecar: peer port %d: want 0 to 65535", cfg.PeerPort)
	case cfg.MaxProtocolVersion != 0 && (cfg.MaxProtocolVersion < int(cql.V3) || cfg.MaxProtocolVersion > int(cql.MaxVersion)):
		return advertise, fmt.Errorf("sidecar: max protocol version %d: want 3, 4 or 5", cfg.MaxProtocolVersion)
	}
	if cfg.AdvertiseAddr != "" {
		if advertise, err = pipeline.ParseAdvertise(cfg.AdvertiseAddr); err != nil {
			return advertise, err
		}
	}
	if cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil {
		return advertise, errors.New("sidecar: client TLS configuration has no certificate")
	}
	return advertise, nil
}

// eventLoopOff reports whether TRACECAR_EVENT_LOOP=off keeps every connection of the
// process on the goroutine path, as Config.NoEventLoop does for one Proxy: so that test
// suites (this package's, and those that start a sidecar in process, as reliability's) run
// on that path, as `tracecar sidecar` does.
func eventLoopOff() bool { return os.Getenv("TRACECAR_EVENT_LOOP") == "off" }

// PeerMap maps the CQL addresses of other nodes to the addresses of their sidecars (see
// pipeline.PeerMap).
type PeerMap = pipeline.PeerMap

// ParsePeerMap parses a --peers value (see pipeline.ParsePeerMap).
func ParsePeerMap(text string) (*PeerMap, error) { return pipeline.ParsePeerMap(text) }
