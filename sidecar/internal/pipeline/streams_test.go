package pipeline

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
	var spare SpareSlots // what an event loop lends its connections' tables
	for _, tt := range tests {
		for _, withSpare := range []bool{false, true} {
			name := tt.name
			if withSpare {
				name += " with a loop's spare tables"
			}
			t.Run(name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 2))
				var tab StreamTable
				if withSpare {
					tab.spare = &spare
				}
				model := map[int16]cql.Opcode{}
				for i := range 200000 {
					s := tt.streams(r)
					if _, ok := model[s]; !ok && r.IntN(3) > 0 {
						op := cql.Opcode(r.IntN(16))
						model[s] = op
						if n := tab.put(&Inflight{Stream: s, Op: op}); n != len(model) {
							t.Fatalf("step %d: put returned %d in flight; want %d", i, n, len(model))
						}
						continue
					}
					got, ok, n := tab.Take(s)
					want, wantOK := model[s]
					delete(model, s)
					if ok != wantOK || ok && (got.Op != want || got.Stream != s) || n != len(model) {
						t.Fatalf("step %d: take(%d) = %+v, %v, %d; want op %s, %v, %d", i, s, got, ok, n, want, wantOK, len(model))
					}
				}
				all := tab.TakeAll(nil)
				if len(all) != len(model) {
					t.Errorf("takeAll returned %d requests; want %d", len(all), len(model))
				}
				for _, r := range all {
					if model[r.Stream] != r.Op {
						t.Errorf("takeAll returned stream %d op %s; want op %s", r.Stream, r.Op, model[r.Stream])
					}
				}
				if tab.Len() != 0 {
					t.Errorf("len() after takeAll = %d; want 0", tab.Len())
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
	var spare SpareSlots
	a, b := StreamTable{spare: &spare}, StreamTable{spare: &spare}
	seen := map[*Inflight]bool{}
	for i := range 100 {
		s := int16(i % 40)
		a.put(&Inflight{Stream: s, Op: cql.OpExecute, probe: "x"})
		b.put(&Inflight{Stream: s, Op: cql.OpBatch})
		if &a.slots[0] == &b.slots[0] {
			t.Fatalf("request %d: two tables share the loop's spare slots", i)
		}
		seen[&a.slots[0]], seen[&b.slots[0]] = true, true
		for j := range a.slots {
			if r := a.slots[j]; r.Used && (r.Stream != s || r.probe != "x") || !r.Used && r != (Inflight{}) {
				t.Fatalf("request %d: slot %d holds %+v, left from an earlier request", i, j, r)
			}
		}
		if got, ok, _ := a.Take(s); !ok || got.Op != cql.OpExecute {
			t.Fatalf("take(%d) = %+v, %v", s, got, ok)
		}
		b.Take(s)
	}
	if len(seen) != 2 {
		t.Errorf("the tables used %d different slot arrays; want the 2 spares, reused", len(seen))
	}
	if n := spare.count(); n != 2 {
		t.Errorf("%d spare tables after both emptied; want 2", n)
	}
}

// count returns the number of spare tables, of every size.
func (sp *SpareSlots) count() int {
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
	var spare SpareSlots
	tab := StreamTable{spare: &spare}
	tab.put(&Inflight{Stream: 1, Op: cql.OpStartup})
	if len(tab.slots) != minStreamSlots {
		t.Fatalf("a new table has %d slots; want %d", len(tab.slots), minStreamSlots)
	}
	tab.Take(1)
	var last []Inflight // the slots the previous burst ended with
	for round, burst := range []int{20, 20, 100, 100} {
		for i := range burst {
			tab.put(&Inflight{Stream: int16(i), Op: cql.OpQuery})
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
			if _, ok, _ := tab.Take(int16(i)); !ok {
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
