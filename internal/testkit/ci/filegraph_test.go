package ci_test

import (
	"strings"
	"testing"
)

// filesInCycles are the files of the module's product packages that still point at each
// other through a cycle, by package (the import path below the module): to be untangled (a
// declaration moved down, or the code that needs it up), and then taken off the list, which
// only shrinks. A package not listed has a file graph without a cycle. The embedded node's
// packages keep their own list (nodeFilesInCycles in node_test.go), and the test helpers
// (internal/testkit/...) none.
var filesInCycles = map[string][]string{}

// TestFilesPointDown: within each product package of the module, the files form layers, as
// TestSidecarFilesPointDown checks for the proxy: a file points at another when it names
// one of its package-level declarations, and no file points back up at a file that points
// at it, directly or through others, but those listed in filesInCycles. The node's
// packages are TestNodeFilesPointDown's.
func TestFilesPointDown(t *testing.T) {
	var pkgs []goPackage
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if rel == "internal/node" || strings.HasPrefix(rel, "internal/node/") || strings.HasPrefix(rel, "internal/testkit/") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("found %d product packages: the list is not being read", len(pkgs))
	}
	exports := exportData(t, module+"...")
	read := 0
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		fset, files, pkg, info := typeCheckWith(t, exports, p.Dir, p.ImportPath)
		graph := fileGraph(fset, files, pkg, info)
		if len(graph) > 0 {
			read++
		}
		allowed := make(map[string]bool)
		for _, f := range filesInCycles[rel] {
			allowed[f] = true
		}
		inCycle := make(map[string]bool)
		for _, scc := range stronglyConnected(graph) {
			if len(scc) < 2 {
				continue
			}
			for _, f := range scc {
				inCycle[f] = true
			}
			for _, f := range scc {
				if !allowed[f] {
					t.Errorf("%d files of %s point at each other, around the cycle\n\t%s\n%s is not in filesInCycles: move the declaration it needs down, or the code that needs it up",
						len(scc), rel, strings.Join(cycleIn(graph, scc), "\n\t"), f)
					break
				}
			}
		}
		for _, f := range filesInCycles[rel] {
			if !inCycle[f] {
				t.Errorf("%s of %s is in filesInCycles but in no cycle: take it off the list", f, rel)
			}
		}
	}
	if read < 10 {
		t.Fatalf("only %d packages have files that point at others: the graph is not being read", read)
	}
	for rel := range filesInCycles {
		if !contains(packageNames(pkgs), rel) {
			t.Errorf("filesInCycles lists %s, which is not a product package outside the node: take it off the list", rel)
		}
	}
}

// packageNames returns the import paths of pkgs below the module.
func packageNames(pkgs []goPackage) []string {
	var names []string
	for _, p := range pkgs {
		names = append(names, strings.TrimPrefix(p.ImportPath, module))
	}
	return names
}
