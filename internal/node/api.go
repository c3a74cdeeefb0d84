package node

import (
	"net/netip"

	"github.com/tracecar/tracecar/internal/node/engine"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The engine's names the node's users reach through package node, as before the engine had a
// package of its own (internal/node/engine).
type (
	// Engine executes the statements of the node's connections.
	Engine = engine.Engine
	// EngineConfig configures an Engine.
	EngineConfig = engine.EngineConfig
	// Session is the state of one connection the engine executes statements for.
	Session = engine.Session
	// Tracer records the trace events of a query.
	Tracer = engine.Tracer
	// TraceSession is a row of system_traces.sessions.
	TraceSession = engine.TraceSession
	// TraceEvent is a row of system_traces.events.
	TraceEvent = engine.TraceEvent
	// NodeInfo is one node of a cluster's topology.
	NodeInfo = engine.NodeInfo
	// DC is a data center of an embedded cluster: its name and its number of nodes.
	DC = engine.DC
)

// DefaultNumTokens is the number of tokens each node owns unless configured otherwise.
const DefaultNumTokens = engine.DefaultNumTokens

// NewEngine returns an engine with the system keyspaces.
func NewEngine(cfg EngineConfig) *Engine { return engine.NewEngine(cfg) }

// ParseDCs parses a data center layout such as "dc1:2,dc2:2".
func ParseDCs(s string) ([]DC, error) { return engine.ParseDCs(s) }

// Topology returns the nodes of a cluster at addrs, with numTokens tokens each, in the
// datacenters dcs.
func Topology(addrs []netip.AddrPort, numTokens int, dcs []DC) ([]NodeInfo, error) {
	return engine.Topology(addrs, numTokens, dcs)
}

// TableShare is the part of EngineConfig.MemoryLimit the tables may hold, in eighths: the
// other eighth is the runtime's headroom.
const TableShare = storage.TableShare

// RuntimeLimit is the Go runtime's soft memory limit for a node of limit bytes (15/16 of
// it): set so, the engine also holds the process's live heap to the tables' share.
func RuntimeLimit(limit int64) int64 { return storage.RuntimeLimit(limit) }

// FormatBytes writes n bytes as the --memory-limit flag takes them: "64 MiB", "1.5 GiB".
func FormatBytes(n int64) string { return storage.FormatBytes(n) }
