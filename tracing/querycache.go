package tracing

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/tracecar/tracecar/internal/cql"
)

// Bounds of a queryCache: its slots, and the longest statement text it keeps.
const (
	queryCacheSlots  = 128
	queryCacheMaxLen = 2 << 10
)

// queryCache remembers the normalized text of the statements recorded lately. A workload
// repeats few statements, and normalizing one costs more than the rest of its session's
// parameters. It is a direct-mapped table of atomic slots, so a reader never waits: a
// statement takes the slot its text hashes to, from the one there before. It holds at most
// queryCacheSlots texts of at most queryCacheMaxLen bytes; longer ones are normalized every
// time. Its normalization options are fixed, as a Tracer's are. It is safe for concurrent
// use.
type queryCache struct {
	literals bool
	maxLen   int
	seed     maphash.Seed
	slots    [queryCacheSlots]atomic.Pointer[normalizedQuery]
}

type normalizedQuery struct {
	query, text string
	truncated   bool
}

func newQueryCache(literals bool, maxLen int) *queryCache {
	return &queryCache{literals: literals, maxLen: maxLen, seed: maphash.MakeSeed()}
}

// normalize returns cql.NormalizeQuery(q, …) with the cache's options.
func (c *queryCache) normalize(q string) (string, bool) {
	if len(q) > queryCacheMaxLen {
		return cql.NormalizeQuery(q, c.literals, c.maxLen)
	}
	slot := &c.slots[maphash.String(c.seed, q)%queryCacheSlots]
	if n := slot.Load(); n != nil && n.query == q {
		return n.text, n.truncated
	}
	return c.store(slot, q)
}

// normalizeBytes is normalize for a statement read from a frame: a text seen before costs
// no copy.
func (c *queryCache) normalizeBytes(q []byte) (string, bool) {
	if len(q) > queryCacheMaxLen {
		return cql.NormalizeQuery(string(q), c.literals, c.maxLen)
	}
	slot := &c.slots[maphash.Bytes(c.seed, q)%queryCacheSlots]
	if n := slot.Load(); n != nil && n.query == string(q) {
		return n.text, n.truncated
	}
	return c.store(slot, string(q))
}

func (c *queryCache) store(slot *atomic.Pointer[normalizedQuery], q string) (string, bool) {
	text, truncated := cql.NormalizeQuery(q, c.literals, c.maxLen)
	slot.Store(&normalizedQuery{query: q, text: text, truncated: truncated})
	return text, truncated
}
