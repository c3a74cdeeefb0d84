package loadcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gocql/gocql"
	"github.com/tracecar/tracecar/internal/cql"
)

// wireDriver drives the load through loadcheck's own CQL client, the replay's (rconn),
// which speaks protocol v5: gocql v1.7 stops at v4. Its sessions open --connections
// connections to the one target, and each worker sends on one of them.
type wireDriver struct{}

func (wireDriver) connect(ctx context.Context, cfg *Config, addr string) (session, error) {
	gcl, err := gocql.ParseConsistencyWrapper(cfg.CL)
	if err != nil {
		return nil, usageErrorf("--cl %q: %v", cfg.CL, err)
	}
	s := &wireSession{cfg: cfg, cl: cql.Consistency(gcl)}
	for range cfg.Connections {
		c, err := dialReplay(ctx, cfg, addr)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		s.conns = append(s.conns, c)
		if cfg.keyspace != "" {
			if err := c.query(ctx, "USE "+quoteName(cfg.keyspace)); err != nil {
				s.close()
				return nil, fmt.Errorf("connect to %s: keyspace %s: %w", addr, cfg.keyspace, err)
			}
		}
	}
	return s, nil
}

// wireSession is a session of the wire client. Statements are prepared on each
// connection once, on first use.
type wireSession struct {
	cfg   *Config
	cl    cql.Consistency
	conns []*rconn
	mu    sync.Mutex
	ids   map[string][][]byte // statement text → id on each connection
}

func (s *wireSession) close() {
	for _, c := range s.conns {
		c.close()
	}
}

// prepared returns text's statement id on every connection, preparing it the first time.
func (s *wireSession) prepared(ctx context.Context, text string) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ids, ok := s.ids[text]; ok {
		return ids, nil
	}
	ids := make([][]byte, len(s.conns))
	for i, c := range s.conns {
		id, err := c.prepare(ctx, text)
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", text, err)
		}
		ids[i] = id
	}
	if s.ids == nil {
		s.ids = map[string][][]byte{}
	}
	s.ids[text] = ids
	return ids, nil
}

func (s *wireSession) createSchema(ctx context.Context) error {
	for _, stmt := range []string{cqlKeyspace, cqlTable} {
		if err := s.conns[0].query(ctx, stmt); err != nil {
			return fmt.Errorf("create schema: %s: %w", stmt, err)
		}
	}
	return nil
}

func (s *wireSession) missing(ctx context.Context, keys []int64) (bool, error) {
	ids, err := s.prepared(ctx, cqlSelect)
	if err != nil {
		return false, err
	}
	key := make([]byte, keyLen)
	for _, k := range keys {
		putKey(key, k)
		p := cql.QueryParams{Consistency: s.cl, Flags: cql.QueryValues, Values: []cql.Value{{Bytes: key}}}
		r, err := s.conns[0].do(ctx, cql.OpExecute, s.conns[0].execute(nil, ids[0], p), true)
		if err != nil {
			return false, fmt.Errorf("check population: %w", err)
		}
		n, err := result(r)
		if err != nil {
			return false, fmt.Errorf("check population: %w", err)
		}
		if n == 0 {
			return true, nil
		}
	}
	return false, nil
}

// newOp builds worker w's operation, as cqlSession's: its values are rewritten in place and
// its request bodies built into one buffer, so that a request allocates only its response.
func (s *wireSession) newOp(ctx context.Context, w int, wl *workload) Op {
	if wl.profile != nil {
		return s.newProfileOp(ctx, w, wl)
	}
	ci := w % len(s.conns)
	conn := s.conns[ci]
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
	key := make([]byte, keyLen)
	cols := make([][]byte, colCount)
	wvals := []cql.Value{{Bytes: key}, {}, {}, {}, {}, {}}
	for i := range cols {
		cols[i] = make([]byte, colLen)
		wvals[i+1].Bytes = cols[i]
	}
	rvals := []cql.Value{{Bytes: key}}
	var ins, sel []byte
	var prepErr error
	if wl.writeFrac > 0 {
		ids, err := s.prepared(ctx, cqlInsert)
		ins, prepErr = idOf(ids, ci), err
	}
	if wl.writeFrac < 1 && prepErr == nil {
		ids, err := s.prepared(ctx, cqlSelect)
		sel, prepErr = idOf(ids, ci), err
	}
	pop := &wl.pop
	writeFrac := wl.writeFrac
	var body []byte
	return func(ctx context.Context) (int, error) {
		if prepErr != nil {
			return 0, prepErr
		}
		putKey(key, pop.next(rng))
		p := cql.QueryParams{Consistency: s.cl, Flags: cql.QueryValues, Values: rvals}
		id, write := sel, writeFrac >= 1 || writeFrac > 0 && rng.Float64() < writeFrac
		if write {
			fillValues(rng, cols)
			p.Values, id = wvals, ins
		}
		body = conn.execute(body[:0], id, p)
		r, err := conn.do(ctx, cql.OpExecute, body, true)
		if err != nil {
			return 0, err
		}
		n, err := result(r)
		if write {
			n = 1
		}
		return n, err
	}
}

