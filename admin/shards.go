package admin

// Shards is the ScyllaDB part of /tracecar/status: what the sidecar sees of its node's
// shards. It is present once the node has named a connection's shard in SUPPORTED, or a
// connection came on the sidecar's shard-aware port.
type Shards struct {
	// RequestsByShard counts the requests of the connections on each shard, by shard
	// number.
	RequestsByShard map[string]uint64 `json:"requests_by_shard"`
	// CrossShardRequests counts the EXECUTEs whose partition key another shard owns than
	// their connection's: 0 for shard-aware drivers, about (n-1)/n of them for others.
	CrossShardRequests uint64 `json:"cross_shard_requests"`
	// ShardAwarePaired counts the connections on the shard-aware port that got the shard
	// they asked for; ShardAwareFallbacks those that got an ordinary node connection
	// instead, by reason.
	ShardAwarePaired    uint64            `json:"shard_aware_paired"`
	ShardAwareFallbacks map[string]uint64 `json:"shard_aware_fallbacks"`
	// MalformedSupported counts the node's SUPPORTED answers whose sharding keys were
	// malformed.
	MalformedSupported uint64 `json:"malformed_supported"`
}

// WithShards makes /tracecar/status report the shard figures that f returns (nil: none
// yet).
func WithShards(f func() *Shards) Option {
	return func(s *Server) { s.shards = f }
}
