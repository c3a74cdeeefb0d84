package sidecar

import (
	"math/rand/v2"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

func TestStreamTableMatchesMap(t *testing.T) {
	tests := []struct {
		name    string
		streams func(r *rand.Rand) int16
	}{
		{"sequential low ids", func(r *rand.Rand) int16 { return int16(r.IntN(200)) }},
		{"whole range", func(r *rand.Rand) int16 { return int16(r.IntN(1 << 15)) }},
		{"gocql-like buckets", func(r *rand.Rand) int16 { return int16(r.IntN(512)*64 + r.IntN(3)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var tab streamTable
			model := map[int16]cql.Opcode{}
			for i := range 200000 {
				s := tt.streams(r)
				if _, ok := model[s]; !ok && r.IntN(3) > 0 {
					op := cql.Opcode(r.IntN(16))
					model[s] = op
					if n := tab.put(&inflight{stream: s, op: op}); n != len(model) {
						t.Fatalf("step %d: put returned %d in flight; want %d", i, n, len(model))
					}
					continue
				}
				got, ok, n := tab.take(s)
				want, wantOK := model[s]
				delete(model, s)
				if ok != wantOK || ok && (got.op != want || got.stream != s) || n != len(model) {
					t.Fatalf("step %d: take(%d) = %+v, %v, %d; want op %s, %v, %d", i, s, got, ok, n, want, wantOK, len(model))
				}
			}
			all := tab.takeAll(nil)
			if len(all) != len(model) {
				t.Errorf("takeAll returned %d requests; want %d", len(all), len(model))
			}
			for _, r := range all {
				if model[r.stream] != r.op {
					t.Errorf("takeAll returned stream %d op %s; want op %s", r.stream, r.op, model[r.stream])
				}
			}
			if tab.len() != 0 {
				t.Errorf("len() after takeAll = %d; want 0", tab.len())
			}
		})
	}
}

func TestStreamTableReusedStream(t *testing.T) {
	var tab streamTable
	tab.put(&inflight{stream: 7, op: cql.OpQuery})
	if n := tab.put(&inflight{stream: 7, op: cql.OpExecute}); n != 1 {
		t.Errorf("put of a stream in flight returned %d; want 1 (replaced)", n)
	}
	got, ok, n := tab.take(7)
	if !ok || got.op != cql.OpExecute || n != 0 {
		t.Errorf("take(7) = %+v, %v, %d; want the EXECUTE, true, 0", got, ok, n)
	}
}

func TestSystemTable(t *testing.T) {
	tests := []struct {
		q    string
		want rewriteKind
	}{
		{"SELECT * FROM system.local WHERE key='local'", kindLocal},
		{"SELECT * FROM system.peers", kindPeers},
		{"SELECT * FROM system.peers_v2", kindPeersV2},
		{"select peer, rpc_address from SYSTEM.PEERS", kindPeers},
		{`SELECT * FROM "system"."local"`, kindLocal},
		{"SELECT * FROM system . local", kindLocal},
		{"SELECT schema_version FROM system.local WHERE key='local'", kindLocal},
		{"SELECT * FROM system_schema.keyspaces", kindNone},
		{"SELECT * FROM system.localx", kindNone},
		{"SELECT * FROM mysystem.local", kindNone},
		{"SELECT * FROM system_traces.events", kindNone},
		{"SELECT * FROM system.peers_v3", kindNone},
		{"INSERT INTO ks.t (k) VALUES ('system')", kindNone},
		{"system", kindNone},
		{"", kindNone},
		// The table reference, not a substring.
		{"SELECT * FROM ks.t WHERE v = 'system.local'", kindNone},
		{"SELECT 'system.local' FROM ks.t", kindNone},
		{"SELECT * FROM ks.t /* system.local */", kindNone},
		{"SELECT * FROM ks.t WHERE v = $$ from system.peers $$", kindNone},
		{"UPDATE ks.t SET v = 'SELECT * FROM system.local' WHERE k = 1", kindNone},
		{"INSERT INTO ks.t (k, v) VALUES (1, 'x') -- FROM system.local", kindNone},
		{"SELECT \"from\" FROM ks.t", kindNone},
		{"SELECT count(*) FROM system.local", kindLocal},
		{"/* c */ select\n  peer -- from x\n  from system.peers", kindPeers},
		{`SELECT * FROM system."LOCAL"`, kindNone},
		{"SELECT * FROM local", kindNone}, // not in keyspace system
		{"use system", kindUse},
		{"USE \"system\"", kindUse},
	}
	for _, tt := range tests {
		if got := statementTable([]byte(tt.q), false); got != tt.want {
			t.Errorf("statementTable(%q, false) = %d; want %d", tt.q, got, tt.want)
		}
	}
	// After USE system, a table named alone is in system.
	for _, tt := range []struct {
		q    string
		want rewriteKind
	}{
		{"SELECT * FROM local", kindLocal},
		{"SELECT * FROM peers_v2 WHERE peer = ?", kindPeersV2},
		{"SELECT * FROM ks.local", kindNone},
		{"SELECT * FROM \"local\"", kindLocal},
		{"SELECT * FROM localx", kindNone},
	} {
		if got := statementTable([]byte(tt.q), true); got != tt.want {
			t.Errorf("statementTable(%q, true) = %d; want %d", tt.q, got, tt.want)
		}
	}
}

func TestInspectDoesNotAllocate(t *testing.T) {
	c := fuzzConn(1) // lz4
	c.p.rememberStmt([]byte("0123456789abcdef"), kindLocal, nil)
	query := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Query{Query: "SELECT * FROM ks.t WHERE k = 1", Params: cql.QueryParams{Consistency: cql.One}})
	lz4Query, err := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Query{Query: "SELECT * FROM ks.t WHERE k = 1"}, cql.LZ4{})
	if err != nil {
		t.Fatal(err)
	}
	lz4Insert := compressedFrame(t, insertQuery(1024), cql.LZ4{})
	tests := []struct {
		name  string
		frame []byte
	}{
		{"query", query},
		{"lz4 query", lz4Query},
		{"lz4 insert", lz4Insert},
		{"execute", executeFrame(1)},
	}
	for _, tt := range tests {
		h, err := cql.ParseHeader(tt.frame)
		if err != nil {
			t.Fatal(err)
		}
		c.inspectFrame(h, tt.frame) // grows the scratch buffer
		if n := testing.AllocsPerRun(100, func() { c.inspectFrame(h, tt.frame) }); n != 0 {
			t.Errorf("%s: inspect allocates %.1f times per request; want 0", tt.name, n)
		}
	}
}
