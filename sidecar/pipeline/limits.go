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

// Keys that SUPPORTED must not carry through the proxy: they name ports of the node that a
// shard-aware driver (ScyllaDB's) would connect to directly, around the sidecar.
var bypassKeys = [...]string{"SCYLLA_SHARD_AWARE_PORT", "SCYLLA_SHARD_AWARE_PORT_SSL"}

// rewriteSupported returns a SUPPORTED response without the keys that let a driver bypass
// the proxy, or frame itself when it has none of them. The other SCYLLA_* keys (shard
// count, partitioner, sharding algorithm) pass: a driver may still compute shards, it just
// cannot reach them by another port.
//
// A node answers every connection's OPTIONS with the same frame but for its stream id, so
// the last one rewritten is kept (Proxy.supported): a frame like it costs a copy, not the
// decoding of its multimap and an encoding (about 1.2 KiB of garbage for every new
// connection).
func (c *Conn) rewriteSupported(f *cql.Frame) []byte {
	frame := f.Raw()
	if last := c.sh.supported.Load(); last != nil && last.matches(frame) {
		if last.out == nil {
			return frame
		}
		Inc(&c.Counters.Rewritten, 1) // as encode counts the first
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
	found := false
	for _, k := range bypassKeys {
		if _, ok := m.Options[k]; ok {
			delete(m.Options, k)
			found = true
		}
	}
	if !found {
		c.sh.supported.Store(&supportedRewrite{in: bytes.Clone(frame)})
		return frame
	}
	out, ok := c.encode(h, prefix, m, comp)
	if !ok {
		return frame
	}
	c.sh.supported.Store(&supportedRewrite{in: bytes.Clone(frame), out: bytes.Clone(out)})
	c.Debug().Msg(supportedRewritten)
	return out
}

const supportedRewritten = "SUPPORTED: removed the shard-aware ports"
