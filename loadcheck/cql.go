package loadcheck

import (
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
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

// newOp builds a worker's operation. Its queries and bound values are made once and reused:
// per operation, only the key and column bytes change in place, so the loop allocates
// nothing beyond what gocql does itself.
func (s *cqlSession) newOp(ctx context.Context, w int, wl *workload) Op {
	if wl.profile != nil {
		return s.newProfileOp(ctx, w, wl, s.cfg)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
	key := make([]byte, keyLen)
	cols := make([][]byte, colCount)
	wargs := []any{key, nil, nil, nil, nil, nil}
	for i := range cols {
		cols[i] = make([]byte, colLen)
		wargs[i+1] = cols[i]
	}
	ins := s.s.Query(cqlInsert, wargs...).Consistency(s.cl).Idempotent(true).WithContext(ctx)
	sel := s.s.Query(cqlSelect, key).Consistency(s.cl).Idempotent(true).WithContext(ctx)
	tp := newTraceparent(wl.traceContext)
	if tp != nil {
		// One payload per worker, its traceparent rewritten in place before each request:
		// a worker's requests go out one at a time, after gocql has encoded the last.
		payload := map[string][]byte{traceparentKey: tp}
		ins.CustomPayload(payload)
		sel.CustomPayload(payload)
	}
	pop := &wl.pop
	writeFrac := wl.writeFrac
	return func(context.Context) (int, error) {
		putKey(key, pop.next(rng))
		if tp != nil {
			fillTraceparent(rng, tp)
		}
		if writeFrac >= 1 || writeFrac > 0 && rng.Float64() < writeFrac {
			fillValues(rng, cols)
			return 1, ins.Exec()
		}
		it := sel.Iter()
		n := it.NumRows()
		return n, it.Close()
	}
}

func (s *cqlSession) close() { s.s.Close() }
