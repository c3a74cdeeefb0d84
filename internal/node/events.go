package node

import "github.com/tracecar/tracecar/internal/cql"

// BroadcastEvent pushes ev to every connection that REGISTERed for its type: a
// SCHEMA_CHANGE when the engine changes the schema, a TOPOLOGY_CHANGE or STATUS_CHANGE as a
// node sends when a peer joins, leaves, goes up or down. The single node has no peers of
// its own; tests use it to check what drivers and the sidecar make of such events. It is
// safe for concurrent use.
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

// broadcastSchemaChange tells the connections that REGISTERed for schema changes of sc.
func (s *Server) broadcastSchemaChange(sc cql.SchemaChange) {
	s.BroadcastEvent(cql.Event{Type: cql.EventSchemaChange, Schema: sc})
}
