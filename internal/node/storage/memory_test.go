package storage

import (
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// walkBytes recounts what d holds by the estimate's own rules, walking every partition:
// what the counter charged write by write must come to the same.
func walkBytes(d *TableData) int64 {
	var n int64
	for i := range d.shards {
		for _, p := range d.shards[i].parts {
			n += partitionBytes + int64(len(p.Key)) + allocBytes
			rows := p.Rows
			if p.Static != nil {
				rows = append(rows[:len(rows):len(rows)], p.Static)
			}
			for _, r := range rows {
				n += rowBytes + int64(len(r.cells))*cellBytes + ckBytes(r.Ck) + rowValueBytes(r)
			}
		}
	}
	return n
}

func intBytes(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i)) }

// TestMemoryCount: the bytes charged write by write, and given back by deletions, come to
// what a walk of the table counts, for every kind of write the engine applies: rows, a
// static row, overwrites, cell, row, range and partition deletions, a column added by ALTER
// TABLE; TRUNCATE's and DROP's Renew and Release give it all back.
func TestMemoryCount(t *testing.T) {
	tbl := MustTable("ks", "CREATE TABLE t (k int, c int, v text, s text static, PRIMARY KEY (k, c))")
	mem := NewMemory(0)
	d := mem.NewData()
	v, s := tbl.ByName["v"].Pos, tbl.ByName["s"].Pos
	ts := int64(1)
	apply := func(what string, k int, m Mutation, ops ...CellOp) {
		t.Helper()
		ts++
		m.Pk, m.Ts = intBytes(k), ts
		m.Token = Murmur3Token(m.Pk)
		if err := d.Apply(tbl, &m, ops, 0); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got, want := mem.Held(), walkBytes(d); got != want {
			t.Fatalf("after %s: the counter says %d bytes; a walk of the table %d", what, got, want)
		}
	}
	val := []byte(strings.Repeat("x", 1000))
	for k := range 3 {
		for c := range 4 {
			apply("INSERT", k, Mutation{Ck: [][]byte{intBytes(c)}, Marker: true}, CellOp{Pos: v, V: val})
		}
		apply("static write", k, Mutation{}, CellOp{Pos: s, V: val[:10]})
	}
	held := mem.Held()
	if held < 12*1000 {
		t.Fatalf("held %d bytes after 12 values of 1,000; want more", held)
	}
	apply("overwrite", 0, Mutation{Ck: [][]byte{intBytes(0)}}, CellOp{Pos: v, V: val[:1]})
	if got := mem.Held(); got != held-999 {
		t.Errorf("an overwrite of 1,000 bytes by 1: held %d; want %d", got, held-999)
	}
	apply("cell deletion", 0, Mutation{Ck: [][]byte{intBytes(1)}}, CellOp{Pos: v})
	apply("row deletion", 0, Mutation{Ck: [][]byte{intBytes(2)}, DelRow: true})
	apply("range deletion", 1, Mutation{DelRange: &CkFilter{Lo: &CkBound{Vals: [][]byte{intBytes(1)}, Inclusive: true}}})
	apply("partition deletion", 2, Mutation{DelPartition: true})
	if mem.Held() >= held-7000 {
		t.Errorf("the deletions of 7 values of 1,000 bytes freed %d bytes; want more", held-mem.Held())
	}

	added := tbl.Alter()
	added.Cells = append(added.Cells, &Column{Name: "w", Typ: tbl.ByName["v"].Typ, Kind: tbl.ByName["v"].Kind, Pos: len(tbl.Cells)})
	tbl = added
	apply("write of an added column", 0, Mutation{Ck: [][]byte{intBytes(3)}}, CellOp{Pos: len(tbl.Cells) - 1, V: val})

	other := mem.NewData()
	other.charge(100)
	if nd := mem.Renew(d); nd.mem != mem || mem.Held() != 100 {
		t.Fatalf("after Renew: held %d, counted %v; want 100, the other table's, and the new data counted", mem.Held(), nd.mem == mem)
	}
	mem.Release(other)
	mem.Release(other)
	if got := mem.Held(); got != 0 {
		t.Fatalf("after Release, twice: held %d; want 0", got)
	}
}

// TestMemoryUncounted: data not made by a Memory (system tables, views) counts nothing.
func TestMemoryUncounted(t *testing.T) {
	tbl := MustTable("ks", "CREATE TABLE t (k int PRIMARY KEY, v text)")
	d := NewTableData()
	m := Mutation{Pk: intBytes(1), Ts: 1, Marker: true}
	m.Token = Murmur3Token(m.Pk)
	if err := d.Apply(tbl, &m, []CellOp{{Pos: tbl.ByName["v"].Pos, V: []byte("x")}}, 0); err != nil {
		t.Fatal(err)
	}
	if d.bytes.Load() != 0 {
		t.Errorf("uncounted data holds %d bytes; want 0", d.bytes.Load())
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{512, "512 B"}, {64 << 20, "64 MiB"}, {2 << 30, "2 GiB"}, {3 << 29, "1.5 GiB"}, {64 << 10, "64 KiB"}} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q; want %q", tc.n, got, tc.want)
		}
	}
}

// collect runs a collection and waits until collections has counted it, as Admit sees it.
func collect(t *testing.T) {
	t.Helper()
	n := collections.Load()
	runtime.GC()
	for deadline := time.Now().Add(5 * time.Second); collections.Load() == n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no collection counted 5 s after runtime.GC")
		}
	}
}

// TestMemoryLiveHeap: in a process whose soft memory limit is the node's, a live heap at the
// tables' share refuses writes though the estimate counts nothing, naming the live bytes; the
// refusals hold once that memory is collected (the tables hold what they held), until a
// TRUNCATE or DROP (Release) lets writes in again. In a process that is not the node's alone
// (its soft limit is not the node's), the heap is not counted.
func TestMemoryLiveHeap(t *testing.T) {
	const limit = 16 << 20
	old := debug.SetMemoryLimit(RuntimeLimit(limit))
	defer debug.SetMemoryLimit(old)
	mem := NewMemory(limit)
	shared := NewMemory(limit + 1<<20) // its limit is not the runtime's

	ballast := make([]byte, limit)
	for i := range ballast {
		ballast[i] = byte(i)
	}
	collect(t)
	err := mem.Admit()
	if err == nil || !strings.Contains(err.Error(), "node memory limit 16 MiB reached (--memory-limit): its tables hold 16") {
		t.Fatalf("Admit with a live heap of %d bytes = %v; want Overloaded naming the live bytes", len(ballast), err)
	}
	if err := shared.Admit(); err != nil {
		t.Errorf("Admit in a shared process = %v; want nil: its estimate is 0", err)
	}
	runtime.KeepAlive(ballast)
	ballast = nil

	collect(t)
	if err := mem.Admit(); err == nil {
		t.Errorf("Admit once the ballast is collected = nil; want the refusal to hold until memory is freed")
	}
	mem.Release(mem.NewData()) // a TRUNCATE: the ceiling goes back to the share
	if err := mem.Admit(); err != nil {
		t.Errorf("Admit right after a Release = %v; want nil", err)
	}
	if mem.Refused() != 2 {
		t.Errorf("Refused() = %d; want 2", mem.Refused())
	}
}
