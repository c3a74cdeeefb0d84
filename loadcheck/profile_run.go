package loadcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/loadcheck/client"
	"github.com/tracecar/tracecar/loadcheck/values"
)

// How a profile drives load, through either client as the built-in workloads do (op.go;
// its schema, table description and preload through gocql): an insert writes the rows its
// select ratio picks of its partitions (one statement, or a batch of the profile's
// batchtype); a query binds its ? from one row of a partition (samerow) or from any of its
// rows (multirow), and reads every page. Each operation counts the rows and the
// partitions it wrote or returned.

// DefaultPageSize is the page size of a profile's queries, the drivers' usual.
const DefaultPageSize = 5000

// preloadBatch is the most statements of one preload batch.
const preloadBatch = 100

// profileSession is what a profile needs of a session beyond the built-in workloads:
// gocql's.
type profileSession interface {
	Gocql() *gocql.Session
}

// isAlreadyExists reports whether the node answered that what a definition creates exists.
func isAlreadyExists(err error) bool {
	var ae *gocql.RequestErrAlreadyExists
	return errors.As(err, &ae)
}

// prepareProfile creates the profile's keyspace, table and extra definitions, reads the
// table from the node, checks the queries, and preloads the partitions reads draw.
func (c *checker) prepareProfile(ctx context.Context) error {
	p := c.wl.profile
	target := c.modes[0].target
	if _, ok := c.env.driver.(wireDriver); ok {
		// The schema, the table's description and the preload go through gocql at v4:
		// only the measured runs need v5.
		setup := *c
		cfg := *c.cfg
		cfg.ProtocolVersion = 0
		setup.cfg, setup.env.driver = &cfg, cqlDriver{}
		if err := setup.prepareProfile(ctx); err != nil {
			return err
		}
		c.cfg.keyspace = cfg.keyspace
		return nil
	}
	if p.keyspaceDefinition != "" {
		s, err := c.env.driver.connect(ctx, c.cfg, target)
		if err != nil {
			return err
		}
		err = c.define(ctx, s, "keyspace_definition", p.keyspaceDefinition)
		s.Close()
		if err != nil {
			return err
		}
	}
	c.cfg.keyspace = p.keyspace
	s, err := c.env.driver.connect(ctx, c.cfg, target)
	if err != nil {
		return fmt.Errorf("profile %s: keyspace %s: %w", p.path, p.keyspace, err)
	}
	defer s.Close()
	if p.tableDefinition != "" {
		if err := c.define(ctx, s, "table_definition", p.tableDefinition); err != nil {
			return err
		}
	}
	for _, d := range p.extraDefinitions {
		if err := c.define(ctx, s, "extra_definitions", d); err != nil {
			return err
		}
	}
	gs, ok := s.(profileSession)
	if !ok {
		return fmt.Errorf("profile: this driver cannot run profiles")
	}
	if err := p.readTable(ctx, gs.Gocql()); err != nil {
		return err
	}
	if err := c.preloadProfile(ctx, s); err != nil {
		return err
	}
	return p.tryQueries(ctx, gs.Gocql(), c.wl.pop.min)
}

// define runs one of the profile's definitions; the node's refusal is a usage error that
// names the key and passes the node's message on, except that what exists already is kept.
func (c *checker) define(ctx context.Context, s session, key, stmt string) error {
	gs, ok := s.(profileSession)
	if !ok {
		return fmt.Errorf("profile: this driver cannot run profiles")
	}
	err := gs.Gocql().Query(stmt).WithContext(ctx).Exec()
	if err == nil || isAlreadyExists(err) {
		return nil
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		return usageErrorf("--profile %s: %s (line %d): the node refused it: %v", c.wl.profile.path, key, c.wl.profile.lines[key], err)
	}
	return fmt.Errorf("profile %s: %s: %w", c.wl.profile.path, key, err)
}

