package node

import "github.com/tracecar/tracecar/internal/cql"

// BroadcastEvent sends a TOPOLOGY_CHANGE or STATUS_CHANGE event to every connection that
// registered for node events, as a node does when a peer joins, leaves, goes up or down.
// The single node has no peers of its own; tests use it to check what drivers and the
// sidecar make of such events. It is safe for concurrent use.
func (s *Server) BroadcastEvent(ev cql.Event) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		if c.wants(ev.Type) {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.push(ev)
	}
}
