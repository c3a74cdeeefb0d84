package loadcheck

import (
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gocql/gocql"
	"github.com/tracecar/tracecar/loadcheck/dist"
	"github.com/tracecar/tracecar/loadcheck/values"
	"go.yaml.in/yaml/v3"
)

// A cassandra-stress user profile (its StressYaml): the keyspace and table to create, the
// distributions of each column's values, how an insert writes, and named queries. Every key
// of the format is read; an unknown key or one this reader does not support is a usage
// error naming the key and its line, never ignored.

// The defaults of cassandra-stress for a column without a columnspec entry, or an entry
// without the key.
const (
	defaultColumnSize       = "uniform(4..8)"
	defaultColumnPopulation = "uniform(1..100b)"
	defaultColumnCluster    = "fixed(1)"
	defaultInsertPartitions = "fixed(1)"
	defaultInsertSelect     = "fixed(1)/1"
)

// Batch types of an insert.
const (
	batchLogged   = "LOGGED"
	batchUnlogged = "UNLOGGED"
	batchCounter  = "COUNTER"
)

// profile is a parsed user profile. After load, only its table (set when the schema is
// read from the node) changes; it is then read-only and shared by every worker.
type profile struct {
	path               string
	specName           string
	keyspace           string
	keyspaceDefinition string
	table              string
	tableDefinition    string
	extraDefinitions   []string
	columns            map[string]*columnSpec // by column name
	insert             insertSpec
	queries            []*querySpec
	// mix is the --ops weights, in the order given.
	mix []opWeight
	// lines are the lines of the top-level keys.
	lines map[string]int
	// t is the table as the node describes it, filled in by the schema step, with the
	// insert's statements and the columns they bind.
	t                       *ptable
	insertStmt, plainInsert string
	insertCols, plainCols   []*pcol
}

// columnSpec is a columnspec entry, with cassandra-stress's defaults for the keys it
// does not set.
type columnSpec struct {
	name                      string
	line                      int
	size, population, cluster *dist.Dist
}

type insertSpec struct {
	line       int
	partitions *dist.Dist
	selectR    dist.Ratio
	batchType  string // "" when not set: LOGGED for a regular table, COUNTER for counters
	condition  string // the IF clause of an LWT insert, without IF
}

type querySpec struct {
	name     string
	line     int
	cql      string
	multirow bool // fields: multirow (cassandra-stress's default) or samerow
	cl       string
	serialCL string
	// binds are the column each ? binds, filled in when the table is known.
	binds []*pcol
}

// opWeight is one operation of the --ops mix: insert or a query's name.
type opWeight struct {
	name   string
	weight float64
	query  *querySpec // nil for insert
}

// profileError is a usage error at a line of a profile.
func profileError(path string, line int, format string, args ...any) error {
	return usageErrorf("--profile %s:%d: %s", path, line, fmt.Sprintf(format, args...))
}

var profileKeys = []string{"specname", "keyspace", "keyspace_definition", "table", "table_definition",
	"extra_definitions", "columnspec", "insert", "queries"}

// loadProfile reads and checks the profile at path.
func loadProfile(path string) (*profile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--profile %s: %v", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, usageErrorf("--profile %s: %v", path, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, profileError(path, max(doc.Line, 1), "want a mapping of %s", strings.Join(profileKeys, ", "))
	}
	p := &profile{path: path, columns: map[string]*columnSpec{}, lines: map[string]int{}}
	seen := map[string]bool{}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := strings.ToLower(k.Value)
		if seen[key] {
			return nil, profileError(path, k.Line, "key %q is given twice", k.Value)
		}
		seen[key] = true
		p.lines[key] = k.Line
		if err := p.readKey(key, k, v); err != nil {
			return nil, err
		}
	}
	if p.insert.partitions == nil {
		if err := p.readInsert(&yaml.Node{Kind: yaml.MappingNode, Line: root.Line}); err != nil {
			return nil, err
		}
	}
	switch {
	case p.keyspace == "":
		return nil, profileError(path, root.Line, "the key keyspace is required")
	case p.table == "":
		return nil, profileError(path, root.Line, "the key table is required")
	}
	return p, nil
}

