package engine

import (
	"bytes"
	"encoding/binary"
	"sort"
	"strconv"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// A SELECT's execution: its plan's keys and filters bound, the partitions read (given ones,
// or a scan of the token range) page by page, the rows filtered, grouped and aggregated, and
// the result built.

// filterVals are a rowFilter's evaluated operands.
type filterVals struct {
	f    *rowFilter
	v    []byte
	k    []byte // the map key of m[k] = v
	list [][]byte
}

// pageState is the decoded paging state: where the previous page stopped.
type pageState struct {
	remaining int64 // -1: no limit
	pk        []byte
	ck        [][]byte
	partDone  bool // the whole partition was returned
	partCount int64
}

func encodePageState(ps *pageState) []byte {
	b := []byte{1}
	b = binary.AppendVarint(b, ps.remaining)
	b = binary.AppendUvarint(b, uint64(len(ps.pk)))
	b = append(b, ps.pk...)
	if ps.partDone {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendVarint(b, ps.partCount)
	b = binary.AppendUvarint(b, uint64(len(ps.ck)))
	for _, v := range ps.ck {
		if v == nil {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(v))+1)
		b = append(b, v...)
	}
	return b
}

func decodePageState(b []byte) (*pageState, bool) {
	if len(b) < 1 || b[0] != 1 {
		return nil, false
	}
	b = b[1:]
	ps := &pageState{}
	var n int
	ps.remaining, n = binary.Varint(b)
	if n <= 0 {
		return nil, false
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, false
	}
	ps.pk = b[n : n+int(l)]
	b = b[n+int(l):]
	if len(b) < 1 {
		return nil, false
	}
	ps.partDone = b[0] == 1
	b = b[1:]
	ps.partCount, n = binary.Varint(b)
	if n <= 0 {
		return nil, false
	}
	b = b[n:]
	cnt, n := binary.Uvarint(b)
	if n <= 0 || cnt > uint64(len(b)) {
		return nil, false
	}
	b = b[n:]
	for i := uint64(0); i < cnt; i++ {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n)+1 {
			return nil, false
		}
		b = b[n:]
		if l == 0 {
			ps.ck = append(ps.ck, nil)
			continue
		}
		ps.ck = append(ps.ck, b[:l-1])
		b = b[l-1:]
	}
	return ps, len(b) == 0
}

// selectRun is the state of one SELECT execution.
type selectRun struct {
	p        *selectPlan
	x        *execCtx
	now      int64
	cfs      []*storage.CkFilter
	filters  []filterVals
	rows     [][][]byte
	cks      [][][]byte // clustering key of each row, for multi-partition ORDER BY
	onePK    [1][]byte
	want     int   // stop once this many rows are collected (-1: no bound)
	pageSize int64 // -1: no paging
	count    int64
	partLim  int64

	// Aggregation (selectPlan.grouped).
	g          groupState
	wantGroups int       // stop before the group after this many (-1: no bound)
	stop       bool      // the page or the limit is full
	groupEnd   pageState // the position of the current group's last row

	// position of the last collected row
	lastPK   []byte
	lastCK   [][]byte
	lastDone bool
	partN    int64
	// positions at the page boundary
	pagePK   []byte
	pageCK   [][]byte
	pageDone bool
	pageN    int64
}

func (p *selectPlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	t := p.t
	if t.Dropped.Load() {
		return nil, invalidf("unconfigured table %s", t.Name)
	}
	r := &selectRun{p: p, x: x, now: x.seconds(), want: -1, partLim: -1}
	limit, err := p.limits(x, r)
	if err != nil {
		return nil, err
	}
	pageSize, state, err := p.paging(x)
	if err != nil {
		return nil, err
	}
	if state != nil {
		limit = state.remaining
		if limit == 0 {
			return p.result(x, nil, nil), nil
		}
	}
	if p.distinct {
		r.partLim = 1
	}
	if r.cfs, err = ckFilters(t, p.ckEq, p.ckRange, x, p.reverse); err != nil {
		return nil, err
	}
	if err := r.bindFilters(); err != nil {
		return nil, err
	}
	r.setWants(limit, pageSize)
	multiSort := false
	if p.pk != nil {
		if multiSort, err = r.readKeys(state, limit); err != nil {
			return nil, err
		}
	} else {
		r.readScan(state)
	}
	if x.tr != nil {
		x.tr.Event("Read " + strconv.Itoa(len(r.rows)) + " live rows")
	}
	switch {
	case p.grouped:
		return r.groupedResult(limit), nil
	case multiSort:
		return r.sortedResult()
	}
	rows := r.rows
	var paging []byte
	if pageSize > 0 && int64(len(rows)) > pageSize {
		rows = rows[:pageSize]
		rem := int64(-1)
		if limit >= 0 {
			rem = limit - pageSize
		}
		paging = encodePageState(&pageState{remaining: rem, pk: r.pagePK, ck: r.pageCK, partDone: r.pageDone, partCount: r.pageN})
	}
	return p.result(x, rows, paging), nil
}

