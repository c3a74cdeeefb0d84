package client

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

// DialGocql opens a gocql session to addr, with host lookup on but load for that host
// alone (or, for a cluster, every host it lists).
func DialGocql(ctx context.Context, cfg Options, addr string) (*Gocql, error) {
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
		return nil, fmt.Errorf("consistency %q: %w", cfg.CL, err)
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
	if cfg.Cluster {
		// A cluster of sidecars: the load spreads over every host the target lists in its
		// system.peers (the other sidecars), routed to each key's replica.
		c.HostFilter = nil
		c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	}
	c.Consistency = cl
	c.Keyspace = cfg.Keyspace
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
		return &Gocql{s: r.s, cl: cl, cfg: cfg}, nil
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

// Gocql is a gocql session (see Session), safe for concurrent use.
type Gocql struct {
	s   *gocql.Session
	cl  gocql.Consistency
	cfg Options
}

// Gocql is the gocql session itself, for what only gocql does: a profile's table
// description, preload and trial queries.
func (s *Gocql) Gocql() *gocql.Session { return s.s }

// Exec runs text at the session's consistency.
func (s *Gocql) Exec(ctx context.Context, text string) error {
	return s.s.Query(text).WithContext(ctx).Exec()
}

// Client gives worker w its client on the session: its statements are gocql queries of
// its own, bound once to values it rewrites in place, and carry the traceparent tp in
// their custom payload when it is not nil.
func (s *Gocql) Client(_ int, tp []byte) Client {
	return &cqlClient{s: s, tp: tp}
}

// cqlClient is a worker's client on gocql (see Client). Its queries are bound to the
// context they were prepared with: a gocql query's WithContext copies it.
type cqlClient struct {
	s     *Gocql
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

func (c *cqlClient) Prepare(ctx context.Context, spec Stmt) (int, error) {
	cl := c.s.cl
	if spec.CL != "" {
		cl, _ = gocql.ParseConsistencyWrapper(spec.CL)
	}
	q := c.s.s.Query(spec.Text).Consistency(cl).WithContext(ctx)
	if spec.Paged {
		q.PageSize(c.s.cfg.PageSize)
	}
	switch spec.Serial {
	case "LOCAL_SERIAL":
		q.SerialConsistency(gocql.LocalSerial)
	case "SERIAL":
		q.SerialConsistency(gocql.Serial)
	}
	if c.tp != nil {
		q.CustomPayload(map[string][]byte{TraceparentKey: c.tp})
	}
	c.stmts = append(c.stmts, cqlStmt{text: spec.Text, cl: cl, q: q})
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

func (c *cqlClient) Query(_ context.Context, st int, vals [][]byte) (int64, error) {
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

func (c *cqlClient) Write(_ context.Context, st int, vals [][]byte) error {
	return c.bind(st, vals).Exec()
}

func (c *cqlClient) Batch(ctx context.Context, typ byte, st int, vals [][]byte, perRow int, cas bool) error {
	s := &c.stmts[st]
	b := c.s.s.NewBatch(gocql.BatchType(typ)).WithContext(ctx)
	b.SetConsistency(s.cl)
	for k := 0; k+perRow <= len(vals); k += perRow {
		args := make([]any, perRow)
		for j, v := range vals[k : k+perRow] {
			args[j] = Raw(v)
		}
		b.Query(s.text, args...)
	}
	if cas {
		_, _, err := c.s.s.ExecuteBatchCAS(b)
		return err
	}
	return c.s.s.ExecuteBatch(b)
}

// Close closes the session.
func (s *Gocql) Close() { s.s.Close() }

// Raw is a value already in its wire form, sent as is.
type Raw []byte

// MarshalCQL returns the value as it is: it was made for the column's type.
func (v Raw) MarshalCQL(gocql.TypeInfo) ([]byte, error) { return v, nil }
