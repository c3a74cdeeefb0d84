package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
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

// refreshTopology rewrites system.local, system.peers and system.peers_v2 of every node for
// the schema sc: each node describes itself in local and every other node in the peers.
func (e *Engine) refreshTopology(sc *storage.Schema, ts int64, now time.Time) {
	local, peers, peersV2 := sc.Table("system", "local"), sc.Table("system", "peers"), sc.Table("system", "peers_v2")
	locals := make([]*storage.TableData, len(e.nodes))
	peerss := make([]*storage.TableData, len(e.nodes))
	peersV2s := make([]*storage.TableData, len(e.nodes))
	version := cqlvalue.EncUUID(sc.Version)
	// Nodes that share an IP (--nodes-same-ip) get distinct storage ports, which keep them
	// apart in peers_v2 (keyed by peer and peer_port). system.peers, keyed by the IP alone,
	// can describe only one of them, as in Cassandra.
	storagePort := make([]int32, len(e.nodes))
	for i, n := range e.nodes {
		storagePort[i] = 7000
		for _, m := range e.nodes[:i] {
			if m.RPCAddr.Addr() == n.RPCAddr.Addr() {
				storagePort[i]++
			}
		}
	}
	for i, n := range e.nodes {
		addr := n.RPCAddr.Addr().Unmap()
		lw := &rowWriter{t: local, d: storage.NewTableData(), ts: ts, now: now.Unix()}
		lw.put(map[string][]byte{
			"key": cqlvalue.EncText("local"), "bootstrapped": cqlvalue.EncText("COMPLETED"),
			"broadcast_address": cqlvalue.EncInet(addr), "broadcast_port": cqlvalue.EncInt(storagePort[i]),
			"cluster_name": cqlvalue.EncText(e.cfg.ClusterName), "cql_version": cqlvalue.EncText("3.4.6"),
			"data_center": cqlvalue.EncText(n.DataCenter), "gossip_generation": cqlvalue.EncInt(int32(now.Unix())),
			"host_id": cqlvalue.EncUUID(n.HostID), "listen_address": cqlvalue.EncInet(addr), "listen_port": cqlvalue.EncInt(storagePort[i]),
			"native_protocol_version": cqlvalue.EncText("4"), "partitioner": cqlvalue.EncText("org.apache.cassandra.dht.Murmur3Partitioner"),
			"rack": cqlvalue.EncText(n.Rack), "release_version": cqlvalue.EncText("4.1.0"), "rpc_address": cqlvalue.EncInet(addr),
			"rpc_port": cqlvalue.EncInt(int32(n.RPCAddr.Port())), "schema_version": version,
			"tokens": cqlvalue.EncTextSet(n.Tokens),
		})
		pw := &rowWriter{t: peers, d: storage.NewTableData(), ts: ts, now: now.Unix()}
		p2w := &rowWriter{t: peersV2, d: storage.NewTableData(), ts: ts, now: now.Unix()}
		for j, p := range e.nodes {
			if j == i {
				continue
			}
			paddr := cqlvalue.EncInet(p.RPCAddr.Addr().Unmap())
			pw.put(map[string][]byte{
				"peer": paddr, "data_center": cqlvalue.EncText(p.DataCenter), "host_id": cqlvalue.EncUUID(p.HostID),
				"rack": cqlvalue.EncText(p.Rack), "release_version": cqlvalue.EncText("4.1.0"), "rpc_address": paddr,
				"schema_version": version, "tokens": cqlvalue.EncTextSet(p.Tokens),
			})
			p2w.put(map[string][]byte{
				"peer": paddr, "peer_port": cqlvalue.EncInt(storagePort[j]), "data_center": cqlvalue.EncText(p.DataCenter),
				"host_id": cqlvalue.EncUUID(p.HostID), "rack": cqlvalue.EncText(p.Rack), "release_version": cqlvalue.EncText("4.1.0"),
				"native_address": paddr, "native_port": cqlvalue.EncInt(int32(p.RPCAddr.Port())),
				"schema_version": version, "tokens": cqlvalue.EncTextSet(p.Tokens),
			})
		}
		locals[i], peerss[i], peersV2s[i] = lw.d, pw.d, p2w.d
	}
	for _, x := range []struct {
		t *storage.Table
		d []*storage.TableData
	}{{local, locals}, {peers, peerss}, {peersV2, peersV2s}} {
		x.t.Data.Store(x.d[0])
		if len(x.d) > 1 {
			x.t.PerNode.Store(&x.d)
		}
	}
}
