// Package sharding is ScyllaDB's intranode sharding as its CQL protocol extensions describe
// it: the SCYLLA_* keys of SUPPORTED, the biased-token-round-robin algorithm that maps a
// Murmur3 token to the shard (CPU core) that owns it, and the Murmur3 token of a routing
// key. The embedded node and the sidecar both use it, so that they agree on who owns what.
package sharding

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// Algorithm is the one sharding algorithm ScyllaDB has named so far.
const Algorithm = "biased-token-round-robin"

// Partitioner is the partitioner whose tokens this package computes.
const Partitioner = "org.apache.cassandra.dht.Murmur3Partitioner"

// Keys of SUPPORTED that ScyllaDB adds.
const (
	KeyShard        = "SCYLLA_SHARD"
	KeyNrShards     = "SCYLLA_NR_SHARDS"
	KeyPartitioner  = "SCYLLA_PARTITIONER"
	KeyAlgorithm    = "SCYLLA_SHARDING_ALGORITHM"
	KeyIgnoreMSB    = "SCYLLA_SHARDING_IGNORE_MSB"
	KeyAwarePort    = "SCYLLA_SHARD_AWARE_PORT"
	KeyAwarePortSSL = "SCYLLA_SHARD_AWARE_PORT_SSL"
)

// MaxShards bounds SCYLLA_NR_SHARDS; ScyllaDB runs one shard per core, and no machine has
// this many.
const MaxShards = 1 << 12

// ErrNotScylla is returned by Parse when SUPPORTED has no SCYLLA_NR_SHARDS: the node is
// not ScyllaDB (or does not shard), and nothing is wrong.
var ErrNotScylla = errors.New("no SCYLLA_NR_SHARDS in SUPPORTED")

// Info is what a ScyllaDB node's SUPPORTED says about its sharding. The zero value means a
// node without sharding: ShardOf always answers 0. An Info is a value; it is safe for
// concurrent use.
type Info struct {
	// Shard is the shard the connection that read SUPPORTED landed on.
	Shard int
	// NrShards is the node's number of shards, from 1 to MaxShards.
	NrShards int
	// IgnoreMSB is the number of the token's most significant bits the algorithm skips.
	IgnoreMSB uint
	// AwarePort and AwarePortSSL are the shard-aware ports, 0 when not given.
	AwarePort, AwarePortSSL int
}

// Parse reads the SCYLLA_* keys of a SUPPORTED message. It returns ErrNotScylla when
// SCYLLA_NR_SHARDS is absent, and another error naming the key when a value is malformed,
// the algorithm or partitioner is one it does not know, or the shard is out of range.
// Callers fall back to unsharded behaviour on any error; a malformed key is never a reason
// to fail a connection.
func Parse(opts map[string][]string) (Info, error) {
	var in Info
	nr, ok := opts[KeyNrShards]
	if !ok {
		return in, ErrNotScylla
	}
	var err error
	if in.NrShards, err = intKey(KeyNrShards, nr, 1, MaxShards); err != nil {
		return Info{}, err
	}
	if v, ok := opts[KeyAlgorithm]; ok && (len(v) != 1 || v[0] != Algorithm) {
		return Info{}, fmt.Errorf("%s %q: the only algorithm known is %s", KeyAlgorithm, v, Algorithm)
	}
	if v, ok := opts[KeyPartitioner]; ok && (len(v) != 1 || v[0] != Partitioner) {
		return Info{}, fmt.Errorf("%s %q: only %s is known", KeyPartitioner, v, Partitioner)
	}
	msb, err := intKey(KeyIgnoreMSB, opts[KeyIgnoreMSB], 0, 63)
	if err != nil {
		return Info{}, err
	}
	in.IgnoreMSB = uint(msb)
	if in.Shard, err = intKey(KeyShard, opts[KeyShard], 0, in.NrShards-1); err != nil {
		return Info{}, err
	}
	if in.AwarePort, err = intKey(KeyAwarePort, opts[KeyAwarePort], 0, 65535); err != nil {
		return Info{}, err
	}
	if in.AwarePortSSL, err = intKey(KeyAwarePortSSL, opts[KeyAwarePortSSL], 0, 65535); err != nil {
		return Info{}, err
	}
	return in, nil
}

// intKey reads a one-element integer value within [lo, hi]; an absent key is 0.
func intKey(key string, v []string, lo, hi int) (int, error) {
	if v == nil {
		return 0, nil
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("%s %q: want one integer from %d to %d", key, v, lo, hi)
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s %q: want an integer from %d to %d", key, v[0], lo, hi)
	}
	return n, nil
}

