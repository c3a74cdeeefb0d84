package engine

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/auth"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The engine's way in, the top of its files: NewEngine, and a statement's way through it,
// parsed (or found in the cache), compiled into a plan for the schema it meets, bound and
// executed; batches the same, statement by statement.

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
		return nil, &cql.Error{Code: cql.ErrCodeUnprepared, Message: "Prepared query with ID 0x" + hex.EncodeToString(id) + " not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", UnpreparedID: id}
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
				return nil, &cql.Error{Code: cql.ErrCodeUnprepared, Message: "Prepared query with ID 0x" + hex.EncodeToString(q.ID) + " not found", UnpreparedID: q.ID}
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
			tr.Event("Conditions not met: batch of " + strconv.Itoa(len(steps)) + " statements not applied")
		} else {
			tr.Event("Applied batch of " + strconv.Itoa(len(steps)) + " mutations")
		}
	}
	return m, nil
}

// compile compiles the statement st into its plan, by kind.
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
		return writeCompiler{c}.insert(st)
	case *grammar.UpdateStmt:
		return writeCompiler{c}.update(st)
	case *grammar.DeleteStmt:
		return writeCompiler{c}.delete(st)
	case *grammar.SelectStmt:
		return selectCompiler{c}.selectPlan(st)
	case *grammar.BatchStmt:
		return c.batch(st)
	}
	return nil, invalidf("unsupported statement")
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

// batchPlan is a BEGIN BATCH ... APPLY BATCH query string.
type batchPlan struct {
	plans []plan
	ts    *expr
}

// batch compiles a BATCH: each of its statements, and its USING TIMESTAMP, which none of
// them may also have.
func (c *compiler) batch(st *grammar.BatchStmt) (plan, error) {
	p := &batchPlan{}
	for _, s := range st.Stmts {
		switch s := s.(type) {
		case *grammar.InsertStmt:
			if st.Ts != nil && s.Ts != nil {
				return nil, invalidf("Timestamp must be set either on BATCH or individual statements")
			}
		case *grammar.UpdateStmt:
			if st.Ts != nil && s.Ts != nil {
				return nil, invalidf("Timestamp must be set either on BATCH or individual statements")
			}
		case *grammar.DeleteStmt:
			if st.Ts != nil && s.Ts != nil {
				return nil, invalidf("Timestamp must be set either on BATCH or individual statements")
			}
		}
		pk := c.pkIndexes
		sp, err := c.compile(s)
		if err != nil {
			return nil, err
		}
		c.pkIndexes = pk
		p.plans = append(p.plans, sp)
	}
	c.result = cql.RowsMetadata{}
	if st.Ts != nil {
		spec := cql.ColumnSpec{Name: "[timestamp]", Type: cql.TypeInfo{ID: cql.TypeBigint}}
		x, err := c.compileTerm(st.Ts, spec.Type, spec)
		if err != nil {
			return nil, err
		}
		p.ts = x
	}
	return p, nil
}

func (p *batchPlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	bx := *x
	ts, ok, err := evalTimestamp(p.ts, x)
	if err != nil {
		return nil, err
	}
	if ok {
		bx.ts = ts
	}
	if bx.ts == 0 {
		bx.ts = e.timestamp(x)
	}
	bx.batch = true
	steps := make([]batchStep, len(p.plans))
	for i, sp := range p.plans {
		steps[i] = batchStep{pl: sp, vals: x.vals}
	}
	return e.runBatch(&bx, steps, p.ts != nil)
}