// limits binds the LIMIT (returned, -1 for none) and PER PARTITION LIMIT (into r) of the
// execution x.
func (p *selectPlan) limits(x *execCtx, r *selectRun) (int64, error) {
	limit := int64(-1)
	if p.limit != nil {
		b, err := boundValue(p.limit, "[limit]", x)
		if err != nil {
			return 0, err
		}
		v, ok := cqlvalue.Int32Value(b)
		if !ok || v <= 0 {
			return 0, invalidf("LIMIT must be strictly positive")
		}
		limit = int64(v)
	}
	if p.partLim != nil {
		b, err := boundValue(p.partLim, "[per_partition_limit]", x)
		if err != nil {
			return 0, err
		}
		v, ok := cqlvalue.Int32Value(b)
		if !ok || v <= 0 {
			return 0, invalidf("PER PARTITION LIMIT must be strictly positive")
		}
		r.partLim = int64(v)
	}
	return limit, nil
}

// paging returns the page size the execution x asks for (-1 for none) and the state of the
// page it resumes from, if any.
func (p *selectPlan) paging(x *execCtx) (int64, *pageState, error) {
	pageSize := int64(-1)
	paged := !p.aggregate || p.groupBy // an aggregate without GROUP BY is one row, never paged
	if x.p != nil && x.p.Flags&cql.QueryPageSize != 0 && x.p.PageSize > 0 && paged {
		pageSize = int64(x.p.PageSize)
	}
	if x.p != nil && x.p.Flags&cql.QueryPagingState != 0 && len(x.p.PagingState) > 0 && paged {
		state, ok := decodePageState(x.p.PagingState)
		if !ok {
			return 0, nil, &cql.Error{Code: cql.ErrCodeProtocol, Message: "Invalid value for the paging state"}
		}
		return pageSize, state, nil
	}
	return pageSize, nil, nil
}

// bindFilters binds the values of the plan's filters (ALLOW FILTERING and indexed
// restrictions) into r.filters.
func (r *selectRun) bindFilters() error {
	p, x := r.p, r.x
	for i := range p.filters {
		f := &p.filters[i]
		fv := filterVals{f: f}
		switch {
		case f.in != nil:
			b, err := boundValue(f.in, f.col.Name, x)
			if err != nil {
				return err
			}
			fv.list, _ = cqlvalue.DecCollection(b, 1)
		case f.op == grammar.OpIn:
			for _, v := range f.vals {
				b, err := boundValue(v, f.col.Name, x)
				if err != nil {
					return err
				}
				fv.list = append(fv.list, b)
			}
		default:
			if f.val == nil {
				return invalidf("Unsupported restriction on %s", f.col.Name)
			}
			b, err := boundValue(f.val, f.col.Name, x)
			if err != nil {
				return err
			}
			fv.v = b
			if f.key != nil {
				if fv.k, err = boundValue(f.key, f.col.Name, x); err != nil {
					return err
				}
			}
		}
		r.filters = append(r.filters, fv)
	}
	return nil
}

