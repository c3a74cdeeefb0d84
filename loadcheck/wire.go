package loadcheck

import (
	"context"
	"fmt"
	"sync"

	"github.com/gocql/gocql"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/loadcheck/cqlconn"
)

// wireDriver drives the load through loadcheck's own CQL client, the replay's (cqlconn),
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
		c, err := cqlconn.Dial(ctx, cfg.connOptions(), addr)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		s.conns = append(s.conns, c)
		if cfg.keyspace != "" {
			if err := c.Query(ctx, "USE "+quoteName(cfg.keyspace)); err != nil {
				s.close()
				return nil, fmt.Errorf("connect to %s: keyspace %s: %w", addr, cfg.keyspace, err)
			}
		}
	}
	return s, nil
}

// connOptions are how the wire client and the replay make their connections.
func (c *Config) connOptions() cqlconn.Options {
	return cqlconn.Options{TLS: c.TLS, Timeout: c.Timeout, ProtocolVersion: c.ProtocolVersion, Compression: c.Compression}
}

// wireSession is a session of the wire client. Statements are prepared on each
// connection once, on first use.
type wireSession struct {
	cfg   *Config
	cl    cql.Consistency
	conns []*cqlconn.Conn
	mu    sync.Mutex
	ids   map[string][][]byte // statement text → id on each connection
}

func (s *wireSession) close() {
	for _, c := range s.conns {
		c.Close()
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
		id, err := c.Prepare(ctx, text)
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
		if err := s.conns[0].Query(ctx, stmt); err != nil {
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
		r, err := s.conns[0].Do(ctx, cql.OpExecute, s.conns[0].Execute(nil, ids[0], p), true)
		if err != nil {
			return false, fmt.Errorf("check population: %w", err)
		}
		n, err := cqlconn.Result(r)
		if err != nil {
			return false, fmt.Errorf("check population: %w", err)
		}
		if n == 0 {
			return true, nil
		}
	}
	return false, nil
}

// wireStmt is a profile statement prepared on the wire session: its ids by connection and
// its consistencies.
type wireStmt struct {
	ids    [][]byte
	cl     cql.Consistency
	serial cql.Consistency // 0: none
	paged  bool            // by pages of --page-size rows
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

// client gives worker w its client on the session: on connection w modulo
// --connections, each request built into the worker's own buffer. The wire client sends
// no custom payload: a run with a trace context goes through gocql (checkWire).
func (s *wireSession) client(_ context.Context, w int, _ []byte) client {
	ci := w % len(s.conns)
	return &wireClient{s: s, ci: ci, conn: s.conns[ci]}
}

// wireClient is a worker's client on the wire (see client).
type wireClient struct {
	s     *wireSession
	ci    int
	conn  *cqlconn.Conn
	stmts []wireStmt
	body  []byte
	vals  []cql.Value
	bat   cql.Batch
}

func (c *wireClient) prepare(ctx context.Context, spec stmtSpec) (int, error) {
	st := c.s.stmt(ctx, spec.text, spec.cl, spec.serial)
	if st.err != nil {
		return 0, st.err
	}
	st.paged = spec.paged
	c.stmts = append(c.stmts, *st)
	return len(c.stmts) - 1, nil
}

// values are vals as the codec takes them, in the worker's buffer.
func (c *wireClient) values(vals [][]byte) []cql.Value {
	c.vals = c.vals[:0]
	for _, v := range vals {
		c.vals = append(c.vals, cql.Value{Bytes: v})
	}
	return c.vals
}

// do sends the worker's request body as op and returns a result's rows and paging state.
func (c *wireClient) do(ctx context.Context, op cql.Opcode) (int, []byte, error) {
	r, err := c.conn.Do(ctx, op, c.body, true)
	if err != nil {
		return 0, nil, err
	}
	if r.Header.Opcode == cql.OpResult {
		return r.N, r.State, nil
	}
	_, err = cqlconn.Result(r)
	return 0, nil, err
}

func (c *wireClient) query(ctx context.Context, st int, vals [][]byte) (int64, error) {
	s := &c.stmts[st]
	params := cql.QueryParams{Consistency: s.cl, Flags: cql.QueryValues, Values: c.values(vals)}
	if s.paged {
		params.Flags |= cql.QueryPageSize
		params.PageSize = int32(c.s.cfg.PageSize)
	}
	if s.serial != 0 {
		params.Flags |= cql.QuerySerialConsistency
		params.SerialConsistency = s.serial
	}
	var rows int64
	for {
		c.body = c.conn.Execute(c.body[:0], s.ids[c.ci], params)
		n, state, err := c.do(ctx, cql.OpExecute)
		rows += int64(n)
		if err != nil || len(state) == 0 {
			return rows, err
		}
		params.Flags |= cql.QueryPagingState
		params.PagingState = state
	}
}

func (c *wireClient) write(ctx context.Context, st int, vals [][]byte) error {
	s := &c.stmts[st]
	c.body = c.conn.Execute(c.body[:0], s.ids[c.ci], cql.QueryParams{Consistency: s.cl, Flags: cql.QueryValues, Values: c.values(vals)})
	_, _, err := c.do(ctx, cql.OpExecute)
	return err
}

// batch sends the rows as one BATCH; a conditional one's result is read as any other's.
func (c *wireClient) batch(ctx context.Context, typ byte, st int, vals [][]byte, perRow int, _ bool) error {
	s := &c.stmts[st]
	all := c.values(vals)
	c.bat = cql.Batch{Type: typ, Consistency: s.cl, Queries: c.bat.Queries[:0]}
	for k := 0; k+perRow <= len(all); k += perRow {
		c.bat.Queries = append(c.bat.Queries, cql.BatchQuery{Prepared: true, ID: s.ids[c.ci], Values: all[k : k+perRow : k+perRow]})
	}
	c.body = c.bat.AppendBody(c.body[:0], c.conn.Version())
	_, _, err := c.do(ctx, cql.OpBatch)
	return err
}
