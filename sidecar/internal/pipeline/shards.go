package pipeline

import (
	"errors"
	"strconv"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/sharding"
)

// ScyllaDB's shards, as the pipeline sees them: the shard of each connection, named by its
// node's SUPPORTED (learnShard); the proxy's own shard-aware ports, which SUPPORTED names
// in place of the node's (rewriteSupported); and each EXECUTE whose partition key another
// shard owns than its connection's (countShard). The transports' part, the node
// connection on the shard a client asked for, is package sidecar's.

// SetShardAwarePort records the proxy's shard-aware port, the TLS one with tls, which
// SUPPORTED names from then on in place of the node's.
func (s *Shared) SetShardAwarePort(port int, tls bool) {
	if tls {
		s.shards.awarePortSSL.Store(int32(port))
	} else {
		s.shards.awarePort.Store(int32(port))
	}
}

// ShardAwarePorts returns the proxy's shard-aware ports, plaintext and TLS (0: none).
func (s *Shared) ShardAwarePorts() [2]int32 {
	return [2]int32{s.shards.awarePort.Load(), s.shards.awarePortSSL.Load()}
}

// MalformedSupported counts the node's SUPPORTED answers whose sharding keys were
// malformed.
func (s *Shared) MalformedSupported() uint64 { return s.shards.malformed.Load() }

// Shard is a connection's ScyllaDB shard, as the transports and the proxy see it: its
// figures, and its restoring after a handover. The zero value is not usable: see
// Conn.Shard.
type Shard struct{ c *Conn }

// Shard returns the connection's shard.
func (c *Conn) Shard() Shard { return Shard{c} }

// ShardCounts are a connection's figures on its shard.
type ShardCounts struct {
	Shard             int
	Cross, AddedNanos uint64
}

// Counts returns the connection's shard figures, and false when its shard is not known
// (the node named none of several).
func (s Shard) Counts() (ShardCounts, bool) {
	sc := s.c.shard.Load()
	if sc == nil {
		return ShardCounts{}, false
	}
	return ShardCounts{Shard: sc.info.Shard, Cross: sc.cross.Load(), AddedNanos: sc.addedNanos.Load()}, true
}

// Info returns the connection's shard and its node's sharding, false when not known.
func (s Shard) Info() (sharding.Info, bool) {
	if sc := s.c.shard.Load(); sc != nil {
		return sc.info, true
	}
	return sharding.Info{}, false
}

// Restore sets the shard of a connection handed over by an old process: its node
// connection came with it, and so its shard. An Info that is not one of several shards is
// ignored.
func (s Shard) Restore(in sharding.Info) {
	if in.NrShards < 2 || in.NrShards > sharding.MaxShards || in.Shard < 0 || in.Shard >= in.NrShards || in.IgnoreMSB > 63 {
		return
	}
	s.c.shard.Store(&shardConn{info: in})
}

// Added adds the time n responses spent in the proxy, d nanoseconds each, to the
// connection's shard figures, when its shard is known. Response side.
func (s Shard) Added(n int, d int64) {
	if sc := s.c.shard.Load(); sc != nil && d > 0 {
		inc(&sc.addedNanos, uint64(n)*uint64(d))
	}
}

// replacePorts removes the node's shard-aware ports from a SUPPORTED and, when usable, puts
// the proxy's in their place. It reports whether opts changed.
func (s *Shared) replacePorts(opts map[string][]string, usable bool) bool {
	changed := false
	for _, k := range bypassKeys {
		if _, ok := opts[k]; ok {
			delete(opts, k)
			changed = true
		}
	}
	if !usable || !changed {
		return changed
	}
	ports := s.ShardAwarePorts()
	for i, k := range bypassKeys {
		if port := ports[i]; port != 0 {
			opts[k] = []string{strconv.Itoa(int(port))}
		}
	}
	return true
}

// learnShard reads the connection's shard from its node's SUPPORTED: nil when the node
// does not shard, has one shard, or says so in a malformed way, which is logged once and
// counted (MalformedSupported). usable says the sharding is well-formed, so that the
// proxy's shard-aware ports may be advertised. The proxy's hook (Settings.LearnSharding)
// sees every well-formed sharding first.
func learnShard(c *Conn, opts map[string][]string) (sc *shardConn, usable bool) {
	in, err := sharding.Parse(opts)
	switch {
	case errors.Is(err, sharding.ErrNotScylla):
		return nil, false
	case err != nil:
		c.sh.shards.malformed.Add(1)
		e := c.Debug()
		if !c.sh.shards.warnedMalformed.Swap(true) {
			e = c.Warn()
		}
		if e != nil {
			e.Err(err).Msg("the node's SUPPORTED: its sharding is malformed; no shard-aware port is advertised, and requests are not counted by shard")
		}
		return nil, false
	}
	if f := c.sh.LearnSharding; f != nil {
		f(in)
	}
	if in.NrShards < 2 {
		return nil, true
	}
	return &shardConn{info: in}, true
}

// countShard counts an EXECUTE whose partition key another shard owns than the
// connection's. The key comes from the bound values of the parsed request at the prepared
// statement's partition-key indexes (learnt from its PREPARED result); a statement not
// learnt, or a key with a null or unset part, is not counted.
func (s *Shared) countShard(f *cql.Frame, sc *shardConn) {
	r, ok := f.Request()
	if !ok {
		return
	}
	ps := s.Prepared.Lookup(r.ID)
	if ps == nil || len(ps.PKIndexes) == 0 {
		return
	}
	vals := r.Params.Values
	// The key is built on the stack: a longer one than buf costs an allocation, which
	// partition keys of that size are rare enough to pay.
	var buf [256]byte
	key := buf[:0]
	for _, j := range ps.PKIndexes {
		if int(j) >= len(vals) || vals[j].Bytes == nil {
			return
		}
		if len(ps.PKIndexes) == 1 {
			key = append(key, vals[j].Bytes...)
			break
		}
		if len(vals[j].Bytes) > 0xffff {
			return
		}
		key = sharding.AppendComponent(key, vals[j].Bytes)
	}
	if sc.info.ShardOf(sharding.Token(key)) != sc.info.Shard {
		inc(&sc.cross, 1)
	}
}
