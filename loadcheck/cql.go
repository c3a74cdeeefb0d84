package loadcheck

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"time"

	"github.com/gocql/gocql"
	"github.com/tracecar/tracecar/internal/cql"
)

// cqlDriver connects with gocql.
type cqlDriver struct{}

func (cqlDriver) connect(ctx context.Context, cfg *Config, addr string) (session, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("target %q: bad port", addr)
	}
	cl, err := gocql.ParseConsistencyWrapper(cfg.CL)
	if err != nil {
		return nil, usageErrorf("--cl %q: %v", cfg.CL, err)
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}

	c := gocql.NewCluster(addr)
	// Host lookup stays on, so the session sees system.local and system.peers as any driver
	// does. Discovered hosts get this port, and the filter keeps exactly the given host:
	// through a sidecar, the node's address never receives load.
	c.Port = port
	c.HostFilter = pinFilter(ips, port)
	if cfg.cluster() {
		// A cluster of sidecars: the load spreads over every host the target lists in its
		// system.peers (the other sidecars), routed to each key's replica.
		c.HostFilter = nil
		c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	}
	c.Consistency = cl
	c.Keyspace = cfg.keyspace
	c.ProtoVersion = cfg.ProtocolVersion // 0: negotiated
	c.Timeout = cfg.Timeout
	c.ConnectTimeout = 5 * time.Second
	c.NumConns = cfg.Connections
	if cfg.Concurrency <= cfg.Connections {
		// Each connection carries one request at a time: gocql's write coalescing
		// (a ~200 µs wait for more frames) would only add latency.
		c.WriteCoalesceWaitTime = 0
	}
	c.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 0}
	c.Logger = log.New(io.Discard, "", 0)
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName = host // the certificate is checked against the address dialled
		}
		c.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: !tc.InsecureSkipVerify}
	}
	switch cfg.Compression {
	case "lz4":
		c.Compressor = cql.LZ4{}
	case "snappy":
		c.Compressor = gocql.SnappyCompressor{}
	}
	type result struct {
		s   *gocql.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.CreateSession()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("connect to %s: %w (loadcheck uses only that host: the rpc_address in its system.local must be the address dialed)", addr, r.err)
		}
		return &cqlSession{s: r.s, cl: cl, cfg: cfg}, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// pinFilter accepts only hosts at one of ips and port.
func pinFilter(ips []net.IPAddr, port int) gocql.HostFilter {
	return gocql.HostFilterFunc(func(h *gocql.HostInfo) bool {
		if h.Port() != port {
			return false
		}
		for _, ip := range ips {
			if ip.IP.Equal(h.ConnectAddress()) {
				return true
			}
		}
		return false
	})
}

type cqlSession struct {
	s   *gocql.Session
	cl  gocql.Consistency
	cfg *Config
}

func (s *cqlSession) createSchema(ctx context.Context) error {
	for _, stmt := range []string{cqlKeyspace, cqlTable} {
		if err := s.s.Query(stmt).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("create schema: %s: %w", stmt, err)
		}
	}
	return nil
}

func (s *cqlSession) missing(ctx context.Context, keys []int64) (bool, error) {
	key := make([]byte, keyLen)
	for _, k := range keys {
		putKey(key, k)
		it := s.s.Query(cqlSelect, key).Consistency(s.cl).WithContext(ctx).Iter()
		n := it.NumRows()
		if err := it.Close(); err != nil {
			return false, fmt.Errorf("check population: %w", err)
		}
		if n == 0 {
			return true, nil
		}
	}
	return false, nil
}

// client gives worker w its client on the session: its statements are gocql queries of
// its own, bound once to values it rewrites in place, and carry the traceparent tp in
// their custom payload when it is not nil.
func (s *cqlSession) client(ctx context.Context, _ int, tp []byte) client {
	return &cqlClient{s: s, ctx: ctx, tp: tp}
}

// cqlClient is a worker's client on gocql (see client). Its queries are bound to the
// context they were prepared with: a gocql query's WithContext copies it.
type cqlClient struct {
	s     *cqlSession
	ctx   context.Context
	tp    []byte
	stmts []cqlStmt
}

// cqlStmt is a statement of a cqlClient: its query, bound once to refs, whose bytes each
// use rewrites.
type cqlStmt struct {
	text string
	cl   gocql.Consistency
	q    *gocql.Query
	refs []rawRef
}

// rawRef is a value already in its wire form, sent as is, which the caller may point
// at other bytes between requests without binding the query again.
type rawRef struct{ b []byte }

func (r *rawRef) MarshalCQL(gocql.TypeInfo) ([]byte, error) { return r.b, nil }

func (c *cqlClient) prepare(_ context.Context, spec stmtSpec) (int, error) {
	cl := c.s.cl
	if spec.cl != "" {
		cl, _ = parseCL(spec.cl)
	}
	q := c.s.s.Query(spec.text).Consistency(cl).WithContext(c.ctx)
	if spec.paged {
		q.PageSize(c.s.cfg.PageSize)
	}
	switch spec.serial {
	case "LOCAL_SERIAL":
		q.SerialConsistency(gocql.LocalSerial)
	case "SERIAL":
		q.SerialConsistency(gocql.Serial)
	}
	if c.tp != nil {
		q.CustomPayload(map[string][]byte{traceparentKey: c.tp})
	}
	c.stmts = append(c.stmts, cqlStmt{text: spec.text, cl: cl, q: q})
	return len(c.stmts) - 1, nil
}

// bind points st's query at vals, binding it again only when their count changes.
func (c *cqlClient) bind(st int, vals [][]byte) *gocql.Query {
	s := &c.stmts[st]
	if len(s.refs) != len(vals) {
		s.refs = make([]rawRef, len(vals))
		args := make([]any, len(vals))
		for i := range s.refs {
			args[i] = &s.refs[i]
		}
		s.q.Bind(args...)
	}
	for i, v := range vals {
		s.refs[i].b = v
	}
	return s.q
}

func (c *cqlClient) query(_ context.Context, st int, vals [][]byte) (int64, error) {
	q := c.bind(st, vals)
	var rows int64
	var state []byte
	for {
		it := q.PageState(state).Iter()
		rows += int64(it.NumRows())
		state = it.PageState()
		if err := it.Close(); err != nil {
			return rows, err
		}
		if len(state) == 0 {
			return rows, nil
		}
	}
}

func (c *cqlClient) write(_ context.Context, st int, vals [][]byte) error {
	return c.bind(st, vals).Exec()
}

func (c *cqlClient) batch(ctx context.Context, typ byte, st int, vals [][]byte, perRow int, cas bool) error {
	s := &c.stmts[st]
	b := c.s.s.NewBatch(gocql.BatchType(typ)).WithContext(ctx)
	b.SetConsistency(s.cl)
	for k := 0; k+perRow <= len(vals); k += perRow {
		args := make([]any, perRow)
		for j, v := range vals[k : k+perRow] {
			args[j] = rawValue(v)
		}
		b.Query(s.text, args...)
	}
	if cas {
		_, _, err := c.s.s.ExecuteBatchCAS(b)
		return err
	}
	return c.s.s.ExecuteBatch(b)
}

func (s *cqlSession) close() { s.s.Close() }
