package sharding

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// TestShardVectors checks the routing key, the token and the shard of single-column and
// composite partition keys (two to four columns) against an independent implementation:
// testdata/vectors.json, made by testdata/gen.py with the Python driver's composite routing
// key and Murmur3 token, and shards of 1, 3, 4, 7 and 12 with 0 and 12 bits ignored from
// ScyllaDB's documented formula in exact integers; and against 200 of gocql's published
// token → shard vectors (testdata/gocql.json). The node and the sidecar share this package,
// so their agreeing cannot show an algorithm bug; this test can.
func TestShardVectors(t *testing.T) {
	var ref struct {
		Keys []struct {
			Name       string         `json:"name"`
			Parts      []string       `json:"parts"`
			RoutingKey string         `json:"routing_key"`
			Token      int64          `json:"token"`
			Shards     map[string]int `json:"shards"`
		} `json:"keys"`
		Edges []struct {
			Token  int64          `json:"token"`
			Shards map[string]int `json:"shards"`
		} `json:"edges"`
	}
	mustJSON(t, "testdata/vectors.json", &ref)
	if len(ref.Keys) < 90 || len(ref.Edges) < 10 {
		t.Fatalf("%d keys and %d edge tokens; want gen.py's 93 and 11", len(ref.Keys), len(ref.Edges))
	}
	composite := 0
	for _, k := range ref.Keys {
		var parts [][]byte
		for _, p := range k.Parts {
			b, err := hex.DecodeString(p)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, b)
		}
		if len(parts) > 1 {
			composite++
		}
		rk, ok := RoutingKey(nil, parts...)
		if !ok || hex.EncodeToString(rk) != k.RoutingKey {
			t.Errorf("%s: routing key %x, %v; the Python driver's is %s", k.Name, rk, ok, k.RoutingKey)
			continue
		}
		tok := Token(rk)
		if tok != k.Token {
			t.Errorf("%s: token %d; the Python driver's is %d", k.Name, tok, k.Token)
			continue
		}
		checkShards(t, k.Name, tok, k.Shards)
	}
	if composite < 80 {
		t.Errorf("%d composite keys; want gen.py's 82", composite)
	}
	for _, e := range ref.Edges {
		checkShards(t, fmt.Sprint("token ", e.Token), e.Token, e.Shards)
	}

	var g struct {
		Vectors [][2]int64 `json:"vectors"`
	}
	mustJSON(t, "testdata/gocql.json", &g)
	if len(g.Vectors) != 200 {
		t.Fatalf("%d gocql vectors; want 200", len(g.Vectors))
	}
	in := Info{NrShards: 4, IgnoreMSB: 12}
	for _, v := range g.Vectors {
		if got := in.ShardOf(v[0]); got != int(v[1]) {
			t.Errorf("4 shards, 12 bits ignored: ShardOf(%d) = %d; gocql's is %d", v[0], got, v[1])
		}
	}
}

// checkShards compares ShardOf for each "shards/msb" of want.
func checkShards(t *testing.T, name string, tok int64, want map[string]int) {
	t.Helper()
	if len(want) != 10 {
		t.Fatalf("%s: %d shard counts; want 10", name, len(want))
	}
	for key, w := range want {
		var nr int
		var msb uint
		if _, err := fmt.Sscanf(key, "%d/%d", &nr, &msb); err != nil {
			t.Fatalf("%s: key %q: %v", name, key, err)
		}
		if got := (Info{NrShards: nr, IgnoreMSB: msb}).ShardOf(tok); got != w {
			t.Errorf("%s: token %d, %d shards, %d bits ignored: shard %d; the reference's is %d", name, tok, nr, msb, got, w)
		}
	}
}

// TestShardOfPortVectors checks the node's side of port pairing for shard counts that do
// not divide the port range: every source port maps to port mod shards (gocql's
// scyllaShardForSourcePort), so each shard owns ⌊range/n⌋ or ⌈range/n⌉ of the ports.
func TestShardOfPortVectors(t *testing.T) {
	const lo, hi = 32768, 60999 // Linux's default ephemeral range: 28,232 ports
	for _, n := range []int{1, 3, 4, 7, 12} {
		in := Info{NrShards: n}
		count := make([]int, n)
		for p := lo; p <= hi; p++ {
			s := in.ShardOfPort(p)
			if s != p%n {
				t.Fatalf("%d shards: port %d on shard %d; want %d", n, p, s, p%n)
			}
			count[s]++
		}
		total := hi - lo + 1
		for s, c := range count {
			if c != total/n && c != total/n+1 {
				t.Errorf("%d shards: shard %d owns %d ports; want %d or %d", n, s, c, total/n, total/n+1)
			}
		}
	}
}

func mustJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}
