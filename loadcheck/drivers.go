package loadcheck

import (
	"context"
	"fmt"

	"github.com/tracecar/tracecar/loadcheck/client"
	"github.com/tracecar/tracecar/loadcheck/cqlconn"
)

// driver opens sessions to a target. The real ones are gocql's and the wire client's;
// tests use fakes.
type driver interface {
	connect(ctx context.Context, cfg *Config, addr string) (session, error)
}

// session is one client session to one target, used for one run.
type session = client.Session

// cqlDriver connects with gocql.
type cqlDriver struct{}

func (cqlDriver) connect(ctx context.Context, cfg *Config, addr string) (session, error) {
	return client.DialGocql(ctx, cfg.clientOptions(), addr)
}

// wireDriver drives the load through loadcheck's own CQL client, the replay's (cqlconn),
// which speaks protocol v5: gocql v1.7 stops at v4.
type wireDriver struct{}

func (wireDriver) connect(ctx context.Context, cfg *Config, addr string) (session, error) {
	return client.DialWire(ctx, cfg.clientOptions(), addr)
}

// clientOptions are how the clients make their sessions.
func (c *Config) clientOptions() client.Options {
	return client.Options{CL: c.CL, Keyspace: c.keyspace, ProtocolVersion: c.ProtocolVersion, Timeout: c.Timeout,
		Connections: c.Connections, Concurrency: c.Concurrency, TLS: c.TLS, Compression: c.Compression,
		PageSize: c.PageSize, Cluster: c.cluster()}
}

// connOptions are how the replay makes its connections.
func (c *Config) connOptions() cqlconn.Options {
	return cqlconn.Options{TLS: c.TLS, Timeout: c.Timeout, ProtocolVersion: c.ProtocolVersion, Compression: c.Compression}
}

// createSchema creates the built-in workloads' keyspace and table when they do not exist.
func createSchema(ctx context.Context, s session) error {
	for _, stmt := range []string{cqlKeyspace, cqlTable} {
		if err := s.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("create schema: %s: %w", stmt, err)
		}
	}
	return nil
}

// missing reports whether any of the keys has no row in the built-in workloads' table.
func missing(ctx context.Context, s session, keys []int64) (bool, error) {
	c := s.Client(0, nil)
	sel, err := c.Prepare(ctx, client.Stmt{Text: cqlSelect})
	if err != nil {
		return false, fmt.Errorf("check population: %w", err)
	}
	key := make([]byte, keyLen)
	vals := [][]byte{key}
	for _, k := range keys {
		putKey(key, k)
		n, err := c.Query(ctx, sel, vals)
		if err != nil {
			return false, fmt.Errorf("check population: %w", err)
		}
		if n == 0 {
			return true, nil
		}
	}
	return false, nil
}
