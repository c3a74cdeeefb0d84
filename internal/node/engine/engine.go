package engine

import (
	"crypto/rand"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/auth"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The engine's state, under every file that works on it: its configuration, sessions,
// prepared statements and roles, an execution's context, and the compiler's own state; it
// points at no other file of the engine but errors.go (TestNodeFilesPointDown).

// Session is per-connection state: the current keyspace set by USE. It is not safe for
// concurrent use; each connection has its own.
type Session struct {
	Keyspace string
	// User is the role the connection logged in as (Engine.Login), when the engine has
	// roles (EngineConfig.Auth).
	User string
	// Node is the index, in EngineConfig.Nodes, of the node the session reached: it picks
	// the system.local and system.peers that the session reads. Zero is the first node.
	Node int
}

// Tracer receives trace events while a traced request executes. A nil Tracer means the
// request is not traced.
type Tracer interface {
	Event(activity string)
}

// EngineConfig configures an Engine. The zero value works: it reports 127.0.0.1:9042, the
// cluster name "Test Cluster" and reads the wall clock.
type EngineConfig struct {
	// RPCAddr is the address reported in system.local (rpc_address and rpc_port).
	RPCAddr netip.AddrPort
	// ClusterName is reported in system.local; empty means "Test Cluster".
	ClusterName string
	// Now returns the current time, for write timestamps and TTL expiry; nil means time.Now.
	Now func() time.Time
	// Nodes are the nodes of an embedded cluster sharing this engine (see Topology), each
	// with its own system.local and system.peers; Session.Node says which one a session
	// reached. Empty means one node at RPCAddr, in datacenter1, rack1, with 16 tokens.
	Nodes []NodeInfo
	// Auth, as "USER:PASS", gives the engine roles and permissions, as a Cassandra node
	// with PasswordAuthenticator and CassandraAuthorizer: USER is its first superuser
	// (Cassandra's is cassandra/cassandra), and Session.User must be a role that holds the
	// permissions each statement needs. Empty means everyone is anonymous and nothing is
	// checked, as with AllowAllAuthenticator.
	Auth string
	// NoMaterializedViews refuses CREATE MATERIALIZED VIEW with Cassandra 4.1's default
	// answer (materialized_views_enabled: false). The zero value has them, as ScyllaDB.
	NoMaterializedViews bool
	// MemoryLimit bounds, in bytes, what the user tables' data holds (storage.Memory): a
	// write that finds it reached gets Overloaded. Zero means no limit.
	MemoryLimit int64
}

// NodeInfo is one node of an embedded cluster, as system.local and system.peers describe it.
type NodeInfo struct {
	// RPCAddr is the node's CQL address: rpc_address (native_address) and native_port.
	RPCAddr netip.AddrPort
	// HostID is the node's stable host_id.
	HostID [16]byte
	// DataCenter and Rack place the node; empty means datacenter1 and rack1.
	DataCenter, Rack string
	// Tokens are the node's tokens on the Murmur3 ring, as decimal strings.
	Tokens []string
}

// Engine executes CQL against in-memory tables: the user's keyspaces and the system
// tables that drivers read. It is safe for concurrent use.
type Engine struct {
	cfg    EngineConfig
	hostID [16]byte
	tokens []string
	nodes  []NodeInfo

	schema atomic.Pointer[storage.Schema]
	ddlMu  sync.Mutex // serializes DDL

	cacheMu sync.RWMutex
	cache   map[cacheKey]*prepared // statements by keyspace and text, for QUERY and PREPARE

	prepMu   sync.RWMutex
	prepared map[string]*prepared // by id, for EXECUTE

	listenMu  sync.Mutex
	listeners []func(cql.SchemaChange)

	lastTS atomic.Int64 // last write timestamp handed out, to keep them increasing

	auth *auth.Roles
	mem  *storage.Memory // what the user tables hold, against EngineConfig.MemoryLimit
}

// need is a permission a statement needs (auth.Roles.Authorize checks them).
type need = auth.Need

type cacheKey struct{ ks, query string }

// maxCached bounds the statement cache; unprepared queries with literals could otherwise
// grow it without end.
const maxCached = 20000

// maxPrepared bounds the prepared statements kept for EXECUTE.
const maxPrepared = 50000

// prepared is a parsed statement with its bind metadata and its compiled plan.
type prepared struct {
	id    []byte
	query string
	ks    string // the session keyspace when it was prepared
	ps    *grammar.ParsedStmt
	plan  atomic.Pointer[compiled]
}

// compiled is a plan for one schema version with the metadata that goes with it.
type compiled struct {
	gen    uint64
	p      plan
	meta   cql.PreparedMetadata
	result cql.RowsMetadata
	tables []*storage.TableStore // the tables it reads or writes
	needs  []need                // the permissions it needs, when the engine has roles

	// resultID is the result metadata id of protocol v5 (resultMetadataID): it changes
	// when the result's columns do.
	resultID []byte
}

// plan is a statement compiled against one schema version.
type plan interface {
	exec(e *Engine, x *execCtx) (cql.Message, error)
}

// execCtx carries one execution's inputs.
type execCtx struct {
	s     *Session
	vals  []cql.Value
	p     *cql.QueryParams
	tr    Tracer
	now   time.Time
	batch bool // inside a batch: use the batch's timestamp
	ts    int64
	// INSERT JSON: the values of the table's columns, in table.cols order.
	json      [][]byte
	jsonUnset []bool
	noCond    bool // a conditional batch's statements, whose conditions it checked
	// nowSecs, when hasNow, is the request's now_in_seconds (protocol v5; 0 is a time like
	// any other, the epoch): TTLs and
	// liveness are reckoned from it rather than from now, while write timestamps still
	// come from the clock, as in Cassandra.
	nowSecs int64
	hasNow  bool
	// checkResult says that the request named the result metadata id it holds (a v5
	// EXECUTE), resultID: a Rows result whose metadata has another id carries it in full,
	// with the new id (selectPlan.result).
	checkResult bool
	resultID    []byte
}

// seconds returns the time, in seconds, that TTLs and liveness are reckoned from.
func (x *execCtx) seconds() int64 {
	if x.hasNow {
		return x.nowSecs
	}
	return x.now.Unix()
}

// Memory returns the count of the bytes the engine's user tables hold, against
// EngineConfig.MemoryLimit, and of the writes it refused.
func (e *Engine) Memory() *storage.Memory { return e.mem }

// OnSchemaChange registers fn to be called after every schema change, in the goroutine
// that made the change. The server uses it to push SCHEMA_CHANGE events.
func (e *Engine) OnSchemaChange(fn func(cql.SchemaChange)) {
	e.listenMu.Lock()
	e.listeners = append(e.listeners, fn)
	e.listenMu.Unlock()
}

func (e *Engine) notify(c cql.SchemaChange) {
	e.listenMu.Lock()
	ls := append([]func(cql.SchemaChange){}, e.listeners...)
	e.listenMu.Unlock()
	for _, fn := range ls {
		fn(c)
	}
}

// SchemaVersion returns the current schema_version, as in system.local.
func (e *Engine) SchemaVersion() [16]byte { return e.schema.Load().Version }

// HostID returns the node's host_id, as in system.local.
func (e *Engine) HostID() [16]byte { return e.hostID }

func newSchemaVersion() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0F | 0x40
	u[8] = u[8]&0x3F | 0x80
	return u
}

