package pipeline

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// idSet is an immutable set of prepared statement ids, for checkedStmts. Cassandra and
// ScyllaDB give 16-byte ids (an MD5 digest): those are kept as two words in an open-addressed
// table at most half full, so that a lookup is a multiply and a compare or two, where a map
// with string keys hashed and compared the id's bytes on every EXECUTE (about 1.5% of the
// sidecar's CPU in mode off under perf). Ids of any other length, and the all-zero id (the
// table's empty slot), are kept in a map.
type idSet struct {
	slots []idKey // len is a power of two, or 0
	shift uint8   // 64 - log2(len(slots))
	other map[string]struct{}
	n     int
}

type idKey struct{ a, b uint64 }

// idSeed is the process's odd multiplier of the slot index: the ids come from the node,
// but a client chooses the statements they digest, and must not be able to line them up
// in one probe run without knowing it.
var idSeed = rand.Uint64() | 1

func idKeyOf(id []byte) (idKey, bool) {
	if len(id) != 16 {
		return idKey{}, false
	}
	k := idKey{binary.LittleEndian.Uint64(id), binary.LittleEndian.Uint64(id[8:])}
	return k, k != idKey{}
}

func (s *idSet) index(k idKey) int { return int(((k.a ^ k.b) * idSeed) >> s.shift) }

func (s *idSet) has(id []byte) bool {
	if s == nil {
		return false
	}
	if k, ok := idKeyOf(id); ok {
		if len(s.slots) == 0 {
			return false
		}
		mask := len(s.slots) - 1
		for i := s.index(k); ; i = (i + 1) & mask {
			switch s.slots[i] {
			case k:
				return true
			case idKey{}:
				return false
			}
		}
	}
	_, ok := s.other[string(id)]
	return ok
}

func (s *idSet) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// newIDSet returns the set of the ids in old (nil: none) and in more.
func newIDSet(old *idSet, more map[string]struct{}) *idSet {
	n := old.len() + len(more)
	size := 1 << bits.Len(uint(2*n-1)) // at least twice n, a power of two
	s := &idSet{slots: make([]idKey, size), shift: uint8(64 - bits.Len(uint(size-1)))}
	if old != nil {
		for _, k := range old.slots {
			if k != (idKey{}) {
				s.insert(k)
			}
		}
		for id := range old.other {
			s.add(id)
		}
	}
	for id := range more {
		s.add(id)
	}
	return s
}

func (s *idSet) add(id string) {
	if k, ok := idKeyOf([]byte(id)); ok {
		s.insert(k)
		return
	}
	if s.other == nil {
		s.other = make(map[string]struct{})
	}
	if _, ok := s.other[id]; !ok {
		s.other[id] = struct{}{}
		s.n++
	}
}

func (s *idSet) insert(k idKey) {
	mask := len(s.slots) - 1
	i := s.index(k)
	for s.slots[i] != (idKey{}) {
		if s.slots[i] == k {
			return
		}
		i = (i + 1) & mask
	}
	s.slots[i] = k
	s.n++
}
