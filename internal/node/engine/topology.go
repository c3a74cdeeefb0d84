package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/node/storage"
)

// DefaultNumTokens is the number of tokens each node owns, Cassandra 4's num_tokens default.
const DefaultNumTokens = 16

// DC is a data center of an embedded cluster: its name and its number of nodes.
type DC struct {
	Name  string
	Nodes int
}

// ParseDCs parses a data center layout such as "dc1:2,dc2:2".
func ParseDCs(s string) ([]DC, error) {
	var out []DC
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(part), ":")
		count, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || count < 1 {
			return nil, fmt.Errorf("data center %q: want NAME:NODES with NODES ≥ 1, as in dc1:2,dc2:2", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("data center %q is listed twice", name)
		}
		seen[name] = true
		out = append(out, DC{Name: name, Nodes: count})
	}
	return out, nil
}

// Topology lays out one node per address on an evenly split ring: numTokens tokens each
// (zero means DefaultNumTokens), interleaved so that every node owns the same share. With
// dcs, the nodes fill the data centers in order, with racks rack1, rack2, … within each; the
// counts must add up to len(addrs). Without, every node is in datacenter1, rack1. Host ids
// derive from the addresses, so they are stable across restarts.
func Topology(addrs []netip.AddrPort, numTokens int, dcs []DC) ([]NodeInfo, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("a cluster needs at least one node")
	}
	if numTokens == 0 {
		numTokens = DefaultNumTokens
	}
	if numTokens < 1 || numTokens > 1536 {
		return nil, fmt.Errorf("num_tokens %d: want 1 to 1536", numTokens)
	}
	nodes := make([]NodeInfo, len(addrs))
	for i, a := range addrs {
		nodes[i] = NodeInfo{RPCAddr: a, HostID: hostIDOf(a), DataCenter: "datacenter1", Rack: "rack1"}
	}
	if len(dcs) > 0 {
		total := 0
		for _, dc := range dcs {
			total += dc.Nodes
		}
		if total != len(addrs) {
			return nil, fmt.Errorf("the data centers hold %d nodes, but the cluster has %d", total, len(addrs))
		}
		i := 0
		for _, dc := range dcs {
			for r := 1; r <= dc.Nodes; r++ {
				nodes[i].DataCenter, nodes[i].Rack = dc.Name, "rack"+strconv.Itoa(r)
				i++
			}
		}
	}
	// One evenly spaced ring of len(addrs)*numTokens tokens, dealt round-robin, from an
	// offset derived from the first host id (one node gets the tokens it always had).
	total := uint64(len(addrs) * numTokens)
	step := math.MaxUint64 / total
	off := binary.BigEndian.Uint64(nodes[0].HostID[:8]) % step
	for i := range nodes {
		nodes[i].Tokens = make([]string, numTokens)
		for j := range numTokens {
			k := uint64(j*len(addrs) + i)
			nodes[i].Tokens[j] = strconv.FormatInt(int64(off+k*step), 10)
		}
	}
	return nodes, nil
}

func hostIDOf(a netip.AddrPort) [16]byte { return storage.NameUUID("tracecar-host:" + a.String()) }

// dataCenters returns the distinct data centers of nodes, in order.
func dataCenters(nodes []NodeInfo) []string {
	var out []string
	for _, n := range nodes {
		seen := false
		for _, dc := range out {
			seen = seen || dc == n.DataCenter
		}
		if !seen {
			out = append(out, n.DataCenter)
		}
	}
	return out
}
