package ci_test

import (
	"go/ast"
	"path/filepath"
	"strings"
	"testing"
)

// nodeDir is the embedded node's folder, from this package's.
const nodeDir = "../../node"

// nodeRooms are the embedded node's packages, from the ground up: the grammar (CQL text to
// statements), the values (their encoding, comparison and JSON), the storage (the schema's
// definitions, tables, partitions, views' maintenance), the roles and permissions (auth),
// the engine (statements compiled and executed, DDL, system keyspaces) and the node itself
// (the wire: server, connections, segments, shards, clusters). Each imports only rooms
// listed before it.
var nodeRooms = []string{"grammar", "cqlvalue", "storage", "auth", "engine", "."}

// maxPackageLines is the most lines of product code (tests aside) a package of the node may
// hold: over it, the package does several things, which should be packages of their own.
const maxPackageLines = 8000

// TestNodeRoomsPointDown: each package of the node imports only the packages listed below
// it in nodeRooms, never one above: the grammar knows no value, the values no table, the
// storage no statement, the engine no connection.
func TestNodeRoomsPointDown(t *testing.T) {
	rank := make(map[string]int)
	for i, r := range nodeRooms {
		rank[nodePath(r)] = i
	}
	seen := 0
	for _, p := range listPackages(t) {
		r, ok := rank[p.ImportPath]
		if !ok {
			continue
		}
		seen++
		for _, imp := range p.Imports {
			if ri, ok := rank[imp]; ok && ri >= r {
				t.Errorf("%s imports %s: the node's rooms point down, %v from the ground up", p.ImportPath, imp, nodeRooms)
			}
		}
	}
	if seen != len(nodeRooms) {
		t.Fatalf("found %d of the node's %d packages %v", seen, len(nodeRooms), nodeRooms)
	}
}

// nodeFilesInCycles are the files of the node's packages that still point at each other
// through a cycle, by package: to be untangled (a declaration moved down, or the code that
// needs it up), and then taken off the list, which only shrinks. It is empty: no file
// graph of the node has a cycle.
var nodeFilesInCycles = map[string][]string{}

// TestNodeFilesPointDown: within each package of the node, the files form layers, as
// TestSidecarFilesPointDown checks for the proxy: no file points back up at a file that
// points at it, directly or through others, but those listed in nodeFilesInCycles.
func TestNodeFilesPointDown(t *testing.T) {
	for _, r := range nodeRooms {
		fset, files, pkg, info := typeCheck(t, filepath.Join(nodeDir, r), nodePath(r))
		graph := fileGraph(fset, files, pkg, info)
		if len(files) > 2 && len(graph) == 0 {
			t.Fatalf("no file of %s points at another: the graph is not being read", pkg.Path())
		}
		allowed := make(map[string]bool)
		for _, f := range nodeFilesInCycles[r] {
			allowed[f] = true
		}
		inCycle := make(map[string]bool)
		for _, scc := range stronglyConnected(graph) {
			if len(scc) < 2 {
				continue
			}
			for _, f := range scc {
				inCycle[f] = true
				if !allowed[f] {
					t.Errorf("%d files of %s point at each other, around the cycle\n\t%s\n%s is not in nodeFilesInCycles: move the declaration it needs down, or the code that needs it up",
						len(scc), pkg.Path(), strings.Join(cycleIn(graph, scc), "\n\t"), f)
					break
				}
			}
		}
		for _, f := range nodeFilesInCycles[r] {
			if !inCycle[f] {
				t.Errorf("%s of %s is in nodeFilesInCycles but in no cycle: take it off the list", f, pkg.Path())
			}
		}
	}
}

// TestNodePackagesAreSmall: no package of the node holds more than maxPackageLines lines of
// product code, and no type more than maxMethods methods (the parser had 63: its
// statements' parsers are types of their own).
func TestNodePackagesAreSmall(t *testing.T) {
	for _, r := range nodeRooms {
		dir := filepath.Join(nodeDir, r)
		fset, files := parseDir(t, dir)
		lines := 0
		methods := make(map[string]int)
		for _, f := range files {
			lines += fset.Position(f.End()).Line
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && receiver(fd) != "" {
					methods[receiver(fd)]++
				}
			}
		}
		if lines > maxPackageLines {
			t.Errorf("%s: %d lines of product code; want at most %d", nodePath(r), lines, maxPackageLines)
		}
		for typ, n := range methods {
			if n > maxMethods {
				t.Errorf("%s.%s has %d methods; want at most %d (split it by concern)", nodePath(r), typ, n, maxMethods)
			}
		}
	}
}

func nodePath(room string) string {
	if room == "." {
		return module + "internal/node"
	}
	return module + "internal/node/" + room
}
