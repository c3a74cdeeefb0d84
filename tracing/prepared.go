package tracing

import "sync"

// DefaultPreparedSize bounds the prepared-statement map of a Tracer.
const DefaultPreparedSize = 10000

// preparedMap remembers prepared statement id → query text and keyspace, learnt from
// PREPARE requests and their RESULT Prepared responses on every connection, so that an
// EXECUTE shows its text. It holds at most size entries and forgets the oldest first. It is safe for
// concurrent use.
type preparedMap struct {
	mu    sync.RWMutex
	m     map[string]preparedStmt
	order []string // insertion order, a ring of keys
	head  int
}

// preparedStmt is what a PREPARE told about a statement.
type preparedStmt struct {
	query    string
	keyspace string // from the statement's metadata; "" when it had none
}

func newPreparedMap(size int) *preparedMap {
	return &preparedMap{m: make(map[string]preparedStmt), order: make([]string, 0, size)}
}

func (p *preparedMap) put(id, query, keyspace string) {
	st := preparedStmt{query: query, keyspace: keyspace}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[id]; ok {
		p.m[id] = st
		return
	}
	if len(p.order) < cap(p.order) {
		p.order = append(p.order, id)
	} else {
		delete(p.m, p.order[p.head])
		p.order[p.head] = id
		p.head = (p.head + 1) % len(p.order)
	}
	p.m[id] = st
}

// get returns the query of id.
func (p *preparedMap) get(id []byte) (string, bool) {
	st, ok := p.lookup(id)
	return st.query, ok
}

// lookup looks id up without allocating: the map index converts the bytes in place.
func (p *preparedMap) lookup(id []byte) (preparedStmt, bool) {
	p.mu.RLock()
	st, ok := p.m[string(id)]
	p.mu.RUnlock()
	return st, ok
}

func (p *preparedMap) len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.m)
}
