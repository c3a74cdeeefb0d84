package node

import (
	"maps"
	"net"
	"net/netip"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/sharding"
)

// ScyllaDB's intranode sharding, emulated (Config.Shards): which shard a connection
// belongs to, what SUPPORTED says about it, and the count of requests sent to a shard
// that does not own their partition.

// ScyllaSupportedOptions are the keys a ScyllaDB node adds to SUPPORTED, with the values of
// a one-shard node using ScyllaDB's defaults; Config.ScyllaSupported turns them on.
var ScyllaSupportedOptions = map[string][]string{
	"SCYLLA_SHARD":                {"0"},
	"SCYLLA_NR_SHARDS":            {"1"},
	"SCYLLA_PARTITIONER":          {"org.apache.cassandra.dht.Murmur3Partitioner"},
	"SCYLLA_SHARDING_ALGORITHM":   {"biased-token-round-robin"},
	"SCYLLA_SHARDING_IGNORE_MSB":  {"12"},
	"SCYLLA_SHARD_AWARE_PORT":     {"19042"},
	"SCYLLA_SHARD_AWARE_PORT_SSL": {"19142"},
}

// assignShard picks the shard of a new connection from remote: its source port modulo the
// shards on the shard-aware port, else the shard with the fewest connections (the lowest
// on a tie). s.mu is held.
func (s *Server) assignShard(remote net.Addr, aware bool) int {
	if s.shardConns == nil {
		return 0
	}
	shard := 0
	if ap, err := netip.ParseAddrPort(remote.String()); aware && err == nil {
		shard = int(ap.Port()) % len(s.shardConns)
	} else if !aware {
		for i := range s.shardConns {
			if s.shardConns[i].Load() < s.shardConns[shard].Load() {
				shard = i
			}
		}
	}
	s.shardConns[shard].Add(1)
	return shard
}

// sharding describes the node's sharding as a driver learns it.
func (s *Server) sharding() sharding.Info {
	in := sharding.Info{NrShards: len(s.shardConns), IgnoreMSB: 12}
	if p := int(s.awarePort.Load()); s.cfg.TLS != nil {
		in.AwarePortSSL = p
	} else {
		in.AwarePort = p
	}
	return in
}

// scyllaOptions adds ScyllaDB's keys to a SUPPORTED for connection c.
func (c *conn) scyllaOptions(opts map[string][]string) {
	if c.s.shardConns == nil {
		maps.Copy(opts, ScyllaSupportedOptions)
	} else {
		in := c.s.sharding()
		in.Shard = c.shard
		maps.Copy(opts, in.Options())
	}
	for k, v := range c.s.cfg.ScyllaOverride {
		if v == nil {
			delete(opts, k)
		} else {
			opts[k] = v
		}
	}
}

// CrossShardRequests returns the number of EXECUTEs whose partition key is owned by
// another shard than their connection's, with Config.Shards.
func (s *Server) CrossShardRequests() uint64 { return s.crossShard.Load() }

// ShardConnections returns the number of open connections of each shard, nil without
// Config.Shards.
func (s *Server) ShardConnections() []int64 {
	if s.shardConns == nil {
		return nil
	}
	out := make([]int64, len(s.shardConns))
	for i := range s.shardConns {
		out[i] = s.shardConns[i].Load()
	}
	return out
}

// countShard counts e as a cross-shard request when the shard that owns its partition key
// is not the connection's. A statement whose partition key is not all bound is not counted.
func (c *conn) countShard(e *cql.Execute) {
	idx := c.s.engine.PartitionKeyIndexes(e.ID)
	if len(idx) == 0 || len(c.s.shardConns) < 2 {
		return
	}
	vals := e.Params.Values
	var parts [8][]byte
	if len(idx) > len(parts) {
		return
	}
	for i, j := range idx {
		if int(j) >= len(vals) || vals[j].Bytes == nil {
			return
		}
		parts[i] = vals[j].Bytes
	}
	key, ok := sharding.RoutingKey(c.rk[:0], parts[:len(idx)]...)
	c.rk = key
	if !ok {
		return
	}
	if c.s.sharding().ShardOf(sharding.Token(key)) != c.shard {
		c.s.crossShard.Add(1)
	}
}
