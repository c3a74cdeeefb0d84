package statements

import (
	"slices"
	"testing"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// merge merges lists as a client of the admin API does (adminapi.Merge), and returns the
// result as this package's statements, so that the tests here check what the clients do
// with what List serves.
func merge(lists ...[]Statement) ([]Statement, bool) {
	in := make([][]adminapi.Statement, len(lists))
	for i, l := range lists {
		for _, st := range l {
			in[i] = append(in[i], adminapi.Statement(st))
		}
	}
	m, ok := adminapi.Merge(in...)
	out := make([]Statement, len(m))
	for i, st := range m {
		out[i] = Statement(st)
	}
	return out, ok
}

// TestAntiPatternKindsAreTheAPIs: the clients order a merged statement's anti-patterns by
// the API's list of kinds, which must be this package's.
func TestAntiPatternKindsAreTheAPIs(t *testing.T) {
	if !slices.Equal(AntiPatternKinds[:], adminapi.AntiPatternKinds) {
		t.Errorf("statements.AntiPatternKinds %q, adminapi.AntiPatternKinds %q: want the same", AntiPatternKinds, adminapi.AntiPatternKinds)
	}
	if !slices.Equal(SortOrders, adminapi.SortOrders) {
		t.Errorf("statements.SortOrders %q, adminapi.SortOrders %q: want the same", SortOrders, adminapi.SortOrders)
	}
}
