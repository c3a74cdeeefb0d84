package capture

import "sync/atomic"

// ring is a bounded queue of Records that any number of goroutines push to and pop from
// without a lock (Dmitry Vyukov's bounded MPMC queue): every connection pushes its
// requests and takes reused Records at once, and a channel's lock, contended, would put
// the data path to sleep in the kernel. Each slot carries a sequence number that says
// whose turn it is.
type ring struct {
	mask  uint64
	_     [56]byte
	head  atomic.Uint64 // the next slot to pop
	_     [56]byte
	tail  atomic.Uint64 // the next slot to push
	_     [56]byte
	slots []ringSlot
}

type ringSlot struct {
	seq atomic.Uint64
	r   *Record
}

// newRing returns a ring of n slots, n a power of two.
func newRing(n int) *ring {
	q := &ring{mask: uint64(n - 1), slots: make([]ringSlot, n)}
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	return q
}

// push adds r, or reports false when the ring is full.
func (q *ring) push(r *Record) bool {
	pos := q.tail.Load()
	for {
		s := &q.slots[pos&q.mask]
		seq := s.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if q.tail.CompareAndSwap(pos, pos+1) {
				s.r = r
				s.seq.Store(pos + 1)
				return true
			}
			pos = q.tail.Load()
		case d < 0:
			return false
		default:
			pos = q.tail.Load()
		}
	}
}

// pop removes and returns the oldest Record, or nil when the ring is empty.
func (q *ring) pop() *Record {
	pos := q.head.Load()
	for {
		s := &q.slots[pos&q.mask]
		seq := s.seq.Load()
		switch d := int64(seq - (pos + 1)); {
		case d == 0:
			if q.head.CompareAndSwap(pos, pos+1) {
				r := s.r
				s.r = nil
				s.seq.Store(pos + q.mask + 1)
				return r
			}
			pos = q.head.Load()
		case d < 0:
			return nil
		default:
			pos = q.head.Load()
		}
	}
}
