package sidecar

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/tracing"
)

// newShardPathConn is newPathConn with an EXECUTE of a prepared statement whose partition
// key is its one bound value, on a connection of shard 1 of 4 when sharded.
func newShardPathConn(tb testing.TB, cfg tracing.Config, sharded bool) *pathConn {
	tb.Helper()
	pc := newPathConn(tb, cfg)
	id := []byte("0123456789abcdef")
	pc.c.p.sh.Prepared.Put(id, tracing.Statement{Query: "SELECT v FROM ks.t WHERE k = ?", PKIndexes: []uint16{0}})
	body := cql.Execute{ID: id, Params: cql.QueryParams{Consistency: cql.One, Flags: cql.QueryValues,
		Values: []cql.Value{{Bytes: []byte{0, 0, 0, 42}}}}}.AppendBody(nil, cql.V4)
	pc.req = frame(cql.V4, 0, 0, cql.OpExecute, body)
	pc.rh, _ = cql.ParseHeader(pc.req)
	if sharded {
		pc.c.pipe.Shard().Restore(sharding.Info{Shard: 1, NrShards: 4, IgnoreMSB: 12})
	}
	return pc
}

// TestShardCountAllocs asserts that counting a request by shard (its token from the
// prepared statement's partition-key indexes and the bound values) allocates nothing, with
// tracing off and in fast mode, and counts what it should.
func TestShardCountAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tracing.Config
	}{
		{"off", tracing.DefaultConfig()},
		{"fast below threshold", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := newShardPathConn(t, tc.cfg, true)
			for range 2048 {
				pc.one()
			}
			if n := testing.AllocsPerRun(1000, func() { pc.one() }); n != 0 {
				t.Errorf("%v allocations per sharded request; want 0", n)
			}
			key := []byte{0, 0, 0, 42}
			owner := sharding.Info{NrShards: 4, IgnoreMSB: 12}.ShardOf(sharding.Token(key))
			want := uint64(3049)
			if owner == 1 {
				want = 0
			}
			if got, _ := pc.c.pipe.Shard().Counts(); got.Cross != want {
				t.Errorf("cross-shard count %d; want %d (the key's shard is %d, the connection's 1)", got.Cross, want, owner)
			}
		})
	}
}

// BenchmarkShardCounting measures what counting by shard adds to the per-request work: an
// EXECUTE on a connection of a sharded node, against the same EXECUTE on one whose node
// named no shard. Report the difference of the pairs as the cost.
//
//	go test ./sidecar -run '^$' -bench ShardCounting -benchtime 200000x -count 5
func BenchmarkShardCounting(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  tracing.Config
	}{
		{"off", tracing.DefaultConfig()},
		{"fast", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
	} {
		for _, sharded := range []bool{false, true} {
			name := tc.name + "/unsharded"
			if sharded {
				name = tc.name + "/sharded"
			}
			b.Run(name, func(b *testing.B) {
				pc := newShardPathConn(b, tc.cfg, sharded)
				b.ReportAllocs()
				for b.Loop() {
					pc.one()
				}
			})
		}
	}
}
