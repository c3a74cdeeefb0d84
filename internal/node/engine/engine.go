package engine

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/auth"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

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

// NewEngine returns an Engine with the system keyspaces and no user keyspaces.
func NewEngine(cfg EngineConfig) *Engine {
	if cfg.ClusterName == "" {
		cfg.ClusterName = "Test Cluster"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if !cfg.RPCAddr.IsValid() {
		cfg.RPCAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 9042)
	}
	e := &Engine{
		cfg:      cfg,
		cache:    map[cacheKey]*prepared{},
		prepared: map[string]*prepared{},
		mem:      storage.NewMemory(cfg.MemoryLimit),
	}
	e.nodes = cfg.Nodes
	if len(e.nodes) == 0 {
		e.nodes, _ = Topology([]netip.AddrPort{cfg.RPCAddr}, DefaultNumTokens, nil)
	}
	e.hostID, e.tokens = e.nodes[0].HostID, e.nodes[0].Tokens
	sc := &storage.Schema{Keyspaces: systemKeyspaces(), Gen: 1}
	sc.Version = newSchemaVersion()
	e.schema.Store(sc)
	e.refreshSystem(sc)
	e.auth = auth.New(cfg.Auth)
	e.refreshAuth()
	return e
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

// Query runs an unprepared statement. Parsed statements are cached by keyspace and text.
func (e *Engine) Query(s *Session, query string, p *cql.QueryParams, tr Tracer) (cql.Message, error) {
	pr, err := e.statement(s, query, tr)
	if err != nil {
		return nil, err
	}
	return e.run(s, pr, p, tr)
}

// Prepare parses and compiles a statement and returns its id and metadata. The id is the
// MD5 of the keyspace and the query text, so it is stable across restarts.
func (e *Engine) Prepare(s *Session, query string, tr Tracer) (cql.PreparedResult, error) {
	pr, err := e.statement(s, query, tr)
	if err != nil {
		return cql.PreparedResult{}, err
	}
	cp, err := e.plan(pr)
	if err != nil {
		return cql.PreparedResult{}, err
	}
	e.prepMu.Lock()
	if len(e.prepared) >= maxPrepared {
		// Like Cassandra's evicting cache: drivers prepare again on an Unprepared error.
		clear(e.prepared)
	}
	e.prepared[string(pr.id)] = pr
	e.prepMu.Unlock()
	return cql.PreparedResult{ID: pr.id, ResultMetadataID: cp.resultID, Metadata: cp.meta, ResultMetadata: cp.result}, nil
}

// Execute runs a prepared statement. An unknown id gives an Unprepared error, upon which
// drivers prepare again.
func (e *Engine) Execute(s *Session, id []byte, p *cql.QueryParams, tr Tracer) (cql.Message, error) {
	return e.execute(s, id, p, tr, false, nil)
}

// ExecuteMetadata runs a prepared statement for a client of protocol v5, which names
// the id of the result metadata it holds (from the Prepared result, or a later Rows
// result). When the statement's result metadata has another id now (its table's columns
// changed, CASSANDRA-10786), a Rows result carries the metadata in full, even when the
// client asked to skip it, with the cql.RowsMetadataChanged flag and the new id.
func (e *Engine) ExecuteMetadata(s *Session, id, resultMetadataID []byte, p *cql.QueryParams, tr Tracer) (cql.Message, error) {
	return e.execute(s, id, p, tr, true, resultMetadataID)
}

func (e *Engine) execute(s *Session, id []byte, p *cql.QueryParams, tr Tracer, check bool, resultID []byte) (cql.Message, error) {
	e.prepMu.RLock()
	pr := e.prepared[string(id)]
	e.prepMu.RUnlock()
	if pr == nil {
		return nil, &cql.Error{Code: cql.ErrCodeUnprepared, Message: "Prepared query with ID " + hexString(id) + " not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", UnpreparedID: id}
	}
	if tr != nil {
		tr.Event("Executing prepared statement")
	}
	return e.runChecked(s, pr, p, tr, check, resultID)
}

// PartitionKeyIndexes returns the bind markers that make the partition key of prepared
// statement id, in the key's order, as its PREPARED result gives them: nil when the
// statement is unknown or its key is not all bound.
func (e *Engine) PartitionKeyIndexes(id []byte) []uint16 {
	e.prepMu.RLock()
	pr := e.prepared[string(id)]
	e.prepMu.RUnlock()
	if pr == nil {
		return nil
	}
	if c := pr.plan.Load(); c != nil {
		return c.meta.PKIndexes
	}
	return nil
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2+2*len(b))
	out = append(out, '0', 'x')
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// statement returns the cached or newly parsed and described statement.
//
// Its trace events say which of the two happened, each as it starts: "Parsing <query>" and
// "Preparing statement" when it parses and compiles, "Statement found in cache" when not.
func (e *Engine) statement(s *Session, query string, tr Tracer) (*prepared, error) {
	k := cacheKey{ks: s.Keyspace, query: query}
	e.cacheMu.RLock()
	pr := e.cache[k]
	e.cacheMu.RUnlock()
	if pr != nil {
		if tr != nil {
			tr.Event("Statement found in cache")
		}
		return pr, nil
	}
	if tr != nil {
		tr.Event("Parsing " + query)
	}
	ps, err := grammar.Parse(query)
	if err != nil {
		return nil, err
	}
	pr = &prepared{query: query, ks: s.Keyspace, ps: ps}
	sum := md5.Sum([]byte(s.Keyspace + query))
	pr.id = sum[:]
	if tr != nil {
		tr.Event("Preparing statement")
	}
	if _, err := e.plan(pr); err != nil {
		return nil, err
	}
	e.cacheMu.Lock()
	if len(e.cache) >= maxCached {
		clear(e.cache)
	}
	e.cache[k] = pr
	e.cacheMu.Unlock()
	return pr, nil
}

// plan returns pr's plan for the current schema, compiling it again after DDL.
func (e *Engine) plan(pr *prepared) (*compiled, error) {
	sc := e.schema.Load()
	if c := pr.plan.Load(); c != nil && c.gen == sc.Gen {
		return c, nil
	}
	cp := &compiler{e: e, sc: sc, ks: pr.ks, binds: make([]cql.ColumnSpec, len(pr.ps.Markers)), names: pr.ps.Markers}
	p, err := cp.compile(pr.ps.Stmt)
	if err != nil {
		return nil, err
	}
	for i, n := range pr.ps.Markers {
		if n != "" {
			cp.binds[i].Name = n
		}
	}
	c := &compiled{gen: sc.Gen, p: p, meta: cql.PreparedMetadata{Columns: cp.binds, PKIndexes: cp.pkIndexes}, result: cp.result, tables: cp.tables, needs: cp.needs}
	c.resultID = resultMetadataID(c.result)
	if sp, ok := p.(*selectPlan); ok {
		sp.resultID = c.resultID
	}
	pr.plan.Store(c)
	return c, nil
}

func (e *Engine) run(s *Session, pr *prepared, p *cql.QueryParams, tr Tracer) (cql.Message, error) {
	return e.runChecked(s, pr, p, tr, false, nil)
}

// runChecked runs pr; check and resultID are a v5 EXECUTE's (see ExecuteMetadata).
func (e *Engine) runChecked(s *Session, pr *prepared, p *cql.QueryParams, tr Tracer, check bool, resultID []byte) (cql.Message, error) {
	cp, err := e.plan(pr)
	if err != nil {
		return nil, err
	}
	x := ctxPool.Get().(*execCtx)
	*x = execCtx{s: s, p: p, tr: tr, now: e.cfg.Now(), checkResult: check, resultID: resultID}
	if p != nil && p.ExtFlags&cql.QueryNowInSeconds != 0 {
		x.nowSecs, x.hasNow = int64(p.NowInSeconds), true
	}
	defer func() {
		*x = execCtx{}
		ctxPool.Put(x)
	}()
	x.vals, err = bindValues(cp, p)
	if err != nil {
		return nil, err
	}
	if e.auth.Enabled() && len(cp.needs) > 0 {
		if err := e.authorize(s, cp.needs); err != nil {
			return nil, err
		}
	}
	return cp.p.exec(e, x)
}

// ctxPool recycles execution contexts, which would otherwise escape through the plan
// interface on every request.
var ctxPool = sync.Pool{New: func() any { return new(execCtx) }}

// bindValues orders the bound values by marker, resolving names.
func bindValues(cp *compiled, p *cql.QueryParams) ([]cql.Value, error) {
	var vals []cql.Value
	var names []string
	if p != nil {
		vals = p.Values
		if p.Flags&cql.QueryNamedValues != 0 {
			names = p.Names
		}
	}
	return orderValues(cp, vals, names)
}

func orderValues(cp *compiled, vals []cql.Value, names []string) ([]cql.Value, error) {
	markers := cp.meta.Columns
	if len(names) == 0 {
		if len(vals) != len(markers) {
			return nil, invalidf("There were %d markers(?) in CQL but %d values were bound", len(markers), len(vals))
		}
		return vals, nil
	}
	out := make([]cql.Value, len(markers))
	for i, m := range markers {
		found := false
		for j, n := range names {
			if j < len(vals) && (n == m.Name || strings.EqualFold(n, m.Name)) {
				out[i], found = vals[j], true
				break
			}
		}
		if !found {
			return nil, invalidf("Invalid unset value for bind marker %s: no value named %q was bound", m.Name, m.Name)
		}
	}
	return out, nil
}

// Batch runs a BATCH message. Every statement must be a modification; all of them use one
// timestamp.
func (e *Engine) Batch(s *Session, b *cql.Batch, tr Tracer) (cql.Message, error) {
	x := execCtx{s: s, tr: tr, now: e.cfg.Now(), batch: true}
	if b.ExtFlags&cql.QueryNowInSeconds != 0 {
		x.nowSecs, x.hasNow = int64(b.NowInSeconds), true
	}
	if b.Flags&cql.QueryDefaultTimestamp != 0 && b.Timestamp != 0 {
		x.ts = b.Timestamp
	} else {
		x.ts = e.timestamp(&x)
	}
	steps := make([]batchStep, 0, len(b.Queries))
	for i, q := range b.Queries {
		var pr *prepared
		var err error
		if q.Prepared {
			e.prepMu.RLock()
			pr = e.prepared[string(q.ID)]
			e.prepMu.RUnlock()
			if pr == nil {
				return nil, &cql.Error{Code: cql.ErrCodeUnprepared, Message: "Prepared query with ID " + hexString(q.ID) + " not found", UnpreparedID: q.ID}
			}
		} else {
			if pr, err = e.statement(s, q.Query, tr); err != nil {
				return nil, err
			}
		}
		switch pr.ps.Stmt.(type) {
		case *grammar.InsertStmt, *grammar.UpdateStmt, *grammar.DeleteStmt:
		default:
			return nil, invalidf("Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed (statement %d)", i)
		}
		cp, err := e.plan(pr)
		if err != nil {
			return nil, err
		}
		var names []string
		if b.Flags&cql.QueryNamedValues != 0 {
			names = q.Names
		}
		vals, err := orderValues(cp, q.Values, names)
		if err != nil {
			return nil, err
		}
		if e.auth.Enabled() && len(cp.needs) > 0 {
			if err := e.authorize(s, cp.needs); err != nil {
				return nil, err
			}
		}
		steps = append(steps, batchStep{cp.p, vals})
	}
	m, err := e.runBatch(&x, steps, false)
	if err != nil {
		return nil, err
	}
	if tr != nil {
		if r, ok := m.(cql.RowsResult); ok && len(r.Rows) > 0 && len(r.Rows[0]) > 0 && r.Rows[0][0][0] == 0 {
			tr.Event("Conditions not met: batch of " + itoa(len(steps)) + " statements not applied")
		} else {
			tr.Event("Applied batch of " + itoa(len(steps)) + " mutations")
		}
	}
	return m, nil
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
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

func (c *compiler) compile(st grammar.Statement) (plan, error) {
	switch st := st.(type) {
	case *grammar.UseStmt:
		return &usePlan{ks: st.Keyspace}, c.noMarkers()
	case *grammar.CreateKeyspaceStmt, *grammar.DropKeyspaceStmt, *grammar.AlterKeyspaceStmt, *grammar.CreateTableStmt, *grammar.DropTableStmt, *grammar.AlterTableStmt,
		*grammar.CreateTypeStmt, *grammar.AlterTypeStmt, *grammar.DropTypeStmt, *grammar.CreateIndexStmt, *grammar.DropIndexStmt, *grammar.ViewStmt, *grammar.CreateViewStmt,
		*grammar.CreateFunctionStmt, *grammar.CreateAggregateStmt, *grammar.DropFunctionStmt:
		return &ddlPlan{st: st, ks: c.ks}, c.noMarkers()
	case *grammar.TruncateStmt:
		t, err := c.table(st.Table)
		if err != nil {
			return nil, err
		}
		if t.Virtual || c.sc.Keyspaces[t.Ks].System {
			return nil, &cql.Error{Code: cql.ErrCodeUnauthorized, Message: t.Ks + " keyspace is not user-modifiable"}
		}
		if t.View != nil {
			return nil, invalidf("Cannot TRUNCATE materialized view directly; must truncate base table instead")
		}
		c.tableNeeds(t, "MODIFY")
		return &truncatePlan{t: t}, nil
	case *grammar.UnsupportedStmt:
		return nil, invalidf("%s", st.What)
	case *grammar.RoleStmt, *grammar.GrantStmt, *grammar.GrantRoleStmt, *grammar.ListRolesStmt, *grammar.ListPermsStmt:
		return &authPlan{st: st}, c.noMarkers()
	case *grammar.InsertStmt:
		return c.insert(st)
	case *grammar.UpdateStmt:
		return c.update(st)
	case *grammar.DeleteStmt:
		return c.delete(st)
	case *grammar.SelectStmt:
		return c.selectPlan(st)
	case *grammar.BatchStmt:
		return c.batch(st)
	}
	return nil, invalidf("unsupported statement")
}

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

// resultMetadataID is the result metadata id of protocol v5 for md: the MD5 of its
// columns' keyspaces, tables, names and types, so that it changes when they do (a column
// added to the table of a SELECT *) and only then.
func resultMetadataID(md cql.RowsMetadata) []byte {
	h := md5.New()
	var b []byte
	for _, c := range md.Columns {
		b = cql.AppendString(b[:0], c.Keyspace)
		b = cql.AppendString(b, c.Table)
		b = cql.AppendString(b, c.Name)
		b = cql.AppendTypeInfo(b, c.Type)
		h.Write(b)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(md.Columns)))
	h.Write(n[:])
	return h.Sum(nil)
}