// setWants sets how many rows, or groups, the run collects for the limit and page size.
func (r *selectRun) setWants(limit, pageSize int64) {
	// The number of rows to collect: a page plus one to learn whether there are more.
	bound := limit
	if pageSize > 0 && (bound < 0 || pageSize < bound) {
		bound = pageSize + 1
	}
	r.want = int(bound)
	r.wantGroups = -1
	if r.p.grouped {
		// Groups, not rows, fill pages and limits; an aggregate without GROUP BY reads
		// everything, whatever its LIMIT.
		r.want = -1
		if r.p.groupBy {
			r.wantGroups = int(limit)
			if pageSize > 0 && (limit < 0 || pageSize < limit) {
				r.wantGroups = int(pageSize)
			}
		}
	}
	r.pageSize = pageSize
}

// readKeys reads the partitions the plan's partition key restricts, from the one the page
// state resumes at; multiSort tells whether the rows of several partitions are to be sorted
// by ORDER BY.
func (r *selectRun) readKeys(state *pageState, limit int64) (multiSort bool, err error) {
	p, x, t := r.p, r.x, r.p.t
	pks, err := p.partitionKeys(x, &r.onePK)
	if err != nil {
		return false, err
	}
	multiSort = p.ordered && len(pks) > 1 && !p.grouped
	if x.tr != nil {
		if len(pks) == 1 {
			x.tr.Event("Executing single-partition query on " + t.Name)
		} else {
			x.tr.Event("Executing query on " + strconv.Itoa(len(pks)) + " partitions of " + t.Name)
		}
	}
	if multiSort {
		r.want = int(limit)
	}
	start := 0
	if state != nil {
		start = len(pks)
		for i, pk := range pks {
			if bytes.Equal(pk, state.pk) {
				start = i
				break
			}
		}
	}
	d := t.Load(x.s.node())
	for i := start; i < len(pks) && !r.full(); i++ {
		var st *pageState
		if state != nil && i == start {
			st = state
		}
		r.readPartitionKey(d, pks[i], st)
	}
	return multiSort, nil
}

// readScan reads every partition of the table in token order (within the plan's token
// range), from the one the page state resumes at.
func (r *selectRun) readScan(state *pageState) {
	p, x, t := r.p, r.x, r.p.t
	if x.tr != nil {
		x.tr.Event("Scanning the partitions of " + t.Name)
	}
	parts := t.Load(x.s.node()).Scan()
	start := 0
	if state != nil {
		tok := storage.Murmur3Token(state.pk)
		start = sort.Search(len(parts), func(i int) bool {
			return storage.ComparePartitions(parts[i], &storage.Partition{Token: tok, Key: state.pk}) >= 0
		})
	}
	d := t.Load(x.s.node())
	for i := start; i < len(parts) && !r.full(); i++ {
		pt := parts[i]
		if p.token != nil && !r.tokenMatches(pt.Token) {
			continue
		}
		var st *pageState
		if state != nil && bytes.Equal(pt.Key, state.pk) {
			st = state
		}
		r.readPartitionKey(d, pt.Key, st)
	}
}

// groupedResult is the result of an aggregate or GROUP BY query: its groups, paged.
func (r *selectRun) groupedResult(limit int64) cql.Message {
	p, x, pageSize := r.p, r.x, r.pageSize
	if r.g.started {
		r.finishGroup()
	}
	if !p.groupBy {
		if len(r.rows) == 0 {
			return p.result(x, [][][]byte{r.emptyAggregate()}, nil)
		}
		return p.result(x, r.rows[:1], nil)
	}
	var paging []byte
	if r.stop && pageSize > 0 && (limit < 0 || pageSize < limit) {
		rem := int64(-1)
		if limit >= 0 {
			rem = limit - int64(len(r.rows))
		}
		paging = encodePageState(&pageState{remaining: rem, pk: r.pagePK, ck: r.pageCK, partDone: r.pageDone, partCount: r.pageN})
	}
	return p.result(x, r.rows, paging)
}

// sortedResult is the result of an ORDER BY query over several partitions: their rows
// sorted by clustering, unpaged.
func (r *selectRun) sortedResult() (cql.Message, error) {
	p, rows := r.p, r.rows
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		c := storage.CompareCK(p.t, r.cks[idx[a]], r.cks[idx[b]])
		if p.reverse {
			return c > 0
		}
		return c < 0
	})
	sorted := make([][][]byte, len(rows))
	for i, j := range idx {
		sorted[i] = rows[j]
	}
	if r.pageSize > 0 && int64(len(sorted)) > r.pageSize {
		return nil, invalidf("Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query")
	}
	return p.result(r.x, sorted, nil), nil
}

