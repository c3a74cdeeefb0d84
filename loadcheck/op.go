package loadcheck

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/tracecar/tracecar/loadcheck/client"
)

// newOp builds worker w's operation of wl on session s, through the one client the
// session gives the worker. Its statements are prepared and its values made once: per
// operation, the key and column bytes (or a profile's values, in an arena) change in
// place, so that the loop allocates nothing beyond what the client does itself. With a
// trace context, each request carries a fresh traceparent, rewritten in place.
func newOp(ctx context.Context, s session, w int, wl *workload) Op {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
	tp := newTraceparent(wl.traceContext)
	c := s.Client(w, tp)
	if wl.profile != nil {
		return newProfileOp(ctx, c, rng, tp, wl)
	}
	key := make([]byte, keyLen)
	cols := make([][]byte, colCount)
	wvals := [][]byte{key, nil, nil, nil, nil, nil}
	for i := range cols {
		cols[i] = make([]byte, colLen)
		wvals[i+1] = cols[i]
	}
	rvals := [][]byte{key}
	var ins, sel int
	var prepErr error
	if wl.writeFrac > 0 {
		ins, prepErr = c.Prepare(ctx, client.Stmt{Text: cqlInsert})
	}
	if wl.writeFrac < 1 && prepErr == nil {
		sel, prepErr = c.Prepare(ctx, client.Stmt{Text: cqlSelect})
	}
	pop := &wl.pop
	writeFrac := wl.writeFrac
	return func(ctx context.Context) (int, error) {
		if prepErr != nil {
			return 0, prepErr
		}
		putKey(key, pop.next(rng))
		if tp != nil {
			fillTraceparent(rng, tp)
		}
		if writeFrac >= 1 || writeFrac > 0 && rng.Float64() < writeFrac {
			fillValues(rng, cols)
			return 1, c.Write(ctx, ins, wvals)
		}
		n, err := c.Query(ctx, sel, rvals)
		return int(n), err
	}
}

// newProfileOp builds a worker's operation of a profile on client c: each operation runs
// the next of the mix, a query on a partition of the population or an insert, and counts
// its latency, rows and partitions by operation.
func newProfileOp(ctx context.Context, c client.Client, rng *rand.Rand, tp []byte, wl *workload) Op {
	p := wl.profile
	pw := &profileWorker{c: c, p: p, rng: rng, g: newGen(), pop: &wl.pop, btype: byte(p.batchType())}
	pw.g.useArena() // an op's values are encoded into its request before the next op
	stats := wl.stats
	next := newMixer(p, stats)
	stmts := make([]int, len(p.mix))
	errs := make([]error, len(p.mix))
	for i, o := range p.mix {
		spec := client.Stmt{Text: p.insertStmt}
		if q := o.query; q != nil {
			spec = client.Stmt{Text: q.cql, CL: q.cl, Serial: q.serialCL, Paged: true}
		}
		stmts[i], errs[i] = c.Prepare(ctx, spec)
	}
	return func(ctx context.Context) (int, error) {
		best := next()
		if errs[best] != nil {
			return 0, errs[best]
		}
		if tp != nil {
			fillTraceparent(rng, tp)
		}
		start := time.Now()
		pw.g.reset()
		var rows, parts int64
		var err error
		if q := p.mix[best].query; q != nil {
			pw.g.partition(p.t, pw.pop.next(rng), &pw.part)
			rows, err = pw.read(ctx, stmts[best], q)
			parts = min(rows, 1)
		} else {
			rows, parts, err = pw.insert(ctx, stmts[best])
		}
		stats.ops[best].record(time.Since(start), rows, parts, err)
		return int(rows), err
	}
}

// profileWorker is one worker's state for a profile: its client, its generator and
// partition, and the values every op reuses.
type profileWorker struct {
	c     client.Client
	p     *profile
	rng   *rand.Rand
	g     *gen
	pop   *population
	btype byte
	part  ppart
	vals  [][]byte
	pick  []int64
}

// read runs query q on the worker's partition, with the values of one row (of a row each
// for a multi-row query), and returns the rows read.
func (pw *profileWorker) read(ctx context.Context, st int, q *querySpec) (int64, error) {
	row := pw.rng.Int64N(pw.part.rows)
	pw.vals = pw.vals[:0]
	for _, c := range q.binds {
		if q.multirow {
			row = pw.rng.Int64N(pw.part.rows)
		}
		pw.vals = append(pw.vals, pw.g.colValue(pw.p.t, c, &pw.part, row))
	}
	return pw.c.Query(ctx, st, pw.vals)
}

// insert writes the rows the profile picks in the partitions of one batch: a single row
// as its statement alone, several in a batch of the profile's type.
func (pw *profileWorker) insert(ctx context.Context, st int) (rows, parts int64, err error) {
	p := pw.p
	n := max(p.insert.partitions.Sample(pw.rng, -1), 1)
	pw.vals = pw.vals[:0]
	for range n {
		pw.g.partition(p.t, pw.pop.next(pw.rng), &pw.part)
		pw.pick = p.pickRows(&pw.part, pw.rng, pw.pick[:0])
		for _, i := range pw.pick {
			for _, c := range p.insertCols {
				pw.vals = append(pw.vals, pw.g.colValue(p.t, c, &pw.part, i))
			}
			rows++
		}
		parts++
	}
	if rows == 1 {
		return rows, parts, pw.c.Write(ctx, st, pw.vals)
	}
	return rows, parts, pw.c.Batch(ctx, pw.btype, st, pw.vals, len(p.insertCols), p.insert.condition != "")
}