// Options returns the SCYLLA_* keys that describe in, as a node writes them in SUPPORTED.
// The ports are left out when 0.
func (in Info) Options() map[string][]string {
	m := map[string][]string{
		KeyShard:       {strconv.Itoa(in.Shard)},
		KeyNrShards:    {strconv.Itoa(in.NrShards)},
		KeyPartitioner: {Partitioner},
		KeyAlgorithm:   {Algorithm},
		KeyIgnoreMSB:   {strconv.Itoa(int(in.IgnoreMSB))},
	}
	if in.AwarePort != 0 {
		m[KeyAwarePort] = []string{strconv.Itoa(in.AwarePort)}
	}
	if in.AwarePortSSL != 0 {
		m[KeyAwarePortSSL] = []string{strconv.Itoa(in.AwarePortSSL)}
	}
	return m
}

// ShardOf is the shard that owns token under biased-token-round-robin: the token is
// unbiased to an unsigned number, its IgnoreMSB top bits are dropped, and the rest, read as
// a fraction of 2^64, is scaled to the number of shards.
func (in Info) ShardOf(token int64) int {
	if in.NrShards <= 1 {
		return 0
	}
	z := (uint64(token) + 1<<63) << in.IgnoreMSB
	hi, _ := bits.Mul64(z, uint64(in.NrShards))
	return int(hi)
}

// ShardOfPort is the shard a node assigns to a connection on its shard-aware port from
// source port port.
func (in Info) ShardOfPort(port int) int {
	if in.NrShards <= 1 {
		return 0
	}
	return port % in.NrShards
}

// Token is Cassandra's Murmur3Partitioner token of a serialized partition key: the first 64
// bits of MurmurHash3 x64 128 with seed 0, with Cassandra's sign extension of tail bytes,
// and the minimum token mapped to the maximum.
func Token(key []byte) int64 {
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	var h1, h2 uint64
	n := len(key)
	nblocks := n / 16
	for i := 0; i < nblocks; i++ {
		k1 := leUint64(key[i*16:])
		k2 := leUint64(key[i*16+8:])
		h1 ^= mixK1(k1)
		h1 = bits.RotateLeft64(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729
		h2 ^= mixK2(k2)
		h2 = bits.RotateLeft64(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}
	tail := key[nblocks*16:]
	var k1, k2 uint64
	for i := len(tail) - 1; i >= 8; i-- {
		k2 ^= uint64(int64(int8(tail[i]))) << (8 * (i - 8))
	}
	if len(tail) > 8 {
		h2 ^= mixK2(k2)
	}
	for i := min(len(tail), 8) - 1; i >= 0; i-- {
		k1 ^= uint64(int64(int8(tail[i]))) << (8 * i)
	}
	if len(tail) > 0 {
		h1 ^= mixK1(k1)
	}
	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	tok := int64(h1)
	if tok == math.MinInt64 {
		return math.MaxInt64
	}
	return tok
}

func leUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func mixK1(k uint64) uint64 {
	k *= 0x87c37b91114253d5
	k = bits.RotateLeft64(k, 31)
	return k * 0x4cf5ad432745937f
}

func mixK2(k uint64) uint64 {
	k *= 0x4cf5ad432745937f
	k = bits.RotateLeft64(k, 33)
	return k * 0x87c37b91114253d5
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// RoutingKey appends to dst the serialized partition key of the given column values, as
// Cassandra hashes it: a single column's value as is, and several as a composite (each a
// 2-byte length, the bytes and a 0 byte). It returns dst unchanged and false when a value
// is null or too long for a composite.
func RoutingKey(dst []byte, values ...[]byte) ([]byte, bool) {
	if len(values) == 1 {
		if values[0] == nil {
			return dst, false
		}
		return append(dst, values[0]...), true
	}
	n := len(dst)
	for _, v := range values {
		if v == nil || len(v) > 0xffff {
			return dst[:n], false
		}
		dst = AppendComponent(dst, v)
	}
	return dst, true
}

// AppendComponent appends v as one component of a composite partition key: a 2-byte
// length, the bytes and a 0 byte. v must be at most 65535 bytes long.
func AppendComponent(dst, v []byte) []byte {
	dst = append(dst, byte(len(v)>>8), byte(len(v)))
	dst = append(dst, v...)
	return append(dst, 0)
}