func (r *selectRun) full() bool { return r.stop || r.want >= 0 && len(r.rows) >= r.want }

func (r *selectRun) tokenMatches(tok int64) bool {
	tr := r.p.token
	if tr.lo != nil {
		b, _, _ := tr.lo.eval(r.x)
		v, ok := cqlvalue.Int64Value(b)
		if ok && (tok < v || tok == v && !tr.loIncl) {
			return false
		}
	}
	if tr.hi != nil {
		b, _, _ := tr.hi.eval(r.x)
		v, ok := cqlvalue.Int64Value(b)
		if ok && (tok > v || tok == v && !tr.hiIncl) {
			return false
		}
	}
	return true
}

func (p *selectPlan) partitionKeys(x *execCtx, one *[1][]byte) ([][]byte, error) {
	if len(p.pk) == 1 && p.pk[0].eq != nil {
		b, err := boundValue(p.pk[0].eq, p.pk[0].col.Name, x)
		if err != nil {
			return nil, err
		}
		one[0] = b
		return one[:], nil
	}
	combos, err := product(p.pk, x)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(combos))
	for i, c := range combos {
		out[i] = storage.EncodePK(c)
	}
	return out, nil
}

func (p *selectPlan) result(x *execCtx, rows [][][]byte, paging []byte) cql.Message {
	md := cql.RowsMetadata{Columns: p.specs, ColumnCount: len(p.specs), PagingState: paging}
	if paging != nil {
		md.Flags |= cql.RowsHasMorePages
	}
	switch {
	case x.checkResult && !bytes.Equal(x.resultID, p.resultID):
		// The client's metadata is not the statement's any more (v5): it gets the new one
		// whether or not it asked to skip it.
		md.Flags |= cql.RowsMetadataChanged
		md.NewMetadataID = p.resultID
	case x.p != nil && x.p.Flags&cql.QuerySkipMetadata != 0:
		md.Flags |= cql.RowsNoMetadata
		md.Columns = nil
	}
	if rows == nil {
		rows = [][][]byte{}
	}
	if p.jsonSpecs != nil {
		for i, row := range rows {
			rows[i] = [][]byte{cqlvalue.RowJSON(p.jsonSpecs, row)}
		}
	}
	return cql.RowsResult{Metadata: md, Rows: rows}
}

// readPartitionKey reads one partition under its shard's read lock.
func (r *selectRun) readPartitionKey(d *storage.TableData, pk []byte, st *pageState) {
	sh := d.Shard(storage.Murmur3Token(pk))
	sh.Mu.RLock()
	defer sh.Mu.RUnlock()
	part := sh.Get(pk)
	if part == nil {
		return
	}
	r.readPartition(part, st)
}

func (r *selectRun) readPartition(part *storage.Partition, st *pageState) {
	p := r.p
	t := p.t
	if st != nil && st.partDone {
		return
	}
	var pkVals [][]byte
	if len(t.Pk) == 1 {
		pkVals = [][]byte{part.Key}
	} else {
		var ok bool
		if pkVals, ok = storage.DecodePK(part.Key, len(t.Pk)); !ok {
			return
		}
	}
	r.lastPK, r.partN = part.Key, 0
	if st != nil {
		r.partN = st.partCount
	}
	emitted := false
	emit := func(row *storage.Row) bool {
		if !p.grouped && r.partLim >= 0 && r.partN >= r.partLim {
			return false
		}
		if !r.matches(pkVals, part, row) {
			return true
		}
		emitted = true
		if p.grouped {
			return r.addGrouped(pkVals, part, row)
		}
		r.add(pkVals, part, row)
		return !r.full()
	}
	var after [][]byte
	hasAfter := false
	if st != nil {
		after, hasAfter = st.ck, true
	}
	if len(t.Ck) == 0 {
		if !hasAfter && len(part.Rows) > 0 && part.Rows[0].Live(r.now) {
			emit(part.Rows[0])
		}
		return
	}
	if p.distinct {
		if !hasAfter && (r.anyLiveRow(part) || part.Static != nil && part.Static.Live(r.now)) {
			emit(nil)
		}
		return
	}
	if r.cfs == nil {
		r.iterate(part, 0, len(part.Rows), nil, after, hasAfter, emit)
	} else {
		for _, f := range r.cfs {
			lo, hi := 0, len(part.Rows)
			if len(f.Eq) > 0 {
				lo = sort.Search(len(part.Rows), func(i int) bool { return storage.CompareCK(t, part.Rows[i].Ck, f.Eq) >= 0 })
				hi = lo
				for hi < len(part.Rows) && prefixEqual(t, part.Rows[hi].Ck, f.Eq) {
					hi++
				}
			}
			if !r.iterate(part, lo, hi, f, after, hasAfter, emit) || r.full() {
				break
			}
		}
	}
	// A partition with only static data shows as one row with null clustering columns.
	if !emitted && !hasAfter && !p.hasCKRes && t.HasStatic() && part.Static != nil && part.Static.Live(r.now) && !r.anyLiveRow(part) {
		emit(nil)
	}
}