func (p *profile) readKey(key string, k, v *yaml.Node) error {
	str := func(dst *string) error {
		if v.Kind != yaml.ScalarNode {
			return profileError(p.path, v.Line, "%s: want a string", k.Value)
		}
		*dst = strings.TrimSpace(v.Value)
		return nil
	}
	switch key {
	case "specname":
		return str(&p.specName)
	case "keyspace":
		return str(&p.keyspace)
	case "keyspace_definition":
		return str(&p.keyspaceDefinition)
	case "table":
		return str(&p.table)
	case "table_definition":
		return str(&p.tableDefinition)
	case "extra_definitions":
		if v.Kind == yaml.ScalarNode {
			p.extraDefinitions = append(p.extraDefinitions, v.Value)
			return nil
		}
		if v.Kind != yaml.SequenceNode {
			return profileError(p.path, v.Line, "extra_definitions: want a list of CQL statements")
		}
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return profileError(p.path, e.Line, "extra_definitions: want a list of CQL statements")
			}
			p.extraDefinitions = append(p.extraDefinitions, e.Value)
		}
		return nil
	case "columnspec":
		return p.readColumnSpec(v)
	case "insert":
		return p.readInsert(v)
	case "queries":
		return p.readQueries(v)
	case "token_range_queries":
		return profileError(p.path, k.Line, "key %q is not supported by tracecar's loadcheck (cassandra-stress's token-range scans); remove it", k.Value)
	}
	return profileError(p.path, k.Line, "unknown key %q; want %s", k.Value, strings.Join(profileKeys, ", "))
}

// mapping walks a YAML mapping of scalars, calling f for each key in lower case.
func (p *profile) mapping(section string, v *yaml.Node, f func(key string, k, val *yaml.Node) error) error {
	if v.Kind != yaml.MappingNode {
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return nil
		}
		return profileError(p.path, v.Line, "%s: want a mapping", section)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		key := strings.ToLower(k.Value)
		if seen[key] {
			return profileError(p.path, k.Line, "%s: key %q is given twice", section, k.Value)
		}
		seen[key] = true
		if err := f(key, k, val); err != nil {
			return err
		}
	}
	return nil
}

func scalar(p *profile, section string, k, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", profileError(p.path, v.Line, "%s %s: want a single value", section, k.Value)
	}
	return strings.TrimSpace(v.Value), nil
}

