package sharding

import (
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	// Values computed with the DataStax Python driver's murmur3 (cassandra.murmur3), which
	// matches Cassandra's Murmur3Partitioner; the tails of 9 to 15 bytes with the high bit
	// set check the sign extension.
	tests := []struct {
		name, hex string
		want      int64
	}{
		{"empty", "", 0},
		{"text 123", "313233", -7468325962851647638},
		{"int 1", "00000001", -4069959284402364209},
		{"int 2", "00000002", -3248873570005575792},
		{"11 high bytes", "808182838485868788898a", 4237241090754518618},
		{"15 high bytes", "f0f1f2f3f4f5f6f7f8f9fafbfcfdfe", -7737243313669454511},
		{"9 x ff", "ffffffffffffffffff", 8434364767658694854},
		{"alphabet", hex.EncodeToString([]byte("abcdefghijklmnopqrstuvwxyz")), 8402764170624191145},
		{"16 bytes", "00ff10fa99" + strings.Repeat("00", 11), -3759560648152891798},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, _ := hex.DecodeString(tc.hex)
			if got := Token(key); got != tc.want {
				t.Errorf("Token(%s) = %d; want %d", tc.hex, got, tc.want)
			}
		})
	}
}

func TestShardOf(t *testing.T) {
	four := Info{NrShards: 4, IgnoreMSB: 12}
	tests := []struct {
		name  string
		in    Info
		token int64
		want  int
	}{
		// From gocql's and the Rust driver's tests of biased-token-round-robin.
		{"gocql a", four, -9219783007514621794, 3},
		{"gocql b", four, 9222582454147032830, 3},
		// The minimum token unbiases to 0; the bits under IgnoreMSB decide the rest.
		{"min", four, math.MinInt64, 0},
		{"zero", four, 0, 0},
		{"minus one", four, -1, 3},
		{"quarter", Info{NrShards: 4}, math.MinInt64 + 1<<62, 1},
		{"one shard", Info{NrShards: 1, IgnoreMSB: 12}, 12345, 0},
		{"zero value", Info{}, 12345, 0},
		{"three shards, no msb", Info{NrShards: 3}, math.MaxInt64, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.ShardOf(tc.token); got != tc.want {
				t.Errorf("ShardOf(%d) = %d; want %d", tc.token, got, tc.want)
			}
		})
	}
}

func TestShardOfSpreads(t *testing.T) {
	// Every shard owns about its share of the keys 0..3999.
	in := Info{NrShards: 4, IgnoreMSB: 12}
	var n [4]int
	for i := range 4000 {
		k := []byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
		n[in.ShardOf(Token(k))]++
	}
	for s, c := range n {
		if c < 800 || c > 1200 {
			t.Errorf("shard %d owns %d of 4000 keys; want about 1000 (all: %v)", s, c, n)
		}
	}
}

func TestParse(t *testing.T) {
	good := Info{Shard: 2, NrShards: 4, IgnoreMSB: 12, AwarePort: 19042, AwarePortSSL: 19142}
	tests := []struct {
		name    string
		edit    func(map[string][]string)
		want    Info
		wantErr string
	}{
		{"good", func(map[string][]string) {}, good, ""},
		{"not scylla", func(m map[string][]string) { delete(m, KeyNrShards) }, Info{}, ErrNotScylla.Error()},
		{"nr shards text", func(m map[string][]string) { m[KeyNrShards] = []string{"four"} }, Info{}, "SCYLLA_NR_SHARDS"},
		{"nr shards zero", func(m map[string][]string) { m[KeyNrShards] = []string{"0"} }, Info{}, "SCYLLA_NR_SHARDS"},
		{"nr shards two values", func(m map[string][]string) { m[KeyNrShards] = []string{"4", "5"} }, Info{}, "SCYLLA_NR_SHARDS"},
		{"unknown algorithm", func(m map[string][]string) { m[KeyAlgorithm] = []string{"token-range"} }, Info{}, "SCYLLA_SHARDING_ALGORITHM"},
		{"unknown partitioner", func(m map[string][]string) { m[KeyPartitioner] = []string{"RandomPartitioner"} }, Info{}, "SCYLLA_PARTITIONER"},
		{"msb too big", func(m map[string][]string) { m[KeyIgnoreMSB] = []string{"64"} }, Info{}, "SCYLLA_SHARDING_IGNORE_MSB"},
		{"shard out of range", func(m map[string][]string) { m[KeyShard] = []string{"4"} }, Info{}, "SCYLLA_SHARD "},
		{"bad port", func(m map[string][]string) { m[KeyAwarePort] = []string{"70000"} }, Info{}, "SCYLLA_SHARD_AWARE_PORT "},
		{"no ports", func(m map[string][]string) { delete(m, KeyAwarePort); delete(m, KeyAwarePortSSL) },
			Info{Shard: 2, NrShards: 4, IgnoreMSB: 12}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := good.Options()
			m["COMPRESSION"] = []string{"lz4"}
			tc.edit(m)
			got, err := Parse(m)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse: err %v; want one naming %q", err, tc.wantErr)
				}
				if tc.name == "not scylla" && !errors.Is(err, ErrNotScylla) {
					t.Errorf("err %v is not ErrNotScylla", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Parse = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestRoutingKey(t *testing.T) {
	one, ok := RoutingKey(nil, []byte{0, 0, 0, 1})
	if !ok || hex.EncodeToString(one) != "00000001" {
		t.Errorf("one column: %x, %v; want 00000001", one, ok)
	}
	two, ok := RoutingKey([]byte{9}, []byte{0, 0, 0, 1}, []byte("ab"))
	if !ok || hex.EncodeToString(two) != "09"+"0004"+"00000001"+"00"+"0002"+"6162"+"00" {
		t.Errorf("composite: %x, %v", two, ok)
	}
	if got, ok := RoutingKey([]byte{9}, []byte{1}, nil); ok || len(got) != 1 {
		t.Errorf("null component: %x, %v; want the input back and false", got, ok)
	}
}

func BenchmarkShardOfToken(b *testing.B) {
	in := Info{NrShards: 4, IgnoreMSB: 12}
	key := []byte{0, 0, 0, 1, 2, 3, 4, 5}
	b.ReportAllocs()
	for b.Loop() {
		_ = in.ShardOf(Token(key))
	}
}