// readTable reads the table's columns from the node and joins them with the columnspec.
func (p *profile) readTable(ctx context.Context, s *gocql.Session) error {
	it := s.Query(`SELECT column_name, kind, position, type, clustering_order FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`,
		p.keyspace, p.table).WithContext(ctx).Iter()
	t := &ptable{byName: map[string]*pcol{}}
	var name, kind, typ, order string
	var pos int
	for it.Scan(&name, &kind, &pos, &typ, &order) {
		spec := p.columns[name]
		if spec == nil {
			spec = &columnSpec{name: name, size: mustDist("", defaultColumnSize),
				population: mustDist("", defaultColumnPopulation), cluster: mustDist("", defaultColumnCluster)}
		}
		col := newPcol(name, typ, kind, pos, strings.EqualFold(order, "desc"), spec)
		if err := values.Check(typ); err != nil {
			return profileError(p.path, max(spec.line, p.lines["table_definition"]), "column %s of type %s: not supported: %v", name, typ, err)
		}
		switch kind {
		case "partition_key":
			t.pk = append(t.pk, col)
		case "clustering":
			t.ck = append(t.ck, col)
		default:
			t.regular = append(t.regular, col)
		}
		t.counter = t.counter || col.counter
		t.byName[name] = col
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("profile %s: read table %s.%s from system_schema: %w", p.path, p.keyspace, p.table, err)
	}
	if len(t.pk) == 0 {
		return profileError(p.path, p.lines["table"], "table %s.%s does not exist on the node: give its table_definition", p.keyspace, p.table)
	}
	sort.Slice(t.pk, func(i, j int) bool { return t.pk[i].pos < t.pk[j].pos })
	sort.Slice(t.ck, func(i, j int) bool { return t.ck[i].pos < t.ck[j].pos })
	sort.Slice(t.regular, func(i, j int) bool { return t.regular[i].name < t.regular[j].name })
	for i, c := range t.pk {
		c.pos = i
	}
	for i, c := range t.ck {
		c.pos = i
	}
	for name, spec := range p.columns {
		if t.byName[name] == nil {
			return profileError(p.path, spec.line, "columnspec name %q: table %s.%s has no such column", name, p.keyspace, p.table)
		}
	}
	// As cassandra-stress, an insert of one statement is sent as that statement: the
	// batch type matters only to an insert that can write several.
	if t.counter && p.insert.batchType != "" && p.insert.batchType != batchCounter && p.insertBatches(t) {
		return profileError(p.path, p.insert.line, "insert batchtype %s: a table of counters takes COUNTER batches, and this insert can write several statements (partitions %s, or several rows per partition), which go in a batch", p.insert.batchType, p.insert.partitions)
	}
	if !t.counter && p.insert.batchType == batchCounter {
		return profileError(p.path, p.insert.line, "insert batchtype COUNTER: table %s.%s has no counter column", p.keyspace, p.table)
	}
	for _, q := range p.queries {
		names, err := bindColumns(q.cql)
		if err != nil {
			return profileError(p.path, q.line, "query %s: %v", q.name, err)
		}
		q.binds = q.binds[:0]
		for _, n := range names {
			col := t.byName[n]
			if col == nil {
				return profileError(p.path, q.line, "query %s: a ? binds column %q, which table %s.%s does not have, so columnspec cannot bind it", q.name, n, p.keyspace, p.table)
			}
			q.binds = append(q.binds, col)
		}
	}
	p.t = t
	return p.buildInsert()
}

// buildInsert makes the insert statements: INSERT of every column, or an UPDATE for
// counters (c = c + ?) and for a condition (… IF condition). The preload writes with the
// plain statement: the insert's without its condition.
func (p *profile) buildInsert() error {
	t := p.t
	var names, marks []string
	for _, c := range t.all() {
		names = append(names, cql.QuoteName(c.name))
		marks = append(marks, "?")
	}
	p.plainInsert = "INSERT INTO " + cql.QuoteName(p.table) + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
	p.plainCols = t.all()
	update, updateCols := p.update()
	if t.counter {
		p.plainInsert, p.plainCols = update, updateCols
	}
	p.insertStmt, p.insertCols = p.plainInsert, p.plainCols
	if p.insert.condition == "" {
		return nil
	}
	if t.counter {
		return profileError(p.path, p.insert.line, "insert condition: a table of counters takes no condition")
	}
	if update != "" {
		p.insertStmt, p.insertCols = update, updateCols
	}
	names, err := bindColumns(p.insert.condition)
	if err != nil {
		return profileError(p.path, p.insert.line, "insert condition: %v", err)
	}
	p.insertStmt += " IF " + p.insert.condition
	p.insertCols = append([]*pcol(nil), p.insertCols...)
	for _, n := range names {
		col := t.byName[n]
		if col == nil {
			return profileError(p.path, p.insert.line, "insert condition: a ? binds column %q, which the table does not have", n)
		}
		p.insertCols = append(p.insertCols, col)
	}
	return nil
}

