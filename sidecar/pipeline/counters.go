package pipeline

import (
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
)

// Counters are the counters of one connection. Each is written by one goroutine only,
// with a load and a store rather than a locked add, and read by Stats.
type Counters struct {
	// Requests are by opcode: a request's is below 16 (AUTH_RESPONSE is 15), and a frame
	// with a higher one counts as 0 (ERROR, which no request is), apart from the real ones.
	Requests  [16]atomic.Uint64
	BytesIn   atomic.Uint64 // request bytes read from the client
	Responses atomic.Uint64
	Rewritten atomic.Uint64
	BytesOut  atomic.Uint64 // response bytes written to the client
	// v5 Segments read and re-encoded, by side: 0 from the client, 1 from the node.
	Segments, Resegmented [2]atomic.Uint64
}

// Counts are summed connCounters.
type Counts struct {
	Requests                                [16]uint64
	BytesIn, Responses, Rewritten, BytesOut uint64
	Segments, Resegmented                   [2]uint64
}

func Inc(v *atomic.Uint64, n uint64) { v.Store(v.Load() + n) }

// RequestSlot returns the index of connCounters.requests that counts a request of opcode op.
func RequestSlot(op cql.Opcode) int {
	if op >= 16 {
		return 0
	}
	return int(op)
}

func (c *Counters) AddTo(sum *Counts) {
	for i := range c.Requests {
		sum.Requests[i] += c.Requests[i].Load()
	}
	sum.BytesIn += c.BytesIn.Load()
	sum.Responses += c.Responses.Load()
	sum.Rewritten += c.Rewritten.Load()
	sum.BytesOut += c.BytesOut.Load()
	for i := range c.Segments {
		sum.Segments[i] += c.Segments[i].Load()
		sum.Resegmented[i] += c.Resegmented[i].Load()
	}
}