func (r *selectRun) anyLiveRow(part *storage.Partition) bool {
	for _, row := range part.Rows {
		if row.Live(r.now) {
			return true
		}
	}
	return false
}

func prefixEqual(t *storage.Table, ck, prefix [][]byte) bool {
	if len(ck) < len(prefix) {
		return false
	}
	for i, v := range prefix {
		if cqlvalue.CompareValues(t.Ck[i].Typ, ck[i], v) != 0 {
			return false
		}
	}
	return true
}

// iterate visits rows[lo:hi] in query order, after the paging position.
func (r *selectRun) iterate(part *storage.Partition, lo, hi int, f *storage.CkFilter, after [][]byte, hasAfter bool, emit func(*storage.Row) bool) bool {
	t := r.p.t
	rows := part.Rows
	if r.p.reverse {
		for i := hi - 1; i >= lo; i-- {
			row := rows[i]
			if hasAfter && storage.CompareCK(t, row.Ck, after) >= 0 {
				continue
			}
			if f != nil && !f.Matches(t, row.Ck) || !row.Live(r.now) {
				continue
			}
			if !emit(row) {
				return false
			}
		}
		return true
	}
	if hasAfter {
		s := sort.Search(hi-lo, func(i int) bool { return storage.CompareCK(t, rows[lo+i].Ck, after) > 0 })
		lo += s
	}
	for i := lo; i < hi; i++ {
		row := rows[i]
		if f != nil && !f.Matches(t, row.Ck) || !row.Live(r.now) {
			continue
		}
		if !emit(row) {
			return false
		}
	}
	return true
}

// value returns a column's visible value in a row.
func (r *selectRun) value(col *storage.Column, pkVals [][]byte, part *storage.Partition, row *storage.Row) []byte {
	return storage.CellValue(col, pkVals, part, row, r.now)
}

