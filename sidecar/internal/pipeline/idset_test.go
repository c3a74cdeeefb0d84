package pipeline

import (
	"crypto/md5"
	"strconv"
	"testing"
)

// TestIDSet builds sets of MD5 ids (the table), ids of other lengths and the all-zero id
// (the map) in steps, as checkedStmts merges them, and asks each for every id added and for
// as many that were not.
func TestIDSet(t *testing.T) {
	id := func(i int) string {
		switch {
		case i%97 == 0:
			return "short-" + strconv.Itoa(i) // not 16 bytes
		case i == 1:
			return string(make([]byte, 16)) // the table's empty slot, as an id
		}
		d := md5.Sum([]byte("SELECT " + strconv.Itoa(i)))
		return string(d[:])
	}
	var s *idSet
	if s.has([]byte(id(2))) || s.len() != 0 {
		t.Fatal("the nil set has an id")
	}
	in := 0
	for _, step := range []int{1, 2, 5, 60, 1000, 3000} {
		more := map[string]struct{}{}
		for range step {
			more[id(in)] = struct{}{}
			in++
		}
		more[id(0)] = struct{}{} // already in: counted once
		s = newIDSet(s, more)
		if s.len() != in {
			t.Fatalf("after %d ids: len %d", in, s.len())
		}
		for i := range 2 * in {
			if got := s.has([]byte(id(i))); got != (i < in) {
				t.Fatalf("after %d ids: has(id %d) = %v", in, i, got)
			}
		}
		if len(s.slots) < 2*in-len(s.other) {
			t.Errorf("after %d ids: %d slots; want at least twice the ids in the table", in, len(s.slots))
		}
	}
	if s.has([]byte(id(5)[:15])) || s.has(append([]byte(id(5)), 0)) {
		t.Error("a prefix or an extension of an id is in the set")
	}
}

func BenchmarkCheckedHas(b *testing.B) {
	var s checkedStmts
	for i := range 40 {
		d := md5.Sum([]byte(strconv.Itoa(i)))
		s.add(string(d[:]))
	}
	d := md5.Sum([]byte("7"))
	b.ReportAllocs()
	for b.Loop() {
		if found, _ := s.has(d[:]); !found {
			b.Fatal("not found")
		}
	}
}