// update returns UPDATE … SET every regular column (c = c + ? for a counter) WHERE the
// key, and the columns it binds; "" for a table of key columns only.
func (p *profile) update() (string, []*pcol) {
	t := p.t
	if len(t.regular) == 0 {
		return "", nil
	}
	var set, where []string
	var cols []*pcol
	for _, c := range t.regular {
		if c.counter {
			set = append(set, cql.QuoteName(c.name)+" = "+cql.QuoteName(c.name)+" + ?")
		} else {
			set = append(set, cql.QuoteName(c.name)+" = ?")
		}
		cols = append(cols, c)
	}
	for _, c := range append(append([]*pcol(nil), t.pk...), t.ck...) {
		where = append(where, cql.QuoteName(c.name)+" = ?")
		cols = append(cols, c)
	}
	return "UPDATE " + cql.QuoteName(p.table) + " SET " + strings.Join(set, ", ") + " WHERE " + strings.Join(where, " AND "), cols
}

// batchType is the insert's batch type: the profile's, or LOGGED (COUNTER for counters).
func (p *profile) batchType() gocql.BatchType {
	switch {
	case p.t.counter || p.insert.batchType == batchCounter:
		return gocql.CounterBatch
	case p.insert.batchType == batchUnlogged:
		return gocql.UnloggedBatch
	}
	return gocql.LoggedBatch
}

// preloadProfile writes every row of the partitions the reads draw, as many as its plan
// says (preloadPlan): it prints the plan, reports its progress on Config.Stderr, and stops
// with a usage error naming the node's limit and --preload when the node refuses its writes
// for memory.
func (c *checker) preloadProfile(ctx context.Context, s session) error {
	p := c.wl.profile
	if !p.reads() || c.cfg.Preload < 0 {
		return nil
	}
	pl := c.preloadPlan()
	n := pl.partitions
	if n == 0 {
		return nil
	}
	gs := s.(profileSession).Gocql()
	c.out.printf("Preloading %s (seeds %d..%d of --pop %s) through %s ...\n", pl, c.wl.pop.min, c.wl.pop.min+n-1, c.wl.pop, c.modes[0].target)
	if err := pl.check(); err != nil {
		return err
	}
	if n < c.wl.pop.size() {
		c.out.printf("warning: --pop %s has %s partitions, more than the %s preloaded: reads of the others find nothing (their rows show it)\n",
			c.wl.pop, commas(float64(c.wl.pop.size())), commas(float64(n)))
	}
	var next, rows, done atomic.Int64
	started := time.Now()
	stop := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		preloadProgress(c.cfg.Stderr, preloadProgressEvery, pl, &done, &rows, started, stop)
	}()
	ops := make([]Op, c.cfg.Concurrency)
	for w := range ops {
		g := newGen()
		var part ppart
		ops[w] = func(ctx context.Context) (int, error) {
			seed := c.wl.pop.min + next.Add(1) - 1
			g.partition(p.t, seed, &part)
			written, err := p.writeRows(ctx, gs, g, &part, nil, gocql.UnloggedBatch, true, &rows)
			if d := done.Add(1); c.out.progress && d%100 == 0 {
				c.out.status(fmt.Sprintf("preload: %s of %s partitions, %s rows", commas(float64(d)), commas(float64(n)), commas(float64(rows.Load()))))
			}
			return int(written), err
		}
	}
	res := runPhase(ctx, phase{clock: c.env.clock, workers: c.cfg.Concurrency, ops: n}, ops)
	close(stop)
	<-progressDone
	c.out.clearStatus()
	if err := ctx.Err(); err != nil {
		return err
	}
	if res.errs > 0 && overloaded(res.firstErr) {
		limit := "its --memory-limit"
		if pl.limit > 0 {
			limit = "its --memory-limit " + formatBytes(pl.limit)
		}
		return usageErrorf("preload: the node refused %d of %d partitions for memory, having reached %s (%v): give a smaller --preload, or the node a larger --memory-limit",
			res.errs, n, limit, res.firstErr)
	}
	if res.errs > 0 {
		return fmt.Errorf("preload: %d of %d partitions failed, the first with: %w", res.errs, n, res.firstErr)
	}
	el := time.Since(started).Seconds()
	c.out.printf("Preloaded %s partitions, %s rows, about %s, in %.1fs (%s rows/s)\n", commas(float64(res.ops)), commas(float64(rows.Load())),
		formatBytes(int64(float64(res.ops)*pl.partBytes)), el, commas(float64(rows.Load())/el))
	return nil
}

