package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/loadcheck/cqlconn"
)

// DialWire opens a session of loadcheck's own CQL client, which speaks protocol v5: gocql
// v1.7 stops at v4. It opens Options.Connections connections to the one target, and each
// worker sends on one of them.
func DialWire(ctx context.Context, cfg Options, addr string) (*Wire, error) {
	gcl, err := gocql.ParseConsistencyWrapper(cfg.CL)
	if err != nil {
		return nil, fmt.Errorf("consistency %q: %w", cfg.CL, err)
	}
	s := &Wire{cfg: cfg, cl: cql.Consistency(gcl)}
	opts := cqlconn.Options{TLS: cfg.TLS, Timeout: cfg.Timeout, ProtocolVersion: cfg.ProtocolVersion, Compression: cfg.Compression}
	for range cfg.Connections {
		c, err := cqlconn.Dial(ctx, opts, addr)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		s.conns = append(s.conns, c)
		if cfg.Keyspace != "" {
			if err := c.Query(ctx, "USE "+cql.QuoteName(cfg.Keyspace)); err != nil {
				s.Close()
				return nil, fmt.Errorf("connect to %s: keyspace %s: %w", addr, cfg.Keyspace, err)
			}
		}
	}
	return s, nil
}

// Wire is a session of the wire client (see Session), safe for concurrent use. Statements
// are prepared on each connection once, on first use.
type Wire struct {
	cfg   Options
	cl    cql.Consistency
	conns []*cqlconn.Conn
	mu    sync.Mutex
	ids   map[string][][]byte // statement text → id on each connection
}

// Close closes the session's connections.
func (s *Wire) Close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// prepared returns text's statement id on every connection, preparing it the first time.
func (s *Wire) prepared(ctx context.Context, text string) ([][]byte, error) {
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

// Exec runs text on the first connection, at consistency ONE.
func (s *Wire) Exec(ctx context.Context, text string) error {
	return s.conns[0].Query(ctx, text)
}

// wireStmt is a profile statement prepared on the wire session: its ids by connection and
// its consistencies.
type wireStmt struct {
	ids    [][]byte
	cl     cql.Consistency
	serial cql.Consistency // 0: none
	paged  bool            // by pages of Options.PageSize rows
	err    error
}

func (s *Wire) stmt(ctx context.Context, text, cl, serial string) *wireStmt {
	st := &wireStmt{}
	st.ids, st.err = s.prepared(ctx, text)
	st.cl, st.serial = consistencies(s.cl, cl, serial)
	return st
}

// consistencies returns a statement's consistency (its own, else the session's, def)
// and serial consistency (0 without one), both checked when the workload was read.
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

// Client gives worker w its client on the session: on connection w modulo
// Options.Connections, each request built into the worker's own buffer. The wire client
// sends no custom payload: a run with a trace context goes through gocql.
func (s *Wire) Client(w int, _ []byte) Client {
	ci := w % len(s.conns)
	return &wireClient{s: s, ci: ci, conn: s.conns[ci]}
}

// wireClient is a worker's client on the wire (see Client).
type wireClient struct {
	s     *Wire
	ci    int
	conn  *cqlconn.Conn
	stmts []wireStmt
	body  []byte
	vals  []cql.Value
	bat   cql.Batch
}

func (c *wireClient) Prepare(ctx context.Context, spec Stmt) (int, error) {
	st := c.s.stmt(ctx, spec.Text, spec.CL, spec.Serial)
	if st.err != nil {
		return 0, st.err
	}
	st.paged = spec.Paged
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

func (c *wireClient) Query(ctx context.Context, st int, vals [][]byte) (int64, error) {
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

func (c *wireClient) Write(ctx context.Context, st int, vals [][]byte) error {
	s := &c.stmts[st]
	c.body = c.conn.Execute(c.body[:0], s.ids[c.ci], cql.QueryParams{Consistency: s.cl, Flags: cql.QueryValues, Values: c.values(vals)})
	_, _, err := c.do(ctx, cql.OpExecute)
	return err
}

// batch sends the rows as one BATCH; a conditional one's result is read as any other's.
func (c *wireClient) Batch(ctx context.Context, typ byte, st int, vals [][]byte, perRow int, _ bool) error {
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
