package pipeline

import (
	"bytes"

	"github.com/tracecar/tracecar/internal/cql"
)

// FrameLimit returns the largest frame, header included, that the client may send now.
func (c *Conn) FrameLimit() uint64 {
	if !c.ready.Load() {
		return min(cql.MaxStartupFrameSize, uint64(c.sh.MaxFrame))
	}
	return uint64(c.sh.MaxFrame)
}

// TooBig returns the ProtocolError for a frame whose claimed body of n bytes is over the
// connection's limit, or nil. Its text is Cassandra 4's.
func (c *Conn) TooBig(stream int16, n uint32) *ProtocolError {
	limit := c.FrameLimit()
	if uint64(n)+cql.HeaderSize <= limit {
		return nil
	}
	c.sh.TooBig.Add(1)
	return &ProtocolError{Stream: stream, Msg: cql.FrameTooBigMessage(n, int(limit))}
}

// noteHandshake raises the frame limit once the node has answered STARTUP with READY, or
// authentication with AUTH_SUCCESS. It is called by pipeline.response, on either data path.
func (c *Conn) noteHandshake(op cql.Opcode) {
	if (op == cql.OpReady || op == cql.OpAuthSuccess) && !c.ready.Load() {
		c.ready.Store(true)
	}
}

// rewriteSupported returns a SUPPORTED response whose shard-aware ports are the proxy's
// (or absent), or frame itself when it names none. The other SCYLLA_* keys (the
// connection's shard, the shard count, partitioner, sharding algorithm) pass, so that the
// node's SCYLLA_SHARD for this connection reaches the client unchanged. It also records
// the connection's shard, for the per-shard figures.
//
// A node answers every connection's OPTIONS with the same frame but for its stream id (and,
// with shards, SCYLLA_SHARD), so the last ones rewritten are kept, one per shard
// (Shared.supported): a frame like one of them costs a copy, not the decoding of its
// multimap and an encoding (about 1.2 KiB of garbage for every new connection).
func (c *Conn) rewriteSupported(f *cql.Frame) []byte {
	frame := f.Raw()
	ports := c.sh.ShardAwarePorts()
	if last := c.sh.supported.find(frame, ports); last != nil {
		if last.shard != nil {
			c.shard.Store(&shardConn{info: *last.shard}) // once per connection
		}
		if last.out == nil {
			return frame
		}
		inc(&c.Counters.Rewritten, 1) // as encode counts the first
		c.Debug().Msg(supportedRewritten)
		return last.withStream(frame)
	}
	h, prefix, body, comp, ok := responseBody(f)
	if !ok || h.Opcode != cql.OpSupported {
		return frame
	}
	m, err := cql.DecodeSupported(body)
	if err != nil {
		return frame
	}
	sc, usable := learnShard(c, m.Options)
	entry := &supportedRewrite{in: bytes.Clone(frame), ports: ports}
	if sc != nil {
		entry.shard = &sc.info
		c.shard.Store(sc)
	}
	if !c.sh.replacePorts(m.Options, usable) {
		c.sh.supported.store(entry)
		return frame
	}
	out, ok := c.encode(h, prefix, m, comp)
	if !ok {
		return frame
	}
	entry.out = bytes.Clone(out)
	c.sh.supported.store(entry)
	c.Debug().Msg(supportedRewritten)
	return out
}

const supportedRewritten = "SUPPORTED: the shard-aware ports are the sidecar's, or removed"
