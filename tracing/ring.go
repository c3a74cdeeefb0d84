package tracing

import "sync/atomic"

// ring is the in-memory sink: a fixed number of slots overwritten oldest first. Writers
// claim a sequence number with one atomic add and never wait; readers check each slot's
// sequence number, so a slot overwritten while they read is skipped, not misplaced. It is
// safe for concurrent use.
type ring struct {
	next  atomic.Uint64
	slots []atomic.Pointer[ringEntry]
}

type ringEntry struct {
	seq uint64
	s   *Session
}

func newRing(n int) *ring { return &ring{slots: make([]atomic.Pointer[ringEntry], n)} }

func (r *ring) put(s *Session) {
	seq := r.next.Add(1) - 1
	r.slots[seq%uint64(len(r.slots))].Store(&ringEntry{seq: seq, s: s})
}

// each calls f on the sessions newest first until f returns false.
func (r *ring) each(f func(*Session) bool) {
	n := r.next.Load()
	size := uint64(len(r.slots))
	for i := uint64(0); i < size && i < n; i++ {
		seq := n - 1 - i
		e := r.slots[seq%size].Load()
		if e == nil || e.seq != seq {
			continue // claimed but not yet stored, or already overwritten
		}
		if !f(e.s) {
			return
		}
	}
}

func (r *ring) list(limit int) []Session {
	n := int(min(r.next.Load(), uint64(len(r.slots))))
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Session, 0, limit)
	r.each(func(s *Session) bool {
		out = append(out, *s)
		return len(out) < limit
	})
	return out
}

func (r *ring) find(id string) (Session, bool) {
	var found *Session
	r.each(func(s *Session) bool {
		if s.ID == id {
			found = s
			return false
		}
		return true
	})
	if found == nil {
		return Session{}, false
	}
	return *found, true
}
