package tracing

import (
	"sync"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
)

// DefaultPreparedSize bounds the prepared-statement registry of a Tracer.
const DefaultPreparedSize = 10000

// Statement is what the sidecar knows of a prepared statement. A Statement in a registry
// is never modified: Put replaces it.
type Statement struct {
	// Query is the CQL text, learnt from the PREPARE request; empty when unknown.
	Query string
	// Keyspace is the statement's keyspace, from the metadata of its RESULT Prepared
	// (learnt with Query); empty when the metadata named none.
	Keyspace string
	// Binds are the statement's bound variables, and PKIndexes those that make its
	// partition key (protocol v4 and later), from the metadata of its RESULT Prepared
	// (learnt with Query).
	Binds     []cql.ColumnSpec
	PKIndexes []uint16
	// System names the system table the statement reads, in the sidecar's terms
	// (system.local, peers or peers_v2, for the address rewrite); 0 for any other.
	System uint8
	// Columns are the result columns of a System statement, for the Rows responses that
	// skip their metadata.
	Columns []cql.ColumnSpec

	secret bool // Query carries a secret (cql.CarriesSecret), set by Put
}

// Statements is the one prepared-statement registry of a sidecar: id → Statement, learnt
// from PREPARE requests and their RESULT Prepared responses on every connection. Tracing
// reads the query text of an EXECUTE from it, and the sidecar's rewrite the system table
// it reads. It holds at most size entries and forgets the oldest first. It is safe for
// concurrent use.
type Statements struct {
	mu     sync.RWMutex
	m      map[string]*Statement
	order  []string // insertion order, a ring of keys
	head   int
	system atomic.Int32 // entries with System set
}

// NewStatements returns an empty registry of at most size statements.
func NewStatements(size int) *Statements {
	if size <= 0 {
		size = DefaultPreparedSize
	}
	return &Statements{m: make(map[string]*Statement), order: make([]string, 0, size)}
}

// Put records what is learnt of the statement id. Fields left zero in st keep what the
// registry already knew, so the query text (from tracing) and the system table (from the
// rewrite) of one statement can arrive separately.
func (p *Statements) Put(id []byte, st Statement) {
	st.secret = st.Query != "" && cql.CarriesSecret(st.Query)
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.m[string(id)]; ok {
		merged := *old
		if st.Query != "" {
			merged.Query, merged.Keyspace, merged.secret = st.Query, st.Keyspace, st.secret
			merged.Binds, merged.PKIndexes = st.Binds, st.PKIndexes
		}
		if st.System != 0 {
			merged.System, merged.Columns = st.System, st.Columns
		}
		p.count(old, -1)
		p.m[string(id)] = &merged
		p.count(&merged, 1)
		return
	}
	key := string(id)
	if len(p.order) < cap(p.order) {
		p.order = append(p.order, key)
	} else {
		p.count(p.m[p.order[p.head]], -1)
		delete(p.m, p.order[p.head])
		p.order[p.head] = key
		p.head = (p.head + 1) % len(p.order)
	}
	p.m[key] = &st
	p.count(&st, 1)
}

func (p *Statements) count(st *Statement, d int32) {
	if st != nil && st.System != 0 {
		p.system.Add(d)
	}
}

// Lookup returns the statement id, or nil. It does not allocate.
func (p *Statements) Lookup(id []byte) *Statement {
	p.mu.RLock()
	st := p.m[string(id)]
	p.mu.RUnlock()
	return st
}

// HasSystem reports whether any statement reads a system table: until one does, the
// sidecar need not look at EXECUTE requests at all.
func (p *Statements) HasSystem() bool { return p.system.Load() > 0 }

// secret reports whether the statement id carries a secret (cql.CarriesSecret), or is
// unknown: its text cannot tell.
func (p *Statements) secret(id []byte) bool {
	st := p.Lookup(id)
	return st == nil || st.Query == "" || st.secret
}

// get returns the query text of id.
func (p *Statements) get(id []byte) (string, bool) {
	if st := p.Lookup(id); st != nil && st.Query != "" {
		return st.Query, true
	}
	return "", false
}

func (p *Statements) len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.m)
}
