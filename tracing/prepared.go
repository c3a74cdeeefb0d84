package tracing

import "sync"

// DefaultPreparedSize bounds the prepared-statement map of a Tracer.
const DefaultPreparedSize = 10000

// preparedMap remembers prepared statement id → query text, learnt from PREPARE requests
// and their RESULT Prepared responses on every connection, so that an EXECUTE shows its
// text. It holds at most size entries and forgets the oldest first. It is safe for
// concurrent use.
type preparedMap struct {
	mu    sync.RWMutex
	m     map[string]string
	order []string // insertion order, a ring of keys
	head  int
}

func newPreparedMap(size int) *preparedMap {
	return &preparedMap{m: make(map[string]string), order: make([]string, 0, size)}
}

func (p *preparedMap) put(id, query string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[id]; ok {
		p.m[id] = query
		return
	}
	if len(p.order) < cap(p.order) {
		p.order = append(p.order, id)
	} else {
		delete(p.m, p.order[p.head])
		p.order[p.head] = id
		p.head = (p.head + 1) % len(p.order)
	}
	p.m[id] = query
}

// get looks id up without allocating: the map index converts the bytes in place.
func (p *preparedMap) get(id []byte) (string, bool) {
	p.mu.RLock()
	q, ok := p.m[string(id)]
	p.mu.RUnlock()
	return q, ok
}

func (p *preparedMap) len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.m)
}
