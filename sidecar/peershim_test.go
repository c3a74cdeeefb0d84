package sidecar

import (
	"bufio"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// peerShim relays CQL connections to a node and adds one peer to every uncompressed
// response to a QUERY on system.peers_v2: the other node of a two-node cluster, as the
// embedded node has no peers of its own. It lets a single embedded node tell drivers about
// a second node, whose native port the sidecar must rewrite.
type peerShim struct {
	ln   net.Listener
	node string
	peer func(cols []cql.ColumnSpec) [][]byte // the row to add, built per result's columns
	wg   sync.WaitGroup
}

// mustPeerShim serves a shim on addr in front of the node at nodeAddr until the test ends.
func mustPeerShim(tb testing.TB, addr, nodeAddr string, peer func([]cql.ColumnSpec) [][]byte) *peerShim {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	s := &peerShim{ln: ln, node: nodeAddr, peer: peer}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *peerShim) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		n, err := net.Dial("tcp", s.node)
		if err != nil {
			c.Close()
			continue
		}
		var mu sync.Mutex
		peersStreams := map[int16]bool{}
		s.wg.Add(2)
		go func() { // client to node: note the streams of QUERYs on system.peers_v2
			defer s.wg.Done()
			defer n.Close()
			r := bufio.NewReader(c)
			var buf []byte
			for {
				h, body, b, err := cql.ReadFrame(r, buf)
				if err != nil {
					return
				}
				buf = b
				if h.Opcode == cql.OpQuery && h.Flags&cql.FlagCompression == 0 {
					if q, err := cql.DecodeQuery(body, h.ProtoVersion()); err == nil && strings.Contains(strings.ToLower(q.Query), "system.peers_v2") {
						mu.Lock()
						peersStreams[h.Stream] = true
						mu.Unlock()
					}
				}
				if _, err := n.Write(b); err != nil {
					return
				}
			}
		}()
		go func() { // node to client: add the peer to their results
			defer s.wg.Done()
			defer c.Close()
			r := bufio.NewReader(n)
			var buf []byte
			for {
				h, body, b, err := cql.ReadFrame(r, buf)
				if err != nil {
					return
				}
				buf = b
				mu.Lock()
				isPeers := peersStreams[h.Stream]
				delete(peersStreams, h.Stream)
				mu.Unlock()
				out := b
				if isPeers && h.Opcode == cql.OpResult && h.Flags&cql.FlagCompression == 0 {
					out = s.addPeer(h, body, b)
				}
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	}
}

// addPeer returns the frame with the peer row added, or the frame itself when its body is
// not rows.
func (s *peerShim) addPeer(h cql.Header, body, frame []byte) []byte {
	prefix, rest, err := cql.ParseResponsePrefix(h.Flags, body)
	if err != nil {
		return frame
	}
	m, err := cql.DecodeResult(rest, h.ProtoVersion())
	if err != nil {
		return frame
	}
	rows, ok := m.(cql.RowsResult)
	if !ok {
		return frame
	}
	rows.Rows = append(rows.Rows, s.peer(rows.Metadata.Columns))
	out, err := cql.AppendResponseFrame(nil, h, prefix, rows, nil)
	if err != nil {
		return frame
	}
	return out
}

// peerRow returns a function building system.peers_v2 rows for a node whose native address
// is native, with the host id and schema version the driver must see.
func peerRow(native netip.AddrPort, hostID [16]byte, schema func() [16]byte) func([]cql.ColumnSpec) [][]byte {
	inet := native.Addr().AsSlice()
	i32 := func(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	tokens := func(ts ...string) []byte {
		b := i32(len(ts))
		for _, t := range ts {
			b = append(append(b, i32(len(t))...), t...)
		}
		return b
	}
	return func(cols []cql.ColumnSpec) [][]byte {
		row := make([][]byte, len(cols))
		for i, c := range cols {
			switch c.Name {
			case "peer", "preferred_ip", "native_address":
				row[i] = inet
			case "peer_port", "preferred_port":
				row[i] = i32(7000)
			case "native_port":
				row[i] = i32(int(native.Port()))
			case "data_center":
				row[i] = []byte("datacenter1")
			case "rack":
				row[i] = []byte("rack1")
			case "release_version":
				row[i] = []byte("4.1.0")
			case "host_id":
				row[i] = hostID[:]
			case "schema_version":
				v := schema()
				row[i] = v[:]
			case "tokens":
				row[i] = tokens("4611686018427387904")
			}
		}
		return row
	}
}
