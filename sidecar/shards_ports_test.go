package sidecar

import (
	"testing"

	"github.com/tracecar/tracecar/internal/sharding"
)

// TestResiduePortOrder checks the ports a shard-aware node connection is dialled from
// against a brute-force enumeration, as gocql's TestScyllaPortIterator does, for 1, 3, 4, 7
// and 12 shards over port ranges that they do not divide: from any start, the first port
// tried is the first of the shard's residue at or after it (else the range's first of that
// residue), and the ports tried then visit every port of the residue in the range once
// before coming back, each on the wanted shard by the node's reckoning (ShardOfPort).
func TestResiduePortOrder(t *testing.T) {
	ranges := [][2]int{{32768, 60999}, {1024, 1034}, {40000, 40006}, {50001, 50013}, {65524, 65535}}
	for _, rg := range ranges {
		lo, hi := rg[0], rg[1]
		for _, n := range []int{1, 3, 4, 7, 12} {
			if hi-lo+1 < n {
				continue
			}
			node := sharding.Info{NrShards: n}
			for r := range n {
				var want []int // the residue's ports, ascending
				for p := lo; p <= hi; p++ {
					if p%n == r {
						want = append(want, p)
					}
				}
				step := max(1, (hi-lo)/300)
				for start := lo; start <= hi; start += step {
					first := want[0]
					for _, p := range want {
						if p >= start {
							first = p
							break
						}
					}
					q := residuePort(start, lo, hi, n, r)
					if q != first {
						t.Fatalf("[%d, %d], %d shards, shard %d: from %d the first port is %d; want %d", lo, hi, n, r, start, q, first)
					}
					if start != lo && start < hi-step {
						continue // the cycle, from a few starts
					}
					seen := map[int]bool{}
					for range want {
						if q < lo || q > hi || seen[q] || node.ShardOfPort(q) != r {
							t.Fatalf("[%d, %d], %d shards, shard %d: port %d out of range, repeated or on shard %d (seen %d of %d)", lo, hi, n, r, q, node.ShardOfPort(q), len(seen), len(want))
						}
						seen[q] = true
						q = residuePort(q+n, lo, hi, n, r)
					}
					if q != first {
						t.Fatalf("[%d, %d], %d shards, shard %d: after all %d ports, %d; want back at %d", lo, hi, n, r, len(want), q, first)
					}
				}
			}
		}
	}
}
