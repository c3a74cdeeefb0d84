package loadcheck

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mustProfileFile writes a profile into a temporary folder and returns its path.
func mustProfileFile(tb testing.TB, text string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

const goodProfile = `keyspace: ks
keyspace_definition: |
  CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}
table: t
table_definition: CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))
extra_definitions:
  - CREATE INDEX ON t (v)
columnspec:
  - name: c
    cluster: fixed(10)
  - name: v
    size: uniform(1..8)
    population: ~exp(1..1k)
insert:
  partitions: fixed(2)
  select: uniform(1..10)/10
  batchtype: unlogged
queries:
  Read1:
    cql: SELECT * FROM t WHERE k = ?
    fields: samerow
    consistencyLevel: quorum
    serialConsistencyLevel: local_serial
`

func TestLoadProfile(t *testing.T) {
	p, err := loadProfile(mustProfileFile(t, goodProfile))
	if err != nil {
		t.Fatal(err)
	}
	if p.keyspace != "ks" || p.table != "t" || len(p.extraDefinitions) != 1 || p.insert.batchType != batchUnlogged ||
		p.insert.partitions.Min != 2 || p.insert.selectR.String() != "uniform(1..10)/10" {
		t.Errorf("profile = %+v", p)
	}
	c := p.columns["c"]
	if c.cluster.Min != 10 || c.size.String() != defaultColumnSize || c.population.String() != defaultColumnPopulation {
		t.Errorf("columnspec c = %+v; want cluster fixed(10) and the defaults", c)
	}
	q := p.query("read1")
	if q == nil || q.multirow || q.cl != "QUORUM" || q.serialCL != "LOCAL_SERIAL" {
		t.Fatalf("query read1 = %+v", q)
	}
	for _, mix := range []string{"insert=1,read1=9", "ops(insert=1,READ1=9)", " ops( insert = 1 , read1 = 9 ) "} {
		if err := p.parseMix(mix); err != nil {
			t.Fatalf("parseMix(%q): %v", mix, err)
		}
		if p.mixString() != "ops(insert=1,read1=9)" {
			t.Errorf("parseMix(%q) = %s", mix, p.mixString())
		}
	}
}

// TestLoadProfileErrors: bad input is a usage error naming the key and the file line.
func TestLoadProfileErrors(t *testing.T) {
	tests := []struct {
		name, text string
		line       int
		want       string
	}{
		{"unknown key", "keyspace: ks\ntable: t\ncolumnspecs:\n  - name: a\n", 3, `unknown key "columnspecs"`},
		{"unknown columnspec key", "keyspace: ks\ntable: t\ncolumnspec:\n  - name: a\n    sizes: fixed(1)\n", 5, `columnspec: unknown key "sizes"`},
		{"malformed distribution", "keyspace: ks\ntable: t\ncolumnspec:\n  - name: a\n    size: uniform(1..)\n", 5, `uniform(1..)`},
		{"unknown distribution", "keyspace: ks\ntable: t\ncolumnspec:\n  - name: a\n    population: zipf(1..10)\n", 5, `unknown name "zipf"`},
		{"unknown insert key", "keyspace: ks\ntable: t\ninsert:\n  partitions: fixed(1)\n  batch: LOGGED\n", 5, `insert: unknown key "batch"`},
		{"bad batchtype", "keyspace: ks\ntable: t\ninsert:\n  batchtype: SOMETIMES\n", 4, `batchtype "SOMETIMES"`},
		{"bad select", "keyspace: ks\ntable: t\ninsert:\n  select: uniform(1..10)\n", 4, `DIST/DIVISOR`},
		{"unsupported insert key", "keyspace: ks\ntable: t\ninsert:\n  row-population: fixed(1)/1\n", 4, `not supported`},
		{"unknown query key", "keyspace: ks\ntable: t\nqueries:\n  q:\n    cql: SELECT * FROM t\n    field: samerow\n", 6, `unknown key "field"`},
		{"bad fields", "keyspace: ks\ntable: t\nqueries:\n  q:\n    cql: SELECT * FROM t\n    fields: somerows\n", 6, `fields "somerows"`},
		{"bad consistency", "keyspace: ks\ntable: t\nqueries:\n  q:\n    cql: SELECT 1\n    consistencyLevel: MOST\n", 6, `consistencyLevel "MOST"`},
		{"query without cql", "keyspace: ks\ntable: t\nqueries:\n  q:\n    fields: samerow\n", 4, `cql is required`},
		{"token range queries", "keyspace: ks\ntable: t\ntoken_range_queries:\n  a: {}\n", 3, `not supported`},
		{"no table", "keyspace: ks\n", 1, `table is required`},
		{"twice", "keyspace: ks\ntable: t\nkeyspace: ks2\n", 3, `given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := mustProfileFile(t, tt.text)
			_, err := loadProfile(path)
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			if !errors.Is(err, ErrUsage) {
				t.Errorf("error %v is not a usage error", err)
			}
			loc := path + ":" + strconv.Itoa(tt.line) + ":"
			if !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want %q and %q", err, loc, tt.want)
			}
		})
	}
}

func TestParseMixErrors(t *testing.T) {
	p, err := loadProfile(mustProfileFile(t, goodProfile))
	if err != nil {
		t.Fatal(err)
	}
	for mix, want := range map[string]string{
		"insert=1,read2=9":  `"read2" is not an operation of profile`,
		"ops(insert=1":      "unbalanced parenthesis",
		"insert=0":          "add up to zero",
		"insert=-1":         "non-negative weights",
		"insert=1,insert=2": "given twice",
		"insert=1;read1=2":  "NAME=WEIGHT",
	} {
		err := p.parseMix(mix)
		if err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("parseMix(%q) = %v; want a usage error with %q", mix, err, want)
		}
	}
}

func TestBindColumns(t *testing.T) {
	tests := []struct {
		cql  string
		want []string
		err  string
	}{
		{"SELECT * FROM t WHERE k = ? AND c >= ?", []string{"k", "c"}, ""},
		{`SELECT * FROM t WHERE "Key" = ? AND c<?`, []string{"Key", "c"}, ""},
		{"UPDATE t SET n = n + ? WHERE k = ?", []string{"n", "k"}, ""},
		{"SELECT * FROM t WHERE tags CONTAINS ? ALLOW FILTERING", []string{"tags"}, ""},
		{"SELECT * FROM t WHERE k = '?' AND c = ?", []string{"c"}, ""},
		{"SELECT * FROM t WHERE k = ? LIMIT ?", nil, "cannot be bound"},
		{"SELECT * FROM t WHERE k IN ?", nil, "cannot be bound"},
		{"SELECT * FROM t WHERE k = :k", nil, "named marker"},
	}
	for _, tt := range tests {
		got, err := bindColumns(tt.cql)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("bindColumns(%q) = %v, %v; want an error with %q", tt.cql, got, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("bindColumns(%q) = %v, %v; want %v", tt.cql, got, err, tt.want)
		}
	}
}

// TestPartitionDeterministic: the same seed gives the same partition, keys and rows, on
// any worker; another seed another key.
func TestPartitionDeterministic(t *testing.T) {
	spec := func(name, cluster string) *columnSpec {
		return &columnSpec{name: name, size: mustDist("", defaultColumnSize), population: mustDist("", defaultColumnPopulation), cluster: mustDist(cluster, defaultColumnCluster)}
	}
	tb := &ptable{
		pk: []*pcol{newPcol("k", "text", "partition_key", 0, false, spec("k", ""))},
		ck: []*pcol{newPcol("c1", "int", "clustering", 0, false, spec("c1", "fixed(3)")), newPcol("c2", "bigint", "clustering", 1, true, spec("c2", "fixed(4)"))},
	}
	var a, b, c ppart
	ga, gb := newGen(), newGen()
	ga.partition(tb, 42, &a)
	gb.partition(tb, 42, &b)
	newGen().partition(tb, 43, &c)
	if a.rows != 12 || string(a.key[0]) != string(b.key[0]) || string(a.key[0]) == string(c.key[0]) {
		t.Fatalf("partitions: rows %d, keys %q %q %q", a.rows, a.key[0], b.key[0], c.key[0])
	}
	seen := map[string]bool{}
	for i := range a.rows {
		k := string(ga.colValue(tb, tb.ck[0], &a, i)) + "/" + string(ga.colValue(tb, tb.ck[1], &a, i))
		if string(gb.colValue(tb, tb.ck[0], &b, i))+"/"+string(gb.colValue(tb, tb.ck[1], &b, i)) != k {
			t.Errorf("row %d differs between two workers", i)
		}
		seen[k] = true
	}
	if len(seen) != 12 {
		t.Errorf("%d distinct rows; want 12", len(seen))
	}
}

// TestMixCycle: one cycle holds each operation as often as its weight, spread out.
func TestMixCycle(t *testing.T) {
	p := &profile{mix: []opWeight{{name: "a", weight: 1}, {name: "b", weight: 1}, {name: "c", weight: 4}}}
	c := p.cycle()
	counts := map[int]int{}
	for _, i := range c {
		counts[i]++
	}
	if len(c) != 6 || counts[0] != 1 || counts[1] != 1 || counts[2] != 4 {
		t.Errorf("cycle %v; want 6 slots, 1, 1 and 4", c)
	}
	p = &profile{mix: []opWeight{{name: "a", weight: 0.5}, {name: "b", weight: 1.5}}}
	c = p.cycle()
	n := 0
	for _, i := range c {
		if i == 0 {
			n++
		}
	}
	if len(c) != 10000 || n != 2500 {
		t.Errorf("a 0.5:1.5 cycle has %d slots, %d of a; want 10000 and 2500", len(c), n)
	}
	stats := newProfileStats(p)
	next := newMixer(p, stats)
	for range 4 {
		next()
	}
	if stats.next.Load() != 4 {
		t.Errorf("the run's slot is %d after 4 operations", stats.next.Load())
	}
}

// TestGenArena: with an arena, a row's values (text, fixed-size and other types) are the
// ones made without it, and making them allocates nothing once the arena has grown; the
// client's CPU per multi-row op depends on it.
func TestGenArena(t *testing.T) {
	spec := func(name, size, cluster string) *columnSpec {
		return &columnSpec{name: name, size: mustDist(size, defaultColumnSize), population: mustDist("", defaultColumnPopulation), cluster: mustDist(cluster, defaultColumnCluster)}
	}
	tb := &ptable{
		pk: []*pcol{newPcol("pk", "bigint", "partition_key", 0, false, spec("pk", "", ""))},
		ck: []*pcol{newPcol("ck", "int", "clustering", 0, false, spec("ck", "", "fixed(10)"))},
		regular: []*pcol{newPcol("v1", "text", "regular", 0, false, spec("v1", "uniform(10..100)", "")),
			newPcol("v2", "double", "regular", 1, false, spec("v2", "", "")), newPcol("id", "timeuuid", "regular", 2, false, spec("id", "", "")),
			newPcol("b", "blob", "regular", 3, false, spec("b", "", ""))},
	}
	cols := tb.all()
	heap, arena := newGen(), newGen()
	arena.useArena()
	var hp, ap ppart
	rowValues := func(g *gen, p *ppart, seed int64) [][]byte {
		g.partition(tb, seed, p)
		var out [][]byte
		for i := range p.rows {
			for _, c := range cols {
				out = append(out, g.colValue(tb, c, p, i))
			}
		}
		return out
	}
	for seed := int64(1); seed <= 5; seed++ {
		arena.reset()
		want, got := rowValues(heap, &hp, seed), rowValues(arena, &ap, seed)
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("seed %d, value %d: %x from the arena; want %x", seed, i, got[i], want[i])
			}
			if c := cols[i%len(cols)]; c.typ == "timeuuid" && (len(got[i]) != 16 || got[i][6]>>4 != 1 || got[i][8]>>6 != 2) {
				t.Fatalf("seed %d: %x is no version 1 UUID", seed, got[i])
			}
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		arena.reset()
		arena.partition(tb, 7, &ap)
		for i := range ap.rows {
			for _, c := range cols {
				arena.colValue(tb, c, &ap, i)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("a partition's values allocate %v times; want 0", allocs)
	}
}