// timestamp returns a write timestamp in microseconds: the client's, or a strictly
// increasing clock.
func (e *Engine) timestamp(x *execCtx) int64 {
	if x.ts != 0 {
		return x.ts
	}
	if x.p != nil && x.p.Flags&cql.QueryDefaultTimestamp != 0 && x.p.Timestamp != 0 {
		return x.p.Timestamp
	}
	now := x.now.UnixMicro()
	for {
		last := e.lastTS.Load()
		if now <= last {
			now = last + 1
		}
		if e.lastTS.CompareAndSwap(last, now) {
			return now
		}
	}
}

// compiler turns a statement into a plan against one schema version, and records the bind
// metadata on the way.
type compiler struct {
	e         *Engine
	sc        *storage.Schema
	ks        string
	binds     []cql.ColumnSpec
	names     []string
	pkIndexes []uint16
	result    cql.RowsMetadata
	tables    []*storage.TableStore
	needs     []need
}

// noMarkers refuses bind markers in a statement that takes none.
func (c *compiler) noMarkers() error {
	if len(c.binds) > 0 {
		return invalidf("bind markers are not allowed in this statement")
	}
	return nil
}

// keyspaceOf returns the first keyspace name that is set: the statement's own, then the
// prepared statement's, then the session's.
func keyspaceOf(names ...string) (string, error) {
	for _, n := range names {
		if n != "" {
			return n, nil
		}
	}
	return "", invalidf("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
}

// table resolves a table name against the session keyspace.
func (c *compiler) table(tn grammar.TableName) (*storage.Table, error) {
	ks, err := keyspaceOf(tn.Ks, c.ks)
	if err != nil {
		return nil, err
	}
	k := c.sc.Keyspaces[ks]
	if k == nil {
		return nil, invalidf("Keyspace '%s' does not exist", ks)
	}
	t := k.Tables[tn.Name]
	if t == nil {
		return nil, invalidf("unconfigured table %s", tn.Name)
	}
	if !slices.Contains(c.tables, t.TableStore) {
		c.tables = append(c.tables, t.TableStore)
	}
	return t, nil
}

// bind records the metadata of marker t, if it is one.
func (c *compiler) bind(t *grammar.Term, spec cql.ColumnSpec) {
	if t.Kind == grammar.TermBind && t.Idx < len(c.binds) {
		c.binds[t.Idx] = spec
	}
}

type usePlan struct{ ks string }

func (p *usePlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	if e.schema.Load().Keyspaces[p.ks] == nil {
		return nil, invalidf("Keyspace '%s' does not exist", p.ks)
	}
	x.s.Keyspace = p.ks
	return cql.SetKeyspaceResult{Keyspace: p.ks}, nil
}

type truncatePlan struct{ t *storage.Table }

func (p *truncatePlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	if p.t.Dropped.Load() {
		return nil, invalidf("unconfigured table %s", p.t.Name)
	}
	p.t.ViewMu.Lock()
	p.t.Data.Store(e.mem.Renew(p.t.Data.Load()))
	for _, l := range p.t.Views {
		l.V.Data.Store(storage.NewTableData())
	}
	p.t.ViewMu.Unlock()
	if x.tr != nil {
		x.tr.Event("Truncated table " + p.t.Ks + "." + p.t.Name)
	}
	return cql.VoidResult{}, nil
}

// errAs returns err as a *cql.Error when it is one.
func errAs(err error) *cql.Error {
	var ce *cql.Error
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}