func idOf(ids [][]byte, i int) []byte {
	if ids == nil {
		return nil
	}
	return ids[i]
}

// wireStmt is a profile statement prepared on the wire session: its ids by connection and
// its consistencies.
type wireStmt struct {
	ids    [][]byte
	cl     cql.Consistency
	serial cql.Consistency // 0: none
	err    error
}

func (s *wireSession) stmt(ctx context.Context, text, cl, serial string) *wireStmt {
	st := &wireStmt{}
	st.ids, st.err = s.prepared(ctx, text)
	st.cl, st.serial = consistencies(s.cl, cl, serial)
	return st
}

// consistencies returns a query's consistency (its consistencyLevel, else the run's --cl)
// and serial consistency (0 without serialConsistencyLevel), both checked when the
// profile was read.
func consistencies(def cql.Consistency, cl, serial string) (cql.Consistency, cql.Consistency) {
	c := def
	if cl != "" {
		g, _ := gocql.ParseConsistencyWrapper(cl)
		c = cql.Consistency(g)
	}
	switch serial {
	case "SERIAL":
		return c, cql.Serial
	case "LOCAL_SERIAL":
		return c, cql.LocalSerial
	}
	return c, 0
}

// newProfileOp is cqlSession.newProfileOp on the wire client: the same mix, data and
// counts, each request built into the worker's own buffer.
func (s *wireSession) newProfileOp(ctx context.Context, w int, wl *workload) Op {
	p := wl.profile
	ci := w % len(s.conns)
	wk := &wireProfileWorker{s: s, p: p, ci: ci, conn: s.conns[ci], btype: wireBatchType(p),
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w))), g: newGen()}
	wk.g.useArena() // an op's values are encoded into its request before the next op
	pop := &wl.pop
	stats := wl.stats
	next := newMixer(p, stats)
	stmts := s.profileStmts(ctx, p)
	return func(ctx context.Context) (int, error) {
		best := next()
		st := stmts[best]
		if st.err != nil {
			return 0, st.err
		}
		start := time.Now()
		wk.g.reset()
		var rows, parts int64
		var err error
		if q := p.mix[best].query; q != nil {
			wk.g.partition(p.t, pop.next(wk.rng), &wk.part)
			rows, err = wk.read(ctx, st, q)
			parts = min(rows, 1)
		} else {
			rows, parts, err = wk.insert(ctx, st, pop)
		}
		stats.ops[best].record(time.Since(start), rows, parts, err)
		return int(rows), err
	}
}

// profileStmts prepares each of the profile's operations: its query, or the insert.
func (s *wireSession) profileStmts(ctx context.Context, p *profile) []*wireStmt {
	stmts := make([]*wireStmt, len(p.mix))
	for i, o := range p.mix {
		if o.query != nil {
			stmts[i] = s.stmt(ctx, o.query.cql, o.query.cl, o.query.serialCL)
		} else {
			stmts[i] = s.stmt(ctx, p.insertStmt, "", "")
		}
	}
	return stmts
}

// wireBatchType is the profile's batch type on the wire.
func wireBatchType(p *profile) byte {
	switch p.batchType() {
	case gocql.UnloggedBatch:
		return cql.BatchUnlogged
	case gocql.CounterBatch:
		return cql.BatchCounter
	}
	return cql.BatchLogged
}