// writeRows writes the rows of part that pick selects (all when nil), in batches of
// typ (of preloadBatch statements at most when plain, for the preload); it returns the
// rows written, and adds each batch's to progress as it is written.
func (p *profile) writeRows(ctx context.Context, s *gocql.Session, g *gen, part *ppart, pick []int64, typ gocql.BatchType, plain bool, progress *atomic.Int64) (int64, error) {
	stmt, cols := p.insertStmt, p.insertCols
	if plain {
		stmt, cols = p.plainInsert, p.plainCols
		if p.t.counter {
			typ = gocql.CounterBatch
		}
	}
	var written int64
	var b *gocql.Batch
	flush := func() error {
		if b == nil || len(b.Entries) == 0 {
			return nil
		}
		err := s.ExecuteBatch(b)
		if err == nil {
			progress.Add(int64(len(b.Entries)))
		}
		b = nil
		return err
	}
	rows := part.rows
	if pick != nil {
		rows = int64(len(pick))
	}
	for k := range rows {
		i := k
		if pick != nil {
			i = pick[k]
		}
		args := make([]any, len(cols))
		for j, c := range cols {
			args[j] = client.Raw(g.colValue(p.t, c, part, i))
		}
		if b == nil {
			b = s.NewBatch(typ).WithContext(ctx)
		}
		b.Query(stmt, args...)
		written++
		if plain && len(b.Entries) >= preloadBatch {
			if err := flush(); err != nil {
				return written, err
			}
		}
	}
	return written, flush()
}

// tryQueries runs each query once, so that one the node refuses is reported before any
// run, with its line.
func (p *profile) tryQueries(ctx context.Context, s *gocql.Session, seed int64) error {
	g := newGen()
	var part ppart
	g.partition(p.t, seed, &part)
	for _, q := range p.queries {
		args := make([]any, len(q.binds))
		for j, c := range q.binds {
			args[j] = client.Raw(g.colValue(p.t, c, &part, 0))
		}
		it := s.Query(q.cql, args...).WithContext(ctx).PageSize(1).Iter()
		if err := it.Close(); err != nil {
			var re gocql.RequestError
			if errors.As(err, &re) {
				return profileError(p.path, q.line, "query %s: the node refused it: %v", q.name, err)
			}
			return fmt.Errorf("profile %s: query %s: %w", p.path, q.name, err)
		}
	}
	return nil
}

// newMixer returns a worker's chooser of the mix's next operation. Every worker of a run
// takes the next slot of one shared cycle, a smooth weighted round robin of the weights
// (the largest current weight runs, then pays the total), so that the mix of the run holds
// to within one cycle, however the operations spread over the workers.
func newMixer(p *profile, stats *profileStats) func() int {
	cycle := p.cycle()
	return func() int { return cycle[(stats.next.Add(1)-1)%int64(len(cycle))] }
}

// cycle returns the order of one cycle of the mix: as many slots as the weights add up to
// when they are whole numbers (up to 10,000), else 10,000.
func (p *profile) cycle() []int {
	total := 0.0
	whole := true
	for _, o := range p.mix {
		total += o.weight
		whole = whole && o.weight == math.Trunc(o.weight)
	}
	n := 10000
	if whole && total <= 10000 {
		n = int(total)
	}
	current := make([]float64, len(p.mix))
	out := make([]int, n)
	for k := range out {
		best := 0
		for i, o := range p.mix {
			current[i] += o.weight
			if current[i] > current[best] {
				best = i
			}
		}
		current[best] -= total
		out[k] = best
	}
	return out
}

// insertBatches reports whether an insert can write several statements, which go in a
// batch of the profile's type: more than one partition, or more than one row in one of t.
func (p *profile) insertBatches(t *ptable) bool {
	if p.insert.partitions != nil && p.insert.partitions.Max > 1 {
		return true
	}
	for _, c := range t.ck {
		if c.spec != nil && c.spec.cluster != nil && c.spec.cluster.Max > 1 {
			return true
		}
	}
	return false
}

// pickRows appends to dst the rows of part that an insert writes: each with the
// probability the select ratio draws, and at least one.
func (p *profile) pickRows(part *ppart, rng *rand.Rand, dst []int64) []int64 {
	ratio := p.insert.selectR.Sample(rng)
	for i := range part.rows {
		if ratio >= 1 || rng.Float64() < ratio {
			dst = append(dst, i)
		}
	}
	if len(dst) == 0 {
		dst = append(dst, rng.Int64N(part.rows))
	}
	return dst
}
