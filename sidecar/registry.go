package sidecar

import (
	"sync"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/sidecar/internal/pipeline"
)

// The Proxy and its connections (see "Layers" in the package doc): the Proxy type, the
// registry of its live connections (register, unregister) and its counters (Stats). It sits
// above the transports and the connection's core, which point at the Proxy only through
// connEnv (conn.go), and below what serves and exports it (serve.go, proxy.go, shards_node.go,
// queries.go, handover.go).

// Stats are a Proxy's counters since New.
type Stats struct {
	// Connections is the number of client connections open now.
	Connections int
	// Accepted counts the client connections accepted.
	Accepted uint64
	// NodeFailures counts client connections closed because their node connection failed
	// or could not be opened.
	NodeFailures uint64
	// Requests counts the requests forwarded to the node, by opcode.
	Requests map[cql.Opcode]uint64
	// Responses counts the frames forwarded from the node to clients, events included.
	Responses uint64
	// Rewritten counts the responses and events whose addresses were rewritten.
	Rewritten uint64
	// Rejected counts the frames answered with a ProtocolError for their version.
	Rejected uint64
	// Refused counts the connections closed because MaxConnections were open.
	Refused uint64
	// TooBig counts the frames refused for their size (see Config.MaxFrameSize).
	TooBig uint64
	// Bytes forwarded each way, counted on the client side.
	BytesFromClients, BytesToClients uint64
	// Segments counts the protocol v5 segments read, from clients and from the node;
	// Resegmented those not forwarded as they came: a frame in them changed (they got a
	// fresh CRC, or their frames were segmented again), or they ended a frame larger than
	// a segment, which is segmented again whole.
	Segments, Resegmented uint64
}

// TotalRequests returns the sum of Requests.
func (s Stats) TotalRequests() uint64 {
	var n uint64
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Proxy relays CQL connections to one node. Create it with New and run it with Serve. A
// Proxy is safe for concurrent use.
type Proxy struct {
	// env is what the proxy's connections use of it (conn.go): its configuration, what
	// their pipelines share, the dial, the counters they add to, the byte budget. A named
	// field, not an embedded one, so that the Proxy answers only to its own methods.
	env    connEnv
	cfgErr error
	loops  *loopGroup // the event loops: the process's (processLoops)

	mu      sync.Mutex
	conns   map[*conn]struct{}
	retired pipeline.Counts // counters of closed connections
	serving *group          // the group of the Serve call running, for adopted connections

	accepted atomic.Uint64
	adopted  atomic.Uint64 // connections handed over by an old process (handover.go)
	limitCounters
	// shards is the state of ScyllaDB's shard-awareness (shards.go).
	shards shardProxy
}

// setServing records the group of the Serve call running, which adopted connections join
// (Adopt), or nil once it stops accepting.
func (p *Proxy) setServing(g *group) {
	p.mu.Lock()
	p.serving = g
	p.mu.Unlock()
}

func (p *Proxy) connsOf(g *group) []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cs []*conn
	for c := range p.conns {
		if c.group == g {
			cs = append(cs, c)
		}
	}
	return cs
}

// Stats returns the proxy's counters. It is safe for concurrent use.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	sum := p.retired
	n := len(p.conns)
	for c := range p.conns {
		c.pipe.Counters.AddTo(&sum)
	}
	p.mu.Unlock()
	st := Stats{
		Connections:      n,
		Accepted:         p.accepted.Load(),
		NodeFailures:     p.env.nodeFailures.Load(),
		Rejected:         p.env.rejected.Load(),
		Refused:          p.refused.Load(),
		TooBig:           p.env.sh.TooBig.Load(),
		Requests:         make(map[cql.Opcode]uint64),
		Responses:        sum.Responses,
		Rewritten:        sum.Rewritten,
		BytesFromClients: sum.BytesIn,
		BytesToClients:   sum.BytesOut,
		Segments:         sum.Segments[0] + sum.Segments[1],
		Resegmented:      sum.Resegmented[0] + sum.Resegmented[1],
	}
	for op, v := range sum.Requests {
		if v != 0 {
			st.Requests[cql.Opcode(op)] = v
		}
	}
	return st
}

// register adds c to the live connections.
func (p *Proxy) register(c *conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	if p.env.sh.Metrics != nil {
		p.env.sh.Metrics.ConnOpened()
	}
}

// unregister moves c's counters to the totals.
func (p *Proxy) unregister(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	c.pipe.Counters.AddTo(&p.retired)
	p.shards.retire(c)
	p.mu.Unlock()
	if p.env.sh.Metrics != nil {
		p.env.sh.Metrics.ConnClosed()
	}
}