// wireProfileWorker is one worker's state on the wire client: its connection, its
// generator and the buffers every op reuses.
type wireProfileWorker struct {
	s     *wireSession
	p     *profile
	ci    int
	conn  *rconn
	btype byte
	rng   *rand.Rand
	g     *gen
	part  ppart

	body          []byte
	vals, rowVals []cql.Value
	pick          []int64
	batch         cql.Batch
}

// do sends the worker's request body as op and returns a result's rows and paging state.
func (wk *wireProfileWorker) do(ctx context.Context, op cql.Opcode) (int, []byte, error) {
	r, err := wk.conn.do(ctx, op, wk.body, true)
	if err != nil {
		return 0, nil, err
	}
	if r.h.Opcode == cql.OpResult {
		return r.n, r.state, nil
	}
	_, err = result(r)
	return 0, nil, err
}

// read runs query q on the worker's partition, with values of one row (or of a row each
// for a multi-row query), through every page, and returns the rows read.
func (wk *wireProfileWorker) read(ctx context.Context, st *wireStmt, q *querySpec) (int64, error) {
	row := wk.rng.Int64N(wk.part.rows)
	wk.vals = wk.vals[:0]
	for _, c := range q.binds {
		if q.multirow {
			row = wk.rng.Int64N(wk.part.rows)
		}
		wk.vals = append(wk.vals, cql.Value{Bytes: wk.g.colValue(wk.p.t, c, &wk.part, row)})
	}
	params := cql.QueryParams{Consistency: st.cl, Flags: cql.QueryValues | cql.QueryPageSize, Values: wk.vals, PageSize: int32(wk.s.cfg.PageSize)}
	if st.serial != 0 {
		params.Flags |= cql.QuerySerialConsistency
		params.SerialConsistency = st.serial
	}
	var rows int64
	for {
		wk.body = wk.conn.execute(wk.body[:0], st.ids[wk.ci], params)
		n, state, err := wk.do(ctx, cql.OpExecute)
		rows += int64(n)
		if err != nil || len(state) == 0 {
			return rows, err
		}
		params.Flags |= cql.QueryPagingState
		params.PagingState = state
	}
}

// insert writes the rows the profile picks in its partitions per batch: alone, as an
// EXECUTE, or else in a batch of the profile's type.
func (wk *wireProfileWorker) insert(ctx context.Context, st *wireStmt, pop *population) (rows, parts int64, err error) {
	p := wk.p
	wk.batch = cql.Batch{Type: wk.btype, Consistency: st.cl, Queries: wk.batch.Queries[:0]}
	n := max(p.insert.partitions.sample(wk.rng, -1), 1)
	wk.rowVals = wk.rowVals[:0]
	for range n {
		wk.g.partition(p.t, pop.next(wk.rng), &wk.part)
		wk.pick = p.pickRows(&wk.part, wk.rng, wk.pick[:0])
		for _, i := range wk.pick {
			for _, c := range p.insertCols {
				wk.rowVals = append(wk.rowVals, cql.Value{Bytes: wk.g.colValue(p.t, c, &wk.part, i)})
			}
			wk.batch.Queries = append(wk.batch.Queries, cql.BatchQuery{Prepared: true, ID: st.ids[wk.ci]})
		}
		parts++
	}
	// Each row's values, from one array that every op reuses (taken once it is full).
	for j := range wk.batch.Queries {
		k := j * len(p.insertCols)
		wk.batch.Queries[j].Values = wk.rowVals[k : k+len(p.insertCols) : k+len(p.insertCols)]
	}
	rows = int64(len(wk.batch.Queries))
	if rows == 1 {
		wk.body = wk.conn.execute(wk.body[:0], st.ids[wk.ci], cql.QueryParams{Consistency: st.cl, Flags: cql.QueryValues, Values: wk.batch.Queries[0].Values})
		_, _, err = wk.do(ctx, cql.OpExecute)
		return rows, parts, err
	}
	wk.body = wk.batch.AppendBody(wk.body[:0], wk.conn.version)
	_, _, err = wk.do(ctx, cql.OpBatch)
	return rows, parts, err
}
