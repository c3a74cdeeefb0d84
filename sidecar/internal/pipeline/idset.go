package pipeline

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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

// maxCheckedStmts bounds the ids remembered as not reading a system table; beyond it, new
// ids are not probed.
const maxCheckedStmts = 1 << 16

// checkedStmts is the set of prepared ids known not to read a system table. Every EXECUTE
// asks it, from every loop and goroutine, and ids are added once each: has reads an
// immutable set (idSet) through an atomic pointer, without a lock (a read lock's shared
// counter moved between the cores on every EXECUTE); add puts an id in a small map under a
// lock, merged into a new immutable set once it holds an eighth as many ids (at once while
// there are few), so that the copies cost about nine per id in all. An id added since the
// last merge is found under the lock.
type checkedStmts struct {
	frozen atomic.Pointer[idSet]
	mu     sync.Mutex
	recent map[string]struct{}
	n      atomic.Int64 // ids in both
}

func (s *checkedStmts) has(id []byte) (found, full bool) {
	frozen := s.frozen.Load()
	if frozen.has(id) {
		return true, false
	}
	n := s.n.Load()
	full = n >= maxCheckedStmts
	if n == int64(frozen.len()) {
		return false, full // nothing added since the last merge
	}
	s.mu.Lock()
	_, found = s.recent[string(id)]
	s.mu.Unlock()
	return found, full
}

func (s *checkedStmts) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n.Load() >= maxCheckedStmts {
		return
	}
	old := s.frozen.Load()
	if old.has([]byte(id)) {
		return
	}
	if _, ok := s.recent[id]; ok {
		return
	}
	if s.recent == nil {
		s.recent = make(map[string]struct{})
	}
	s.recent[id] = struct{}{}
	s.n.Add(1)
	if len(s.recent) < old.len()/8 {
		return
	}
	s.frozen.Store(newIDSet(old, s.recent))
	clear(s.recent)
}
