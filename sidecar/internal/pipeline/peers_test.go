package pipeline

import (
	"net/netip"
	"testing"
)

// TestPeerMapLookup: a node's address finds its sidecar by IP and port, by IP alone when
// that is unambiguous (system.peers), and an IP-only sidecar takes the peer port.
func TestPeerMapLookup(t *testing.T) {
	m, _ := ParsePeerMap("10.0.0.1:9042=10.0.1.1:9043\n10.0.0.2=10.0.1.2\n10.0.0.3:9042=10.0.1.3:9043\n10.0.0.3:9044=10.0.1.3:9045")
	lookups := []struct {
		ip   string
		port uint16
		want string
	}{
		{"10.0.0.1", 9042, "10.0.1.1:9043"},
		{"10.0.0.1", 0, "10.0.1.1:9043"}, // system.peers: the IP alone, when it is unambiguous
		{"10.0.0.1", 9999, ""},
		{"10.0.0.2", 1234, "10.0.1.2:7777"}, // an IP-only sidecar takes the peer port
		{"10.0.0.3", 0, ""},                 // two nodes on that IP
		{"10.0.0.3", 9044, "10.0.1.3:9045"},
		{"::ffff:10.0.0.1", 9042, "10.0.1.1:9043"},
	}
	for _, l := range lookups {
		got, ok := m.lookup(netip.MustParseAddr(l.ip), l.port, 7777)
		if s := map[bool]string{true: got.String()}[ok]; s != l.want {
			t.Errorf("lookup(%s, %d) = %q; want %q", l.ip, l.port, s, l.want)
		}
	}
}
