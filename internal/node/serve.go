package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/node/engine"
)

// A Server's making and its listeners: the accept loops that give each connection its
// shard, TLS when configured, and a goroutine of its own.

// New returns a Server configured by cfg. The engine is created when Serve learns the
// listening address, so that system.local reports it.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, conns: make(map[*conn]struct{}), nop: zerolog.Nop()}
	if cfg.Shards > 0 {
		s.shardConns = make([]atomic.Int64, cfg.Shards)
	}
	if u, p, ok := strings.Cut(cfg.Auth, ":"); ok {
		s.user, s.pass = u, p
	}
	if cfg.Engine != nil {
		s.engine = cfg.Engine
		s.engine.OnSchemaChange(s.broadcastSchemaChange)
	}
	return s
}

// Serve accepts connections on ln until ctx is done or ln fails, then closes every
// connection. It returns nil when ctx ended it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ap, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		return fmt.Errorf("node: listener address %s: %w", ln.Addr(), err)
	}
	s.mu.Lock()
	s.addr = ap
	if s.engine == nil {
		s.engine = engine.NewEngine(engine.EngineConfig{RPCAddr: ap, ClusterName: s.cfg.ClusterName, Auth: s.cfg.Auth,
			NoMaterializedViews: s.cfg.NoMaterializedViews, MemoryLimit: s.cfg.MemoryLimit})
		s.engine.OnSchemaChange(s.broadcastSchemaChange)
	}
	s.mu.Unlock()
	return s.serve(ctx, ln, false)
}

// ServeShardAware accepts connections on ln, the node's shard-aware port, until ctx is
// done: a connection from source port p belongs to shard p % Config.Shards, and SUPPORTED
// names ln's port as SCYLLA_SHARD_AWARE_PORT (SCYLLA_SHARD_AWARE_PORT_SSL with TLS). It
// needs Config.Shards and an engine: Config.Engine, or Serve started first.
func (s *Server) ServeShardAware(ctx context.Context, ln net.Listener) error {
	if s.cfg.Shards <= 0 {
		ln.Close()
		return errors.New("node: a shard-aware port needs Config.Shards")
	}
	ap, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		return fmt.Errorf("node: listener address %s: %w", ln.Addr(), err)
	}
	s.awarePort.Store(int32(ap.Port()))
	return s.serve(ctx, ln, true)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, aware bool) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer func() {
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("node: accept: %w", err)
		}
		s.accepted.Add(1)
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		c := newConn(s, s.wrapTLS(nc))
		s.mu.Lock()
		s.conns[c] = struct{}{}
		c.shard = s.assignShard(nc.RemoteAddr(), aware)
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			if s.shardConns != nil {
				s.shardConns[c.shard].Add(-1)
			}
			s.mu.Unlock()
		}()
	}
}
