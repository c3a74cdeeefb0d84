package ci_test

import (
	"strings"
	"testing"
)

// loadcheckRooms are the load checker's packages, from the ground up: the statistics
// (samples, t-tests, adjustments), the distributions of cassandra-stress's profiles, the
// values of CQL types made from seeds, its own CQL connection (the replay's and the wire
// client's), the two CQL clients behind one interface (gocql and the wire client), and
// loadcheck itself (the workloads, the runs, the verdicts and the reports). Each imports
// only rooms listed before it.
var loadcheckRooms = []string{"stats", "dist", "values", "cqlconn", "client", "."}

// TestLoadcheckRoomsPointDown: each package of the load checker imports only the packages
// listed below it in loadcheckRooms, never one above, and every package under loadcheck/
// is listed, so that a new one takes its place in the order.
func TestLoadcheckRoomsPointDown(t *testing.T) {
	rank := make(map[string]int)
	for i, r := range loadcheckRooms {
		rank[loadcheckPath(r)] = i
	}
	seen := 0
	for _, p := range listPackages(t) {
		r, ok := rank[p.ImportPath]
		if !ok {
			if strings.HasPrefix(p.ImportPath, loadcheckPath(".")+"/") {
				t.Errorf("%s is not in loadcheckRooms: give it its place among %v", p.ImportPath, loadcheckRooms)
			}
			continue
		}
		seen++
		for _, imp := range p.Imports {
			if ri, ok := rank[imp]; ok && ri >= r {
				t.Errorf("%s imports %s: loadcheck's rooms point down, %v from the ground up", p.ImportPath, imp, loadcheckRooms)
			}
		}
	}
	if seen != len(loadcheckRooms) {
		t.Fatalf("found %d of loadcheck's %d packages %v", seen, len(loadcheckRooms), loadcheckRooms)
	}
}

func loadcheckPath(room string) string {
	if room == "." {
		return module + "loadcheck"
	}
	return module + "loadcheck/" + room
}