func (p *profile) readColumnSpec(v *yaml.Node) error {
	if v.Kind != yaml.SequenceNode {
		return profileError(p.path, v.Line, "columnspec: want a list of entries with name, size, population and cluster")
	}
	for _, e := range v.Content {
		c := &columnSpec{line: e.Line}
		var size, pop, cluster string
		err := p.mapping("columnspec", e, func(key string, k, val *yaml.Node) error {
			s, err := scalar(p, "columnspec", k, val)
			if err != nil {
				return err
			}
			switch key {
			case "name":
				c.name = s
			case "size":
				size = s
			case "population":
				pop = s
			case "cluster":
				cluster = s
			default:
				return profileError(p.path, k.Line, "columnspec: unknown key %q; want name, size, population or cluster", k.Value)
			}
			if key != "name" {
				if _, err := dist.Parse(s); err != nil {
					return profileError(p.path, val.Line, "columnspec %s: %v", key, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if c.name == "" {
			return profileError(p.path, e.Line, "columnspec: an entry without a name")
		}
		if _, dup := p.columns[c.name]; dup {
			return profileError(p.path, e.Line, "columnspec: column %q is given twice", c.name)
		}
		c.size = mustDist(size, defaultColumnSize)
		c.population = mustDist(pop, defaultColumnPopulation)
		c.cluster = mustDist(cluster, defaultColumnCluster)
		p.columns[c.name] = c
	}
	return nil
}

// mustDist parses s (already checked), or def when s is empty.
func mustDist(s, def string) *dist.Dist {
	if s == "" {
		s = def
	}
	d, err := dist.Parse(s)
	if err != nil {
		panic(err)
	}
	return d
}

func (p *profile) readInsert(v *yaml.Node) error {
	in := insertSpec{line: v.Line}
	parts, sel := defaultInsertPartitions, defaultInsertSelect
	err := p.mapping("insert", v, func(key string, k, val *yaml.Node) error {
		s, err := scalar(p, "insert", k, val)
		if err != nil {
			return err
		}
		switch key {
		case "partitions":
			if _, err := dist.Parse(s); err != nil {
				return profileError(p.path, val.Line, "insert partitions: %v", err)
			}
			parts = s
		case "select":
			if _, err := dist.ParseRatio(s); err != nil {
				return profileError(p.path, val.Line, "insert select: %v", err)
			}
			sel = s
		case "batchtype":
			in.batchType = strings.ToUpper(s)
			if !slices.Contains([]string{batchLogged, batchUnlogged, batchCounter}, in.batchType) {
				return profileError(p.path, val.Line, "insert batchtype %q: want LOGGED, UNLOGGED or COUNTER", s)
			}
		case "condition":
			in.condition = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s, "IF "), "if "))
			if in.condition == "" {
				return profileError(p.path, val.Line, "insert condition: empty")
			}
		case "row-population", "visits", "revisit":
			return profileError(p.path, k.Line, "insert key %q is not supported by tracecar's loadcheck; remove it", k.Value)
		default:
			return profileError(p.path, k.Line, "insert: unknown key %q; want partitions, select, batchtype or condition", k.Value)
		}
		return nil
	})
	if err != nil {
		return err
	}
	in.partitions = mustDist(parts, "")
	in.selectR, _ = dist.ParseRatio(sel)
	if in.partitions.Min < 1 {
		return profileError(p.path, v.Line, "insert partitions %s: want at least 1 partition", in.partitions)
	}
	p.insert = in
	return nil
}

func (p *profile) readQueries(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return profileError(p.path, v.Line, "queries: want a mapping of names to cql, fields, consistencyLevel and serialConsistencyLevel")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, body := v.Content[i], v.Content[i+1]
		q := &querySpec{name: strings.ToLower(strings.TrimSpace(k.Value)), line: k.Line, multirow: true}
		if q.name == "insert" {
			return profileError(p.path, k.Line, "queries: the name insert is the profile's insert operation; name the query otherwise")
		}
		for _, o := range p.queries {
			if o.name == q.name {
				return profileError(p.path, k.Line, "queries: %q is given twice", k.Value)
			}
		}
		err := p.mapping("query "+q.name, body, func(key string, kn, val *yaml.Node) error {
			s, err := scalar(p, "query "+q.name, kn, val)
			if err != nil {
				return err
			}
			switch key {
			case "cql":
				q.cql = s
			case "fields":
				switch strings.ToLower(s) {
				case "samerow":
					q.multirow = false
				case "multirow":
					q.multirow = true
				default:
					return profileError(p.path, val.Line, "query %s fields %q: want samerow or multirow", q.name, s)
				}
			case "consistencylevel":
				q.cl = strings.ToUpper(s)
				if _, err := parseCL(q.cl); err != nil {
					return profileError(p.path, val.Line, "query %s consistencyLevel %q: want ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM or LOCAL_ONE", q.name, s)
				}
			case "serialconsistencylevel":
				q.serialCL = strings.ToUpper(s)
				if q.serialCL != "SERIAL" && q.serialCL != "LOCAL_SERIAL" {
					return profileError(p.path, val.Line, "query %s serialConsistencyLevel %q: want SERIAL or LOCAL_SERIAL", q.name, s)
				}
			default:
				return profileError(p.path, kn.Line, "query %s: unknown key %q; want cql, fields, consistencyLevel or serialConsistencyLevel", q.name, kn.Value)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if q.cql == "" {
			return profileError(p.path, k.Line, "query %s: the key cql is required", q.name)
		}
		p.queries = append(p.queries, q)
	}
	return nil
}

// query returns the query named name, or nil.
func (p *profile) query(name string) *querySpec {
	for _, q := range p.queries {
		if q.name == name {
			return q
		}
	}
	return nil
}

// parseMix parses --ops: NAME=W,... or ops(NAME=W,...), names being insert or the
// profile's queries, as cassandra-stress's ops(...) (case-insensitive). Empty means
// insert=1.
func (p *profile) parseMix(s string) error {
	in := strings.TrimSpace(s)
	if in == "" {
		in = "insert=1"
	}
	if r, ok := strings.CutPrefix(strings.ToLower(in), "ops("); ok {
		if in, ok = strings.CutSuffix(in[len(in)-len(r):], ")"); !ok {
			return usageErrorf("--ops %q: unbalanced parenthesis", s)
		}
	}
	names := []string{"insert"}
	for _, q := range p.queries {
		names = append(names, q.name)
	}
	p.mix = nil
	total := 0.0
	for _, part := range strings.Split(in, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		name := strings.ToLower(strings.TrimSpace(k))
		w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || !(w >= 0) || w > 1e12 {
			return usageErrorf("--ops %q: want NAME=WEIGHT,... with non-negative weights, NAME one of %s", s, strings.Join(names, ", "))
		}
		if !slices.Contains(names, name) {
			return usageErrorf("--ops %q: %q is not an operation of profile %s; its operations are %s", s, k, p.path, strings.Join(names, ", "))
		}
		for _, o := range p.mix {
			if o.name == name {
				return usageErrorf("--ops %q: %s is given twice", s, name)
			}
		}
		p.mix = append(p.mix, opWeight{name: name, weight: w, query: p.query(name)})
		total += w
	}
	if !(total > 0) {
		return usageErrorf("--ops %q: the weights add up to zero", s)
	}
	return nil
}

// mixString renders the mix as cassandra-stress's ops(...).
func (p *profile) mixString() string {
	parts := make([]string, len(p.mix))
	for i, o := range p.mix {
		parts[i] = o.name + "=" + strconv.FormatFloat(o.weight, 'g', -1, 64)
	}
	return "ops(" + strings.Join(parts, ",") + ")"
}

// reads reports whether the mix has a query, which needs the partitions preloaded.
func (p *profile) reads() bool {
	for _, o := range p.mix {
		if o.query != nil && o.weight > 0 {
			return true
		}
	}
	return false
}

func parseCL(s string) (gocql.Consistency, error) { return gocql.ParseConsistencyWrapper(s) }

// pcol is a column of the profile's table, as the node describes it.
type pcol struct {
	name    string
	typ     string // as system_schema.columns spells it
	kind    string // partition_key, clustering, regular or static
	pos     int
	desc    bool
	spec    *columnSpec
	salt    uint64
	counter bool
	// text is set for a text, varchar, ascii or blob column, made straight from the source;
	// fixed is the length of a fixed-size type's value (0 for the others): the random bytes
	// its value needs.
	text, blob bool
	fixed      int
}

// ptable is the profile's table: its key columns in order, then the others.
type ptable struct {
	pk, ck, regular []*pcol
	byName          map[string]*pcol
	counter         bool
}

func (t *ptable) all() []*pcol {
	out := append(append(append([]*pcol(nil), t.pk...), t.ck...), t.regular...)
	return out
}

func newPcol(name, typ, kind string, pos int, desc bool, spec *columnSpec) *pcol {
	h := fnv.New64a()
	h.Write([]byte(name))
	c := &pcol{name: name, typ: typ, kind: kind, pos: pos, desc: desc, spec: spec,
		salt: h.Sum64(), counter: typ == "counter"}
	switch typ {
	case "text", "varchar", "ascii", "blob":
		c.text, c.blob = true, typ == "blob"
	}
	if size, _ := values.Size(typ); size > 0 && typ != "time" {
		c.fixed = size
	}
	return c
}
