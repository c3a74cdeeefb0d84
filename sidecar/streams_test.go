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
	var spare spareSlots // what an event loop lends its connections' tables
	for _, tt := range tests {
		for _, withSpare := range []bool{false, true} {
			name := tt.name
			if withSpare {
				name += " with a loop's spare tables"
			}
			t.Run(name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 2))
				var tab streamTable
				if withSpare {
					tab.spare = &spare
				}
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
	if len(spare.free) == 0 || len(spare.free) > maxSpareSlots {
		t.Errorf("the loop keeps %d spare tables; want 1 to %d", len(spare.free), maxSpareSlots)
	}
}

// TestStreamTableSpareReused empties two tables with each response, as connections with one
// request in flight at a time do: the loop's two spare tables serve them again and again,
// all zero each time, and never one to both at once.
func TestStreamTableSpareReused(t *testing.T) {
	var spare spareSlots
	a, b := streamTable{spare: &spare}, streamTable{spare: &spare}
	seen := map[*inflight]bool{}
	for i := range 100 {
		s := int16(i % 40)
		a.put(&inflight{stream: s, op: cql.OpExecute, probe: "x"})
		b.put(&inflight{stream: s, op: cql.OpBatch})
		if &a.slots[0] == &b.slots[0] {
			t.Fatalf("request %d: two tables share the loop's spare slots", i)
		}
		seen[&a.slots[0]], seen[&b.slots[0]] = true, true
		for j := range a.slots {
			if r := a.slots[j]; r.used && (r.stream != s || r.probe != "x") || !r.used && r != (inflight{}) {
				t.Fatalf("request %d: slot %d holds %+v, left from an earlier request", i, j, r)
			}
		}
		if got, ok, _ := a.take(s); !ok || got.op != cql.OpExecute {
			t.Fatalf("take(%d) = %+v, %v", s, got, ok)
		}
		b.take(s)
	}
	if len(seen) != 2 {
		t.Errorf("the tables used %d different slot arrays; want the 2 spares, reused", len(seen))
	}
	if len(spare.free) != 2 {
		t.Errorf("%d spare tables after both emptied; want 2", len(spare.free))
	}
}
