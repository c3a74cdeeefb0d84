package tracing

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestQueryCacheNormalizes checks that the cache gives what cql.NormalizeQuery gives, for
// each of its options, on a first look and on later ones, when statements share slots,
// and for texts too long to keep.
func TestQueryCacheNormalizes(t *testing.T) {
	queries := []string{
		"SELECT * FROM ks.t WHERE k = ?",
		"SELECT * FROM ks.t WHERE k = 'secret' AND n = 42",
		"ALTER ROLE bob WITH PASSWORD = 'hunter2'",
		"INSERT INTO ks.t (k, v) VALUES (1, '" + strings.Repeat("x", 300) + "')",
		"SELECT * FROM ks.t WHERE k IN (" + strings.Repeat("1, ", queryCacheMaxLen) + "2)",
	}
	for i := range 3 * queryCacheSlots { // more statements than slots
		queries = append(queries, fmt.Sprintf("SELECT v FROM ks.t%d WHERE k = %d", i, i))
	}
	tests := []struct {
		name     string
		literals bool
		maxLen   int
	}{
		{name: "redacted, cut", maxLen: 64},
		{name: "literals kept, cut", literals: true, maxLen: 64},
		{name: "redacted, whole", maxLen: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newQueryCache(tc.literals, tc.maxLen)
			for round := range 2 {
				for _, q := range queries {
					wantText, wantCut := cql.NormalizeQuery(q, tc.literals, tc.maxLen)
					if text, cut := c.normalize(q); text != wantText || cut != wantCut {
						t.Fatalf("round %d: normalize(%.40q) = %.40q, %v; want %.40q, %v", round, q, text, cut, wantText, wantCut)
					}
					if text, cut := c.normalizeBytes([]byte(q)); text != wantText || cut != wantCut {
						t.Fatalf("round %d: normalizeBytes(%.40q) = %.40q, %v; want %.40q, %v", round, q, text, cut, wantText, wantCut)
					}
				}
			}
		})
	}
}

// TestQueryCacheKeeps checks that a statement seen before is not normalized again: its
// text is the one stored the first time.
func TestQueryCacheKeeps(t *testing.T) {
	c := newQueryCache(false, 0)
	q := "SELECT * FROM ks.t WHERE k = 'a'"
	first, _ := c.normalize(q)
	again, _ := c.normalizeBytes([]byte(q))
	if p1, p2 := unsafe.StringData(first), unsafe.StringData(again); p1 != p2 {
		t.Errorf("the second look normalized again (texts at %p and %p); want the stored text", p1, p2)
	}
}

// TestQueryCacheConcurrent is for the race detector.
func TestQueryCacheConcurrent(t *testing.T) {
	c := newQueryCache(false, 0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				q := fmt.Sprintf("SELECT * FROM t WHERE k = %d", (i*7+g)%300)
				want, _ := cql.NormalizeQuery(q, false, 0)
				if got, _ := c.normalize(q); got != want {
					t.Errorf("normalize(%q) = %q; want %q", q, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestManyBoundValues checks the names and redacted texts of bound values, past the ones
// named in advance.
func TestManyBoundValues(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	tr.Statements().Put(testID, Statement{Query: testQuery})
	var values [][]byte
	for i := range len(paramKeys) + 6 {
		values = append(values, make([]byte, i*7)) // lengths past len(redactedValues) too
	}
	ps := map[string]string{}
	var req cql.Request
	if req.Parse(cql.OpExecute, cql.V4, executeMsg(values...).AppendBody(nil, cql.V4)); req.Err != nil {
		t.Fatal(req.Err)
	}
	tr.params(ps).request(&req)
	for i, v := range values {
		k, want := fmt.Sprintf("param[%d]", i), fmt.Sprintf("<redacted: %d bytes>", len(v))
		if got := ps[k]; got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
	if got, want := len(ps), len(values)+3; got != want { // and query, consistency_level, page_size
		t.Errorf("%d parameters; want %d: %v", got, want, ps)
	}
}
