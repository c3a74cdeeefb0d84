package admin

import "github.com/tracecar/tracecar/admin/adminapi"

// Shards is the ScyllaDB part of /tracecar/status.
type Shards = adminapi.Shards

// WithShards makes /tracecar/status report the shard figures that f returns (nil: none
// yet).
func WithShards(f func() *Shards) Option {
	return func(s *Server) { s.shards = f }
}
