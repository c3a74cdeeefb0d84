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
	if n := spare.count(); n == 0 || n > len(spare.free)*maxSpareSlots {
		t.Errorf("the loop keeps %d spare tables; want 1 to %d", n, len(spare.free)*maxSpareSlots)
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
	if n := spare.count(); n != 2 {
		t.Errorf("%d spare tables after both emptied; want 2", n)
	}
}

// count returns the number of spare tables, of every size.
func (sp *spareSlots) count() int {
	n := 0
	for _, f := range sp.free {
		n += len(f)
	}
	return n
}

// TestStreamTableSize: a new table is small (a connection in its handshake, or with one
// request at a time, holds minStreamSlots slots), and one that grew and emptied starts
// again at the size it had, from the loop's spares up to 64 slots, instead of growing again
// from the smallest with every burst of requests.
func TestStreamTableSize(t *testing.T) {
	var spare spareSlots
	tab := streamTable{spare: &spare}
	tab.put(&inflight{stream: 1, op: cql.OpStartup})
	if len(tab.slots) != minStreamSlots {
		t.Fatalf("a new table has %d slots; want %d", len(tab.slots), minStreamSlots)
	}
	tab.take(1)
	var last []inflight // the slots the previous burst ended with
	for round, burst := range []int{20, 20, 100, 100} {
		for i := range burst {
			tab.put(&inflight{stream: int16(i), op: cql.OpQuery})
			if i == 0 && round%2 == 1 {
				// The burst before was as large: the table starts at the size it grew to,
				// up to 64 slots (a burst of thousands is not remembered).
				want := min(len(last), 1<<maxSpareLog)
				if burst <= 32 {
					want = 64 // 20 in flight need 64 slots at a load of one half
				}
				if len(tab.slots) != want {
					t.Errorf("round %d: the first request of %d gets %d slots; want %d", round, burst, len(tab.slots), want)
				}
				if burst <= 32 && &tab.slots[0] != &last[0] {
					t.Errorf("round %d: the table of 64 slots is not the loop's spare", round)
				}
			}
		}
		if size := len(tab.slots); size < 2*burst || size > 4*burst {
			t.Fatalf("round %d: %d in flight in %d slots", round, burst, size)
		}
		last = tab.slots
		for i := range burst {
			if _, ok, _ := tab.take(int16(i)); !ok {
				t.Fatalf("round %d: request %d lost", round, i)
			}
		}
		if tab.slots != nil {
			t.Fatalf("round %d: an empty table holds %d slots", round, len(tab.slots))
		}
	}
	if n := len(spare.free[len(spare.free)-1]); n != 1 {
		t.Errorf("%d spare tables of 64 slots; want the one the bursts of 20 used", n)
	}
}