func (r *selectRun) matches(pkVals [][]byte, part *storage.Partition, row *storage.Row) bool {
	for i := range r.filters {
		fv := &r.filters[i]
		v := r.value(fv.f.col, pkVals, part, row)
		typ := fv.f.col.Typ
		switch fv.f.op {
		case grammar.OpEq:
			if v == nil || cqlvalue.CompareValues(typ, v, fv.v) != 0 {
				return false
			}
		case grammar.OpNe:
			if v != nil && cqlvalue.CompareValues(typ, v, fv.v) == 0 {
				return false
			}
		case grammar.OpLt, grammar.OpLe, grammar.OpGt, grammar.OpGe:
			if v == nil {
				return false
			}
			c := cqlvalue.CompareValues(typ, v, fv.v)
			if fv.f.op == grammar.OpLt && c >= 0 || fv.f.op == grammar.OpLe && c > 0 || fv.f.op == grammar.OpGt && c <= 0 || fv.f.op == grammar.OpGe && c < 0 {
				return false
			}
		case grammar.OpIn:
			found := false
			for _, w := range fv.list {
				if v != nil && cqlvalue.CompareValues(typ, v, w) == 0 {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		case grammar.OpMapEq:
			elems, _ := cqlvalue.DecCollection(v, 2)
			found := false
			for j := 0; j+1 < len(elems); j += 2 {
				if cqlvalue.CompareValues(cqlvalue.KeyType(typ), elems[j], fv.k) == 0 {
					found = cqlvalue.CompareValues(cqlvalue.ElemType(typ), elems[j+1], fv.v) == 0
					break
				}
			}
			if !found {
				return false
			}
		case grammar.OpContains, grammar.OpContainsKey:
			per := cqlvalue.ElemsPerEntry(typ)
			elems, _ := cqlvalue.DecCollection(v, per)
			et := cqlvalue.ElemType(typ)
			off := 0
			if typ.ID == cql.TypeMap {
				if fv.f.op == grammar.OpContainsKey {
					et = cqlvalue.KeyType(typ)
				} else {
					off = 1
				}
			}
			found := false
			for j := off; j < len(elems); j += per {
				if cqlvalue.CompareValues(et, elems[j], fv.v) == 0 {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// add appends one output row (or counts it).
func (r *selectRun) add(pkVals [][]byte, part *storage.Partition, row *storage.Row) {
	p := r.p
	t := p.t
	r.partN++
	out := r.build(pkVals, part, row)
	r.rows = append(r.rows, out)
	if p.ordered && len(p.pk) > 0 {
		if row != nil {
			r.cks = append(r.cks, row.Ck)
		} else {
			r.cks = append(r.cks, nil)
		}
	}
	if row != nil {
		r.lastCK, r.lastDone = row.Ck, len(t.Ck) == 0
	} else {
		r.lastCK, r.lastDone = nil, true
	}
	// The page ends at row pageSize; remember where that is.
	if int64(len(r.rows)) == r.pageSize {
		r.pagePK, r.pageCK, r.pageDone, r.pageN = r.lastPK, r.lastCK, r.lastDone || p.distinct, r.partN
	}
}

func (r *selectRun) build(pkVals [][]byte, part *storage.Partition, row *storage.Row) [][]byte {
	t := r.p.t
	out := make([][]byte, len(r.p.out))
	for i := range r.p.out {
		o := &r.p.out[i]
		// The columns of SELECT * and plain selectors, inline: the read path's hot loop.
		switch {
		case o.src == srcCell && !o.derived:
			out[i] = r.value(t.Cells[o.idx], pkVals, part, row)
		case o.src == srcPK && !o.derived:
			out[i] = pkVals[o.idx]
		default:
			out[i] = r.outValue(o, pkVals, part, row)
		}
	}
	return out
}

// outValue computes one selector of a row.
func (r *selectRun) outValue(o *outCol, pkVals [][]byte, part *storage.Partition, row *storage.Row) []byte {
	t := r.p.t
	var v []byte
	switch o.src {
	case srcPK:
		v = pkVals[o.idx]
	case srcCK:
		if row != nil {
			v = row.Ck[o.idx]
		}
	case srcCell:
		v = r.value(t.Cells[o.idx], pkVals, part, row)
	case srcWritetime, srcTTL:
		c := r.cellOf(t.Cells[o.idx], part, row)
		switch {
		case c == nil || !c.Live(r.now):
		case o.src == srcWritetime:
			v = cqlvalue.EncBigint(c.Ts)
		case c.Exp > 0:
			v = cqlvalue.EncInt(int32(c.Exp - r.now))
		}
	case srcToken:
		v = cqlvalue.EncBigint(part.Token)
	case srcFunc:
		v, _, _ = o.fn.eval(r.x)
	}
	if o.conv != "" {
		v, _ = cqlvalue.ApplyConv(o.conv, o.argType, o.convRet, v)
	}
	if o.path != nil {
		v = fieldOf(v, o.path)
	}
	if o.toJSON {
		v = []byte(cqlvalue.ToJSON(o.argType, v))
	}
	if o.casts != nil {
		v = applyCasts(o.casts, v)
	}
	return v
}

// fieldOf selects a field, through nested user types, of a user type value.
func fieldOf(b []byte, path []int) []byte {
	for _, f := range path {
		if b == nil {
			return nil
		}
		elems, ok := cqlvalue.DecTuple(b)
		if !ok || f >= len(elems) {
			return nil
		}
		b = elems[f]
	}
	return b
}

func (r *selectRun) cellOf(col *storage.Column, part *storage.Partition, row *storage.Row) *storage.Cell {
	if col.Kind == storage.KindStatic {
		if part.Static == nil {
			return nil
		}
		return part.Static.Cell(col.Pos)
	}
	if row == nil {
		return nil
	}
	return row.Cell(col.Pos)
}

// node is the index of the node the session is connected to, 0 without a session.
func (s *Session) node() int {
	if s == nil {
		return 0
	}
	return s.Node
}

// groupState is the group being aggregated.
type groupState struct {
	started bool
	pk      []byte
	ck      [][]byte // the clustering prefix that defines the group
	first   [][]byte // the first row's values, for the plain selectors
	accs    []acc
}

// sameGroup reports whether a row of partition pk with clustering ck belongs to the group.
func (r *selectRun) sameGroup(pk []byte, ck [][]byte) bool {
	g := &r.g
	if !g.started {
		return false
	}
	if r.p.groupCK < 0 {
		return true
	}
	if string(g.pk) != string(pk) {
		return false
	}
	for i := 0; i < r.p.groupCK; i++ {
		var v []byte
		if i < len(ck) {
			v = ck[i]
		}
		var w []byte
		if i < len(g.ck) {
			w = g.ck[i]
		}
		if cqlvalue.CompareValues(r.p.t.Ck[i].Typ, v, w) != 0 || (v == nil) != (w == nil) {
			return false
		}
	}
	return true
}

// addGrouped feeds one row to its group, finishing the previous group when a new one
// begins. It returns false to stop reading the partition: the page or the limit is full
// (r.stop is then set), or the partition has given its PER PARTITION LIMIT of groups.
func (r *selectRun) addGrouped(pkVals [][]byte, part *storage.Partition, row *storage.Row) bool {
	p := r.p
	var ck [][]byte
	if row != nil {
		ck = row.Ck
	}
	if !r.sameGroup(part.Key, ck) {
		if r.g.started {
			r.finishGroup()
		}
		if r.partLim >= 0 && r.partN >= r.partLim {
			return false // a group past the partition's limit is no group: it leaves no page
		}
		if r.wantGroups >= 0 && len(r.rows) >= r.wantGroups {
			r.stop = true
			return false
		}
		r.partN++
		r.g = groupState{started: true, pk: part.Key, first: r.build(pkVals, part, row), accs: make([]acc, len(p.out))}
		if p.groupCK > 0 && ck != nil {
			r.g.ck = ck[:min(p.groupCK, len(ck))]
		}
		for i, o := range p.out {
			r.g.accs[i] = acc{kind: o.agg, typ: o.argType}
		}
	}
	for i := range p.out {
		o := &p.out[i]
		if o.agg == aggNone {
			continue
		}
		var v []byte
		if o.agg != aggCountRows {
			v = r.outValue(o, pkVals, part, row)
		}
		r.g.accs[i].add(v)
	}
	// Where the group's last row is: the page state, should the page end with it.
	at := &r.groupEnd
	at.pk, at.partCount = part.Key, r.partN
	if row != nil {
		at.ck, at.partDone = row.Ck, len(p.t.Ck) == 0
	} else {
		at.ck, at.partDone = nil, true
	}
	return true
}

// finishGroup appends the group's result row.
func (r *selectRun) finishGroup() {
	out := make([][]byte, len(r.p.out))
	for i, o := range r.p.out {
		if o.agg == aggNone {
			if r.g.first != nil {
				out[i] = r.g.first[i]
			}
			continue
		}
		out[i] = applyCasts(o.post, r.g.accs[i].result())
	}
	r.rows = append(r.rows, out)
	at := &r.groupEnd
	r.pagePK, r.pageCK, r.pageDone, r.pageN = at.pk, at.ck, at.partDone, at.partCount
	r.g.started = false
}

// emptyAggregate is the one row of an aggregate over no rows: count 0, no min or max.
func (r *selectRun) emptyAggregate() [][]byte {
	out := make([][]byte, len(r.p.out))
	for i, o := range r.p.out {
		if o.agg != aggNone {
			a := acc{kind: o.agg, typ: o.argType}
			out[i] = applyCasts(o.post, a.result())
		}
	}
	return out
}
