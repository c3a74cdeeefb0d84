package node_test

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/sidecar"
)

// suiteAuth is the login of the nodes that run a suite whose name starts with "auth": the
// node's superuser, as cassandra/cassandra is Cassandra's.
const suiteAuth = "cassandra:cassandra"

// TestStatementsDrivers runs every statement suite in testdata/statements with gocql and
// with the Python driver, each against a node of its own, directly and through a sidecar,
// and checks each statement's outcome: its result rows (and [applied]), or its error's code
// and message, as Cassandra 4.1 gives them.
func TestStatementsDrivers(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	files, err := filepath.Glob("testdata/statements/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no suites: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		suite := drivertest.Load(t, file)
		for _, via := range []string{"direct", "sidecar"} {
			for _, drv := range []string{"gocql", "python"} {
				t.Run(name+"/"+drv+"/"+via, func(t *testing.T) {
					cfg := node.Config{}
					if strings.HasPrefix(name, "auth") {
						cfg.Auth = suiteAuth
					}
					_, ap := mustServe(t, cfg)
					if via == "sidecar" {
						ap = mustSidecar(t, ap)
					}
					o := options(ap, "none")
					if cfg.Auth != "" {
						o.User, o.Pass, _ = strings.Cut(cfg.Auth, ":")
					}
					var got []string
					if drv == "gocql" {
						got = drivertest.RunGocqlCases(t, o, suite)
					} else {
						got = drivertest.RunPythonCases(t, o, file)
					}
					if len(got) != len(suite.Cases) {
						t.Fatalf("got %d outcomes for %d cases", len(got), len(suite.Cases))
					}
					for i, c := range suite.Cases {
						if !c.Accepts(got[i]) {
							t.Errorf("case %d %q: %s\n got  %s\n want %s", i, c.Name, c.Query, got[i], strings.Join(append([]string{c.Want}, c.OrWant...), "\n   or "))
						}
					}
				})
			}
		}
	}
}

// mustSidecar starts a sidecar in front of the node at nodeAddr until the test ends, and
// returns its address.
func mustSidecar(tb testing.TB, nodeAddr netip.AddrPort) netip.AddrPort {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := sidecar.New(sidecar.Config{NodeAddr: nodeAddr.String(), DrainTimeout: time.Second}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("sidecar Serve: %v", err)
		}
	})
	return netip.MustParseAddrPort(ln.Addr().String())
}

// TestDriverMetadata checks that the drivers' metadata APIs show every kind of schema
// object the node has: user types, tables, indexes, a materialized view, functions and
// aggregates. The Python driver creates them and reports its
// cluster.metadata.keyspaces[k] (testdata/metadata_python.json); gocql's KeyspaceMetadata
// reads the same objects.
func TestDriverMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	want, err := os.ReadFile("testdata/metadata_python.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, via := range []string{"direct", "sidecar"} {
		t.Run(via, func(t *testing.T) {
			_, ap := mustServe(t, node.Config{})
			if via == "sidecar" {
				ap = mustSidecar(t, ap)
			}
			o := options(ap, "none")
			o.Keyspace = "meta"
			got := bytes.TrimSpace(drivertest.PythonMetadata(t, o))
			if !bytes.Equal(got, bytes.TrimSpace(want)) {
				t.Errorf("the Python driver's metadata:\n got  %s\n want %s", got, bytes.TrimSpace(want))
			}
			s, err := drivertest.Cluster(o).CreateSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			km, err := s.KeyspaceMetadata("meta")
			if err != nil {
				t.Fatalf("gocql KeyspaceMetadata: %v", err)
			}
			var ut []string
			if u := km.UserTypes["address"]; u != nil {
				for i, f := range u.FieldNames {
					ut = append(ut, f+" "+u.FieldTypes[i].Type().String())
				}
			}
			if got := strings.Join(ut, ", "); got != "street text, zip int, city text" {
				t.Errorf("gocql UserTypes[address]: %q; want street text, zip int, city text", got)
			}
			tbl := km.Tables["u"]
			if tbl == nil || len(tbl.Columns) != 4 || tbl.Columns["n"] == nil || tbl.Columns["v"] == nil || tbl.Columns["a"] == nil || tbl.Columns["a"].Validator != "frozen<address>" {
				t.Errorf("gocql Tables[u]: %+v; want columns k, a (frozen<address>), n and v", tbl)
			}
			f := km.Functions["acc"]
			if f == nil || strings.Join(f.ArgumentNames, ",") != "s,v" || f.ReturnType.Type() != gocql.TypeInt || f.Body != "return s + v;" || !f.CalledOnNullInput || f.Language != "java" {
				t.Errorf("gocql Functions[acc]: %+v", f)
			}
			a := km.Aggregates["total"]
			if a == nil || a.StateFunc.Name != "acc" || a.FinalFunc.Name != "fin" || a.InitCond != "0" || a.ReturnType.Type() != gocql.TypeBigInt || a.StateType.Type() != gocql.TypeInt {
				t.Errorf("gocql Aggregates[total]: %+v", a)
			}
			mv := km.MaterializedViews["by_v"]
			if len(km.MaterializedViews) != 1 || mv == nil || mv.BaseTable != tbl || mv.IncludeAllColumns || mv.Comment != "u by v" ||
				mv.GcGraceSeconds != 864000 || mv.Id == (gocql.UUID{}) || mv.BaseTableId == (gocql.UUID{}) {
				t.Errorf("gocql MaterializedViews: %+v; want by_v, of u, comment 'u by v'", km.MaterializedViews)
			}
		})
	}
}
