package pipeline

import (
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/sharding"
)

// Keys that SUPPORTED must not carry through the proxy as the node wrote them: they name
// ports of the node that a shard-aware driver (ScyllaDB's) would connect to directly,
// around the sidecar. They are replaced by the proxy's own shard-aware ports when it has
// them (shards.go), and removed otherwise.
var bypassKeys = [...]string{sharding.KeyAwarePort, sharding.KeyAwarePortSSL}

// shardConn is what a connection knows of its shard, from the SUPPORTED of its node
// connection (info, immutable once set), and its counters: the EXECUTEs whose partition
// key another shard owns (request side), and the time its responses spent in the proxy
// (response side), each written by one side only.
type shardConn struct {
	info sharding.Info // Shard is the connection's
	// cross is written by the request side only (the requests that cross a shard),
	// addedNanos by the response side only (Shard.Added): each has one writer (inc).
	cross, addedNanos atomic.Uint64
}

// shardShared is the proxy-wide part: its shard-aware ports, and the malformed SUPPORTED
// answers it saw.
type shardShared struct {
	awarePort, awarePortSSL atomic.Int32
	malformed               atomic.Uint64
	warnedMalformed         atomic.Bool
}
