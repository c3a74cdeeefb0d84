package pipeline

import (
	"net/netip"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// learnPrepared puts what the RESULT Prepared frame answering the PREPARE req tells into
// the one prepared-statement registry (shared with tracing): the statement id, its query
// text and keyspace, and, for a statement on a system table, that table and the result
// columns. Every PREPARE is learnt, whatever the tracing mode, so that tracing finds the
// text of statements prepared while it was off.
func (c *Conn) learnPrepared(f *cql.Frame, req Inflight) {
	if f.Header.Opcode != cql.OpResult {
		return
	}
	info := f.Response().Prepared // read once for every reader of the frame
	if info.ID == nil {
		return
	}
	st := tracing.Statement{Query: req.query, Keyspace: string(info.Keyspace)}
	// The bound variables are learnt too, for the workload capture (their types, and
	// which make the partition key). A PREPARE is rare, so it may pay for a decode.
	if m, err := f.Result(); err == nil {
		if pr, ok := m.(cql.PreparedResult); ok {
			st.Binds, st.PKIndexes = pr.Metadata.Columns, pr.Metadata.PKIndexes
			if req.kind&kindPrepare != 0 && !skipRewrite {
				st.System, st.Columns = uint8(req.kind&kindTable), pr.ResultMetadata.Columns
			}
		}
	}
	if st.Query == "" && st.System == 0 {
		return
	}
	c.sh.Prepared.Put(info.ID, st)
}

// responseBody returns the header of a response, its prefix, its message body
// (decompressed, once, by the view f) and the compressor to re-encode it with (nil when it
// was not compressed).
func responseBody(f *cql.Frame) (cql.Header, cql.ResponsePrefix, []byte, cql.Compressor, bool) {
	raw := f.Raw()
	if len(raw) != cql.HeaderSize+int(f.Header.Length) {
		return f.Header, cql.ResponsePrefix{}, nil, nil, false
	}
	prefix, body, err := f.ResponsePrefix()
	if err != nil {
		return f.Header, prefix, nil, nil, false
	}
	return f.Header, prefix, body, f.Compressor(), true
}

// encode re-encodes a response with its header and prefix, compressed as it was.
func (c *Conn) encode(h cql.Header, prefix cql.ResponsePrefix, m cql.Message, comp cql.Compressor) ([]byte, bool) {
	out, err := cql.AppendResponseFrame(nil, h, prefix, m, comp)
	if err != nil {
		c.Warn().Err(err).Msg("re-encode rewritten response")
		return nil, false
	}
	inc(&c.Counters.Rewritten, 1)
	return out, true
}

// rewriteResult returns the response to a request on a system table with the node's
// addresses replaced, or frame itself when there is nothing to replace. The response to a
// PREPARE of such a statement is returned unchanged, and its id remembered.
func (c *Conn) rewriteResult(f *cql.Frame, req Inflight) []byte {
	frame := f.Raw()
	if skipRewrite {
		return frame
	}
	h, prefix, _, comp, ok := responseBody(f)
	if !ok || h.Opcode != cql.OpResult {
		return frame
	}
	msg, err := f.Result()
	if err != nil {
		c.Warn().Err(err).Msg("decode system table result; forwarding it unchanged")
		return frame
	}
	if req.kind == kindProbe {
		if c.probeResult(msg, req) {
			if out, ok := c.encode(h, prefix, msg, comp); ok {
				return out
			}
		}
		return frame
	}
	switch m := msg.(type) {
	case cql.SetKeyspaceResult:
		if req.kind == kindUse {
			c.inSystem.Store(m.Keyspace == "system")
			c.capt.keyspace.Store(&m.Keyspace)
		}
	case cql.RowsResult:
		if req.kind&kindPrepare != 0 {
			break
		}
		cols := m.Metadata.Columns
		if m.Metadata.Flags&cql.RowsNoMetadata != 0 && req.stmt != nil {
			cols = req.stmt.Columns
		}
		if c.rewriteRows(req.kind&kindTable, cols, m.Rows) {
			if out, ok := c.encode(h, prefix, m, comp); ok {
				return out
			}
		}
	}
	return frame
}

// rewriteRows replaces the addresses in the rows of a system table: in system.local the
// rpc_address and broadcast_address become the advertised address and the native port its port; in the peers
// tables the native port becomes the peer port, as a sidecar is assumed beside every
// node. It reports whether it changed anything.
func (c *Conn) rewriteRows(kind rewriteKind, cols []cql.ColumnSpec, rows [][][]byte) bool {
	if kind != kindLocal && c.sh.Peers != nil {
		return c.sh.Peers.rewritePeerRows(cols, rows, c.peerPort, c.unmappedPeer)
	}
	changed := kind == kindLocal && c.sh.Peers != nil && c.rewriteBroadcast(cols, rows)
	for j, col := range cols {
		var val []byte
		switch {
		case col.Type.ID == cql.TypeInet && (col.Name == "rpc_address" || col.Name == "broadcast_address") && kind == kindLocal:
			// broadcast_address too: gocql matches events to hosts by it, and events about
			// this node carry the advertised address (see rewriteEvent).
			val = c.advertise.Addr().AsSlice()
		case col.Type.ID == cql.TypeInt && (col.Name == "native_port" || col.Name == "rpc_port"):
			port := c.peerPort
			if kind == kindLocal {
				port = c.advertise.Port()
			}
			val = cql.AppendInt(nil, int32(port))
		default:
			continue
		}
		for _, row := range rows {
			if j >= len(row) || row[j] == nil {
				continue
			}
			if col.Type.ID == cql.TypeInet {
				if a, ok := netip.AddrFromSlice(row[j]); ok {
					a = a.Unmap()
					c.sh.nodeRPC.Store(&a)
				}
			}
			row[j] = val
			changed = true
		}
	}
	return changed
}

// rewriteEvent returns a TOPOLOGY_CHANGE or STATUS_CHANGE event with the node's address
// replaced by the advertised one, and other nodes' ports by the peer port.
func (c *Conn) rewriteEvent(f *cql.Frame) []byte {
	frame := f.Raw()
	h, prefix, body, comp, ok := responseBody(f)
	if !ok {
		return frame
	}
	ev, err := cql.DecodeEvent(body)
	if err != nil || ev.Type != cql.EventTopologyChange && ev.Type != cql.EventStatusChange {
		return frame
	}
	addr := c.eventAddr(ev.Addr)
	if addr == ev.Addr {
		return frame
	}
	c.Debug().Str("event", ev.Type).Str("change", ev.Change).Str("addr", ev.Addr.String()).
		Str("rewritten", addr.String()).Msg("event address rewritten")
	ev.Addr = addr
	if out, ok := c.encode(h, prefix, ev, comp); ok {
		return out
	}
	return frame
}

// eventAddr maps a node address named by an event: the node behind this sidecar becomes the
// advertised address, another node its own IP with the peer port.
func (c *Conn) eventAddr(a netip.AddrPort) netip.AddrPort {
	ip := a.Addr().Unmap()
	if ip == c.NodeAddr.Addr() && a.Port() == c.NodeAddr.Port() {
		return c.advertise
	}
	if sc, ok := c.sh.Peers.eventPeer(a, c.peerPort); ok {
		return sc
	}
	if rpc := c.sh.nodeRPC.Load(); rpc != nil && ip == *rpc {
		return c.advertise
	}
	return netip.AddrPortFrom(ip, c.peerPort)
}

// rewriteBroadcast sets system.local's broadcast_address to the advertised IP when the
// sidecars are mapped: gocql matches STATUS and TOPOLOGY events to the host of its control
// connection by that column, and those events name the sidecar. (By the convention the
// sidecar shares its node's IP, and the column is right as it is.)
func (c *Conn) rewriteBroadcast(cols []cql.ColumnSpec, rows [][][]byte) bool {
	changed := false
	for j, col := range cols {
		if col.Type.ID != cql.TypeInet || col.Name != "broadcast_address" {
			continue
		}
		for _, row := range rows {
			if j < len(row) && row[j] != nil {
				row[j] = c.advertise.Addr().AsSlice()
				changed = true
			}
		}
	}
	return changed
}

// unmappedPeer warns, once per address, of a peer that the map does not name.
func (c *Conn) unmappedPeer(node netip.AddrPort) {
	if _, seen := c.sh.Peers.warned.LoadOrStore(node, true); !seen {
		c.Warn().Str("peer", node.String()).Uint16("peer_port", c.peerPort).
			Msg("peer node missing from the cluster map: rewriting only its port, by the convention")
	}
}

// probeResult learns from the response to a probed EXECUTE whether its statement reads a
// system table, and rewrites the rows when it does.
func (c *Conn) probeResult(m cql.Message, req Inflight) bool {
	switch m := m.(type) {
	case cql.RowsResult:
		cols := m.Metadata.Columns
		kind := kindNone
		// Without metadata (a node that ignored the request for it) nothing can be
		// learnt; the id is not probed again, so that the hot path does not pay twice.
		if m.Metadata.Flags&cql.RowsNoMetadata == 0 && len(cols) > 0 && cols[0].Keyspace == "system" {
			kind = systemTable(cols[0].Table)
		}
		if kind == kindNone {
			c.sh.checked.add(req.probe)
			return false
		}
		c.sh.rememberStmt([]byte(req.probe), kind, cols)
		return c.rewriteRows(kind, cols, m.Rows)
	case cql.VoidResult:
		c.sh.checked.add(req.probe)
	}
	return false
}
