package pipeline

import (
	"bytes"
	"hash/maphash"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/statements"
)

// Settings are what a proxy gives the pipelines of its connections: its tracer and hooks,
// its limits and the addresses it advertises. Nil hooks are off.
type Settings struct {
	Tracer     *tracing.Tracer  // nil: no tracing
	Log        *zerolog.Logger  // never nil
	LogGate    logs.Gate        // the logger's level switch, when it has one
	Metrics    Metrics          // nil: no per-request metrics
	Statements StatementStats   // nil: no statement statistics
	Capture    *capture.Capture // nil: no workload capture
	Peers      *PeerMap         // nil: other nodes' addresses are not rewritten
	MaxFrame   uint32           // the largest frame, header included, once the handshake is done
	// Advertise is the address written into system.local and events about the node; a
	// zero Addr means each connection's own local address, and a zero port its port.
	Advertise netip.AddrPort
	PeerPort  uint16 // written into peers and events about other nodes; 0: the advertised port
	// LearnSharding, when set, sees the sharding of every well-formed SUPPORTED that
	// names some (ScyllaDB's), before the answer is rewritten: the proxy learns the node's
	// shard count and shard-aware ports from it, and may then listen on a shard-aware port
	// of its own (SetShardAwarePort). It is called on the data path, rarely (a frame like
	// one rewritten already is not decoded again).
	LearnSharding func(sharding.Info)
	// Audit is the audit log: the data path checks Audit.Enabled (one atomic load), then
	// Audit.Wants, and gives Audit.Add a record once the node has answered. Nil: no audit.
	Audit *audit.Log
}

// Shared is what the pipelines of one proxy's connections share: the Settings, and what
// they learn from the node for every connection (the prepared statements that read system
// tables, the node's rpc_address, the last SUPPORTED rewritten) and count together. It is
// safe for concurrent use.
type Shared struct {
	Settings
	// Prepared is the prepared-statement registry, the tracer's when there is one.
	Prepared *tracing.Statements
	// TooBig counts the frames refused for their size.
	TooBig atomic.Uint64

	checked checkedStmts               // prepared ids that read no system table
	nodeRPC atomic.Pointer[netip.Addr] // the rpc_address the node reported
	// supported are the last SUPPORTED answers rewritten (rewriteSupported), one per shard
	// of a ScyllaDB node: the node answers every connection's OPTIONS alike but for that.
	supported supportedCache
	shards    shardShared // ScyllaDB's shards (shards.go)
	audit     auditStmts  // what the audit log records of statement texts (auditstmt.go)
}

// NewShared returns the shared state of a proxy's pipelines.
func NewShared(s Settings) *Shared {
	sh := &Shared{Settings: s}
	sh.audit.seed = maphash.MakeSeed()
	if s.Tracer != nil {
		sh.Prepared = s.Tracer.Statements()
	} else {
		sh.Prepared = tracing.NewStatements(tracing.DefaultPreparedSize)
	}
	return sh
}

// Logs reports whether lines at lvl may be written: false when the log gate says that they
// are off, true without a gate (zerolog decides). It is inlined.
func (s *Shared) Logs(lvl zerolog.Level) bool {
	return !s.LogGate.Valid() || s.LogGate.Enabled(lvl)
}

// StatementStats is the data path's hook for per-statement statistics;
// *statements.Stats implements it. Its methods are called from every connection's
// goroutines at once. Active is one or two atomic loads; Request is called for a PREPARE,
// and for any other request only while Active (statistics on, or the trace floor, whose
// pick Ticket.Floor names); Response is called for each response whose request's Ticket
// is active, at the point where the response is matched to its request.
type StatementStats interface {
	Active() bool
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
	// Answered records, as Latency and AddedLatency, the requests whose responses arrived
	// in one read at arrived and were queued for the client together at now (tracing.Now
	// nanoseconds): the event loop's way, one clock read for a read's responses.
	Answered(answers []metrics.Answer, arrived, now int64)
	// ConnOpened and ConnClosed count client connections.
	ConnOpened()
	ConnClosed()
}

// supportedRewrite is a SUPPORTED frame from the node and its rewrite (nil: it needed
// none), with the proxy's shard-aware ports it was made for and the sharding it names (nil
// when not one of several shards). All are immutable once stored.
type supportedRewrite struct {
	in, out []byte
	ports   [2]int32
	shard   *sharding.Info
}

// supportedCache keeps the last SUPPORTED frames rewritten, one per shard of a node of
// up to len(entries) shards (ScyllaDB's SCYLLA_SHARD makes each shard's answer its own), so
// that a frame like one of them costs a copy. It is safe for concurrent use.
type supportedCache struct {
	entries [8]atomic.Pointer[supportedRewrite]
	next    atomic.Uint32
}

// find returns the entry made for frame (but for its stream id) with the proxy's
// shard-aware ports, or nil.
func (s *supportedCache) find(frame []byte, ports [2]int32) *supportedRewrite {
	for i := range s.entries {
		if e := s.entries[i].Load(); e != nil && e.ports == ports && e.matches(frame) {
			return e
		}
	}
	return nil
}

// store keeps e in place of the oldest entry.
func (s *supportedCache) store(e *supportedRewrite) {
	s.entries[(s.next.Add(1)-1)%uint32(len(s.entries))].Store(e)
}

// matches reports whether frame is r.in but for the stream id (bytes 2 and 3 of a header
// of protocol v3 and later).
func (r *supportedRewrite) matches(frame []byte) bool {
	return len(frame) == len(r.in) && len(frame) >= cql.HeaderSize &&
		bytes.Equal(frame[:2], r.in[:2]) && bytes.Equal(frame[4:], r.in[4:])
}

// withStream returns a copy of r.out with the stream id of frame.
func (r *supportedRewrite) withStream(frame []byte) []byte {
	out := bytes.Clone(r.out)
	copy(out[2:4], frame[2:4])
	return out
}

// rememberStmt notes in the prepared-statement registry that the statement id reads the
// system table of kind, with the result columns from its Prepared response, for the Rows
// responses that skip their metadata: an EXECUTE probed for its table (statement.go).
func (s *Shared) rememberStmt(id []byte, kind rewriteKind, cols []cql.ColumnSpec) {
	s.Prepared.Put(id, tracing.Statement{System: uint8(kind), Columns: cols})
}
