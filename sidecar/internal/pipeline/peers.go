package pipeline

import (
	"bufio"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/tracecar/tracecar/internal/cql"
)

// PeerMap maps the CQL addresses of a cluster's nodes to the addresses of the sidecars in
// front of them, for clusters where the convention does not hold. The convention is a
// sidecar on each node's IP at one port, the peer port: then a peer's rows need only their
// port rewritten, and no map. A node is given as IP:port, or as an IP for any port; a
// sidecar as IP:port, or as an IP that takes the peer port. The zero value maps nothing.
// A PeerMap is safe for concurrent reads.
type PeerMap struct {
	byAddrPort map[netip.AddrPort]netip.AddrPort
	byAddr     map[netip.Addr]netip.AddrPort

	warned sync.Map // netip.AddrPort of unmapped peers already logged
}

// ParsePeerMap parses mappings of node addresses to sidecar addresses, one per line or
// separated by commas, each as NODE=SIDECAR or NODE SIDECAR, as in
// "10.0.0.1:9042=10.0.1.1:9043". Blank lines and text after # are ignored.
func ParsePeerMap(text string) (*PeerMap, error) {
	m := &PeerMap{byAddrPort: map[netip.AddrPort]netip.AddrPort{}, byAddr: map[netip.Addr]netip.AddrPort{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s, _, _ := strings.Cut(sc.Text(), "#")
		for _, entry := range strings.Split(s, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			if err := m.add(entry); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
	}
	if m.Len() == 0 {
		return nil, fmt.Errorf("no NODE=SIDECAR mapping")
	}
	return m, nil
}

func (m *PeerMap) add(entry string) error {
	nodeStr, scStr, ok := strings.Cut(entry, "=")
	if !ok {
		f := strings.Fields(entry)
		if len(f) != 2 {
			return fmt.Errorf("%q: want NODE=SIDECAR, as in 10.0.0.1:9042=10.0.1.1:9043", entry)
		}
		nodeStr, scStr = f[0], f[1]
	}
	nodeStr, scStr = strings.TrimSpace(nodeStr), strings.TrimSpace(scStr)
	sc, err := ParseAdvertise(scStr)
	if err != nil {
		return fmt.Errorf("sidecar address %q: want IP or IP:port", scStr)
	}
	if ap, err := netip.ParseAddrPort(nodeStr); err == nil {
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if _, dup := m.byAddrPort[ap]; dup {
			return fmt.Errorf("node %s is mapped twice", ap)
		}
		m.byAddrPort[ap] = sc
		return nil
	}
	a, err := netip.ParseAddr(nodeStr)
	if err != nil {
		return fmt.Errorf("node address %q: want IP or IP:port", nodeStr)
	}
	a = a.Unmap()
	if _, dup := m.byAddr[a]; dup {
		return fmt.Errorf("node %s is mapped twice", a)
	}
	m.byAddr[a] = sc
	return nil
}

// Len returns the number of mappings.
func (m *PeerMap) Len() int {
	if m == nil {
		return 0
	}
	return len(m.byAddrPort) + len(m.byAddr)
}

// Lookup returns the sidecar of the node at ip and port; a zero port (system.peers has
// none) matches the node's IP alone when one mapping has that IP. A sidecar address
// without a port gets peerPort.
func (m *PeerMap) lookup(ip netip.Addr, port uint16, peerPort uint16) (netip.AddrPort, bool) {
	if m == nil {
		return netip.AddrPort{}, false
	}
	ip = ip.Unmap()
	sc, ok := m.byAddrPort[netip.AddrPortFrom(ip, port)]
	if !ok {
		sc, ok = m.byAddr[ip]
	}
	if !ok && port == 0 {
		var n int
		for ap, s := range m.byAddrPort {
			if ap.Addr() == ip {
				sc, n = s, n+1
			}
		}
		ok = n == 1
	}
	if !ok {
		return netip.AddrPort{}, false
	}
	if sc.Port() == 0 {
		sc = netip.AddrPortFrom(sc.Addr(), peerPort)
	}
	return sc, true
}

// rewritePeerRows rewrites the rows of system.peers or system.peers_v2 through m: every
// address of a mapped peer (peer, rpc_address, native_address, preferred_ip) becomes its
// sidecar's IP and native_port its sidecar's port, so that drivers connect to the sidecar
// and match its events (gocql matches them by peer, the Python driver by rpc_address). A
// peer missing from m gets the peer port, as by the convention. It reports whether it
// changed anything.
func (m *PeerMap) rewritePeerRows(cols []cql.ColumnSpec, rows [][][]byte, peerPort uint16, log func(node netip.AddrPort)) bool {
	addrCol, portCol := -1, -1
	var inets []int
	for j, col := range cols {
		switch {
		case col.Type.ID == cql.TypeInet && (col.Name == "peer" || col.Name == "rpc_address" || col.Name == "native_address" || col.Name == "preferred_ip"):
			inets = append(inets, j)
			if col.Name == "rpc_address" || col.Name == "native_address" {
				addrCol = j
			}
		case col.Type.ID == cql.TypeInt && (col.Name == "native_port" || col.Name == "rpc_port"):
			portCol = j
		}
	}
	changed := false
	for _, row := range rows {
		var port uint16
		if portCol >= 0 && portCol < len(row) && len(row[portCol]) == 4 {
			var d cql.Decoder
			d.Reset(row[portCol])
			port = uint16(d.Int())
		}
		sc, ok := netip.AddrPort{}, false
		if addrCol >= 0 && addrCol < len(row) {
			if ip, valid := netip.AddrFromSlice(row[addrCol]); valid {
				sc, ok = m.lookup(ip, port, peerPort)
				if !ok && log != nil {
					log(netip.AddrPortFrom(ip.Unmap(), port))
				}
			}
		}
		if portCol >= 0 && portCol < len(row) && row[portCol] != nil {
			p := peerPort
			if ok {
				p = sc.Port()
			}
			row[portCol] = cql.AppendInt(nil, int32(p))
			changed = true
		}
		if !ok {
			continue
		}
		ip := sc.Addr().AsSlice()
		for _, j := range inets {
			if j < len(row) && row[j] != nil {
				row[j] = ip
				changed = true
			}
		}
	}
	return changed
}

// eventPeer maps the address in an event about another node through m.
func (m *PeerMap) eventPeer(a netip.AddrPort, peerPort uint16) (netip.AddrPort, bool) {
	return m.lookup(a.Addr(), a.Port(), peerPort)
}

// ParseAdvertise accepts an IP or an IP:port.
func ParseAdvertise(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 0), nil
	}
	return netip.AddrPort{}, fmt.Errorf("sidecar: advertise address %q: want an IP or IP:port", s)
}
