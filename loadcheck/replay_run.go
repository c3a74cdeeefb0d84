package loadcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/cql/cqltext"
	"github.com/tracecar/tracecar/loadcheck/cqlconn"
	"github.com/tracecar/tracecar/loadcheck/values"
)

// maxReplayConnections bounds --replay-connections.
const maxReplayConnections = 64

// connections returns the replay connections per run: --replay-connections, or as many as
// the capture's connections that carried replayed requests.
func (rp *replay) connections(cfg *Config) int {
	if cfg.ReplayConnections > 0 {
		return cfg.ReplayConnections
	}
	return min(max(rp.conns, 1), maxReplayConnections)
}

// prepareReplay creates the capture's schema on the target and writes the rows that its
// reads find. A table the node cannot create stops the replay before anything runs, and
// the keyspaces this replay created are dropped again, so that nothing is left half-made.
func (c *checker) prepareReplay(ctx context.Context) error {
	rp := c.wl.replay
	target := c.modes[0].target
	conn, err := cqlconn.Dial(ctx, c.cfg.connOptions(), target)
	if err != nil {
		return err
	}
	defer conn.Close()
	var created []string
	undo := func() {
		for _, ks := range created {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			conn.Query(dctx, "DROP KEYSPACE IF EXISTS "+quoteName(ks))
			cancel()
		}
	}
	seen := map[string]bool{}
	for _, t := range rp.tables {
		if seen[t.keyspace] {
			continue
		}
		seen[t.keyspace] = true
		exists, err := keyspaceExists(ctx, conn, t.keyspace)
		if err != nil {
			undo()
			return err
		}
		if exists {
			continue
		}
		stmt := "CREATE KEYSPACE " + quoteName(t.keyspace) + " WITH replication = " + replication(rp.c, t.captured.Keyspace)
		if err := conn.Query(ctx, stmt); err != nil {
			undo()
			return fmt.Errorf("the node at %s cannot create keyspace %s for the replay: %w", target, t.keyspace, err)
		}
		created = append(created, t.keyspace)
	}
	for _, t := range rp.tables {
		if err := conn.Query(ctx, t.createTable()); err != nil {
			undo()
			return fmt.Errorf("the node at %s cannot create table %s.%s of the capture (as %s): %w; nothing was replayed",
				target, t.captured.Keyspace, t.captured.Name, t.createTable(), err)
		}
	}
	c.out.printf("Replay of %s: created %d tables on %s\n", rp.path, len(rp.tables), target)
	if err := c.preload(ctx, conn); err != nil {
		undo()
		return err
	}
	return nil
}

func keyspaceExists(ctx context.Context, conn *cqlconn.Conn, ks string) (bool, error) {
	body := cql.Query{Query: "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = '" +
		strings.ReplaceAll(ks, "'", "''") + "'", Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, conn.Version())
	r, err := conn.Do(ctx, cql.OpQuery, body, true)
	if err != nil {
		return false, err
	}
	n, err := cqlconn.Result(r)
	if err != nil {
		return false, fmt.Errorf("replay: read system_schema.keyspaces: %w", err)
	}
	return n > 0, nil
}

// replication returns the captured keyspace's replication as CQL, or SimpleStrategy with
// one replica when the capture does not say.
func replication(c *capturefile.Capture, ks string) string {
	for _, k := range c.Keyspaces {
		if k.Name == ks && len(k.Replication) > 0 {
			keys := make([]string, 0, len(k.Replication))
			for key := range k.Replication {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, key := range keys {
				parts[i] = "'" + strings.ReplaceAll(key, "'", "''") + "': '" + strings.ReplaceAll(k.Replication[key], "'", "''") + "'"
			}
			return "{" + strings.Join(parts, ", ") + "}"
		}
	}
	return "{'class': 'SimpleStrategy', 'replication_factor': '1'}"
}

// preload writes, for every key the capture reads, as many rows as its reads returned.
func (c *checker) preload(ctx context.Context, conn *cqlconn.Conn) error {
	rp := c.wl.replay
	rows := rp.preloadRows()
	if len(rows) == 0 {
		return nil
	}
	c.out.printf("Preloading %s rows for the keys the capture reads ...\n", commas(float64(len(rows))))
	started := time.Now()
	ids, err := rp.prepareInserts(ctx, conn)
	if err != nil {
		return err
	}
	if err := rp.writeRows(ctx, conn, rows, ids, min(c.cfg.Concurrency, 64)); err != nil {
		return err
	}
	c.out.printf("Preloaded %s rows in %.1fs\n", commas(float64(len(rows))), time.Since(started).Seconds())
	return nil
}

// preloadRow is one row the replay's preload writes: its table, key and row index.
type preloadRow struct {
	t   *replayTable
	key int
	i   int
}

// preloadRows lists the rows the capture reads, by table and key in order: as many as
// were seen for each key, one for a table without clustering columns.
func (rp *replay) preloadRows() []preloadRow {
	var rows []preloadRow
	for _, t := range rp.tables {
		keys := make([]int, 0, len(t.rows))
		for k := range t.rows {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		for _, k := range keys {
			n := int(t.rows[k])
			if len(t.ck) == 0 {
				n = min(n, 1)
			}
			for i := range n {
				rows = append(rows, preloadRow{t, k, i})
			}
		}
	}
	return rows
}

// prepareInserts prepares the insert of each table that has rows to preload, on conn.
func (rp *replay) prepareInserts(ctx context.Context, conn *cqlconn.Conn) (map[*replayTable][]byte, error) {
	ids := map[*replayTable][]byte{}
	for _, t := range rp.tables {
		if len(t.rows) == 0 {
			continue
		}
		text := t.insert()
		id, err := conn.Prepare(ctx, text)
		if err != nil {
			return nil, fmt.Errorf("replay preload: prepare %s: %w", text, err)
		}
		ids[t] = id
	}
	return ids, nil
}

// writeRows writes rows through workers goroutines sharing conn; the first failure stops
// them all and is returned.
func (rp *replay) writeRows(ctx context.Context, conn *cqlconn.Conn, rows []preloadRow, ids map[*replayTable][]byte, workers int) error {
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(rows)) || ctx.Err() != nil {
					return
				}
				r := rows[i]
				body := conn.Execute(nil, ids[r.t], cql.QueryParams{Consistency: cql.One, Flags: cql.QueryValues,
					Values: r.t.rowValues(rp, r.key, r.i)})
				resp, err := conn.Do(ctx, cql.OpExecute, body, true)
				if err == nil {
					_, err = cqlconn.Result(resp)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("replay preload into %s.%s: %w", r.t.keyspace, r.t.name, err)
					}
					mu.Unlock()
					next.Store(int64(len(rows)))
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// insert returns the statement that writes one row of t: an INSERT of every column, or
// for a counter table an UPDATE that adds 1 to each counter.
func (t *replayTable) insert() string {
	name := quoteName(t.keyspace) + "." + quoteName(t.name)
	var cols, marks, sets, where []string
	for _, c := range t.captured.Columns {
		switch {
		case c.Type == "counter":
			sets = append(sets, quoteName(c.Name)+" = "+quoteName(c.Name)+" + 1")
		case c.Kind == capturefile.PartitionKey || c.Kind == capturefile.Clustering:
			cols, marks = append(cols, quoteName(c.Name)), append(marks, "?")
			where = append(where, quoteName(c.Name)+" = ?")
		default:
			cols, marks = append(cols, quoteName(c.Name)), append(marks, "?")
		}
	}
	if t.counter {
		return "UPDATE " + name + " SET " + strings.Join(sets, ", ") + " WHERE " + strings.Join(where, " AND ")
	}
	return "INSERT INTO " + name + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
}

// rowValues returns the bound values of t.insert for row i of the partition of key k.
func (t *replayTable) rowValues(rp *replay, k, i int) []cql.Value {
	var out []cql.Value
	lens := t.keyLens[k]
	pkAt := 0
	for _, c := range t.captured.Columns {
		if c.Type == "counter" {
			continue
		}
		if t.counter && c.Kind != capturefile.PartitionKey && c.Kind != capturefile.Clustering {
			continue
		}
		var v []byte
		switch c.Kind {
		case capturefile.PartitionKey:
			pos := c.Position
			n := int32(-1)
			if pos < len(lens) {
				n = lens[pos]
			}
			v = values.Key(rp.keys[k], pos, c.Type, n)
			pkAt++
		case capturefile.Clustering:
			v = values.Index(c.Type, i, 0)
		default:
			n, ok := t.sizes[c.Name]
			if !ok {
				n = -1
			}
			v = values.Filler(c.Type, n)
		}
		out = append(out, cql.Value{Bytes: v})
	}
	if t.counter {
		// The UPDATE binds the key columns in the WHERE clause's order, which is theirs.
		return out
	}
	return out
}

// replayRun counts what one run replayed, by statement and by key.
type replayRun struct {
	stmts  map[uint32]*atomic.Int64
	errs   map[uint32]*atomic.Int64
	keys   []atomic.Int64 // by key, as the values sent name it
	other  atomic.Int64   // keys sent that name none of the capture's
	ops    atomic.Int64
	failed atomic.Int64
}

func (rp *replay) newRun() *replayRun {
	r := &replayRun{stmts: map[uint32]*atomic.Int64{}, errs: map[uint32]*atomic.Int64{}, keys: make([]atomic.Int64, len(rp.keys))}
	for id := range rp.stmts {
		r.stmts[id], r.errs[id] = new(atomic.Int64), new(atomic.Int64)
	}
	return r
}

// replaySession is one run's connections and prepared statements.
type replaySession struct {
	rp    *replay
	conns []*cqlconn.Conn
	ids   []map[uint32][]byte // per connection: prepared statement → id
	run   *replayRun
}

func (s *replaySession) close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// openReplay opens a run's connections to target and prepares the statements on each.
func (c *checker) openReplay(ctx context.Context, target string) (*replaySession, error) {
	rp := c.wl.replay
	s := &replaySession{rp: rp, run: rp.newRun()}
	for range rp.connections(c.cfg) {
		conn, err := cqlconn.Dial(ctx, c.cfg.connOptions(), target)
		if err != nil {
			s.close()
			return nil, err
		}
		s.conns = append(s.conns, conn)
		ids := map[uint32][]byte{}
		for id, st := range rp.stmts {
			if !st.def.Prepared {
				continue
			}
			pid, err := conn.Prepare(ctx, st.text)
			if err != nil {
				s.close()
				return nil, fmt.Errorf("replay: prepare statement %d (%s): %w", id, st.text, err)
			}
			ids[id] = pid
		}
		s.ids = append(s.ids, ids)
	}
	return s, nil
}

// schedule returns the phase schedule of the replay: the recorded times scaled by the
// speed, a fixed rate, or as fast as possible. limit, when positive, keeps the requests
// intended before it (a warmup).
func (s *replaySession) schedule(cfg *Config, workers int, limit time.Duration) *schedule {
	rp := s.rp
	sc := &schedule{ops: make([]indexedOp, workers)}
	switch {
	case rp.speed > 0:
		sc.at = make([]time.Duration, 0, len(rp.ops))
		for _, op := range rp.ops {
			at := time.Duration(float64(op.at) / rp.speed)
			if limit > 0 && at >= limit {
				break
			}
			sc.at = append(sc.at, at)
		}
	case cfg.Rate > 0:
		period := float64(time.Second) / cfg.Rate
		sc.at = make([]time.Duration, 0, len(rp.ops))
		for i := range rp.ops {
			at := time.Duration(float64(i) * period)
			if limit > 0 && at >= limit {
				break
			}
			sc.at = append(sc.at, at)
		}
	default:
		sc.n = int64(len(rp.ops))
	}
	for w := range sc.ops {
		sc.ops[w] = s.worker()
	}
	return sc
}

// worker returns one worker's operation: replay request i.
func (s *replaySession) worker() indexedOp {
	rp := s.rp
	fill := map[[2]int64][]byte{} // filler values by type index and length, made once
	var body, key []byte
	var sent []int
	return func(ctx context.Context, i int64) (int, error) {
		op := &rp.ops[i]
		ci := op.conn % len(s.conns)
		conn := s.conns[ci]
		r := op.rec
		var opcode cql.Opcode
		first := rp.stmts[r.Parts[0].Statement]
		params := cql.QueryParams{Consistency: cql.Consistency(max(r.Consistency, int(cql.One)))}
		if r.Consistency >= 0 {
			params.Consistency = cql.Consistency(r.Consistency)
		}
		if r.Serial >= 0 {
			params.Flags |= cql.QuerySerialConsistency
			params.SerialConsistency = cql.Consistency(r.Serial)
		}
		sent = sent[:0]
		switch cql.Opcode(r.Opcode) {
		case cql.OpQuery, cql.OpExecute:
			text, vals := s.values(first, &r.Parts[0], op.keys[0], r, fill, &key)
			sent = append(sent, s.sentKey(key))
			if len(vals) > 0 {
				params.Flags |= cql.QueryValues
				params.Values = vals
			}
			if r.PageSize > 0 {
				params.Flags |= cql.QueryPageSize
				params.PageSize = r.PageSize
			}
			if first.def.Prepared {
				opcode = cql.OpExecute
				body = conn.Execute(body[:0], s.ids[ci][first.def.ID], params)
			} else {
				opcode = cql.OpQuery
				body = cql.Query{Query: text, Params: params}.AppendBody(body[:0], conn.Version())
			}
		case cql.OpBatch:
			opcode = cql.OpBatch
			b := cql.Batch{Type: byte(max(r.BatchType, 0)), Consistency: params.Consistency, Flags: params.Flags & cql.QuerySerialConsistency,
				SerialConsistency: params.SerialConsistency}
			for j := range r.Parts {
				st := rp.stmts[r.Parts[j].Statement]
				text, vals := s.values(st, &r.Parts[j], op.keys[j], r, fill, &key)
				sent = append(sent, s.sentKey(key))
				q := cql.BatchQuery{Values: vals}
				if st.def.Prepared {
					q.Prepared, q.ID = true, s.ids[ci][st.def.ID]
				} else {
					q.Query = text
				}
				b.Queries = append(b.Queries, q)
			}
			body = b.AppendBody(body[:0], conn.Version())
		}
		resp, err := conn.Do(ctx, opcode, body, true)
		if err == nil {
			var rows int
			rows, err = cqlconn.Result(resp)
			var ce cql.Error
			if errors.As(err, &ce) && ce.Code == cql.ErrCodeUnprepared {
				err = s.reprepare(ctx, ci)
				if err == nil {
					return 0, errors.New("replay: the node had forgotten a prepared statement; prepared again")
				}
			}
			if err == nil {
				s.count(op, false, sent)
				return rows, nil
			}
		}
		if ctx.Err() == nil {
			s.count(op, true, sent)
		}
		return 0, err
	}
}

// reprepare prepares every statement again on connection ci.
func (s *replaySession) reprepare(ctx context.Context, ci int) error {
	for id, st := range s.rp.stmts {
		if st.def.Prepared {
			pid, err := s.conns[ci].Prepare(ctx, st.text)
			if err != nil {
				return err
			}
			s.ids[ci][id] = pid
		}
	}
	return nil
}

// sentKey returns the key whose values key holds (see sentKey in replay.go), -1 for
// none, -2 for values that name none of the capture's keys.
func (s *replaySession) sentKey(key []byte) int {
	if len(key) == 0 {
		return -1
	}
	if k, ok := s.rp.keyIndex[string(key)]; ok {
		return k
	}
	return -2
}

// count counts a request replayed, and the keys it sent.
func (s *replaySession) count(op *replayOp, failed bool, sent []int) {
	run := s.run
	run.ops.Add(1)
	if failed {
		run.failed.Add(1)
	}
	for j, p := range op.rec.Parts {
		run.stmts[p.Statement].Add(1)
		if failed {
			run.errs[p.Statement].Add(1)
		}
		switch k := sent[j]; {
		case k >= 0:
			run.keys[k].Add(1)
		case k == -2:
			run.other.Add(1)
		}
	}
}

// values returns the text of a statement sent as text, its literals filled in, and the
// bound values of one part of a request.
func (s *replaySession) values(st *replayStmt, p *capturefile.Part, key int, r *capturefile.Record, fill map[[2]int64][]byte, sent *[]byte) (string, []cql.Value) {
	def := st.def
	*sent = (*sent)[:0]
	comps := make([][]byte, len(def.PK))
	value := func(j int) []byte {
		v := def.Values[j]
		n := int32(-1)
		if j < len(p.Lens) {
			n = p.Lens[j]
		}
		if key >= 0 {
			for comp, pk := range def.PK {
				if pk == j {
					b := values.Key(s.rp.keys[key], comp, v.Type, n)
					comps[comp] = b
					return b
				}
			}
		}
		switch v.Column {
		case "[limit]":
			lim := int32(100)
			if r.Rows > 0 {
				lim = r.Rows
			}
			return binary.BigEndian.AppendUint32(nil, uint32(lim))
		case "[ttl]":
			return binary.BigEndian.AppendUint32(nil, 86400)
		case "[timestamp]":
			return binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixMicro()))
		}
		typ := v.Type
		if typ == "" {
			typ = "text"
		}
		k := [2]int64{int64(j) + int64(def.ID)<<32, int64(n)}
		if b, ok := fill[k]; ok {
			return b
		}
		b := values.Filler(typ, n)
		fill[k] = b
		return b
	}
	var vals []cql.Value
	for j := 0; j < st.nbound && j < len(p.Lens); j++ {
		switch p.Lens[j] {
		case capturefile.LenNull:
			vals = append(vals, cql.Value{})
		case capturefile.LenUnset:
			vals = append(vals, cql.Value{Unset: true})
		default:
			vals = append(vals, cql.Value{Bytes: value(j)})
		}
	}
	text := st.text
	if len(st.lits) > 0 && !def.Prepared {
		var b strings.Builder
		last := 0
		for n, j := range st.lits {
			at := st.litAt[n]
			b.WriteString(text[last:at])
			b.WriteString(values.Literal(def.Values[j].Literal, def.Values[j].Type, value(j)))
			last = at + 1
		}
		b.WriteString(text[last:])
		text = b.String()
	}
	for _, c := range comps {
		if c == nil {
			return text, vals
		}
	}
	for _, c := range comps {
		*sent = append(*sent, byte(len(c)>>8), byte(len(c)))
		*sent = append(*sent, c...)
	}
	return text, vals
}

// literalOffsets returns, for each literal of st (in st.lits order), the offset of its '?'
// in text: the k-th '?' of the captured text is the k-th of the mapped one.
func literalOffsets(st *replayStmt, text string) []int {
	var marks []int // offsets of '?' in text
	for t := cqltext.NextSignificant(text, 0); t.Kind != cqltext.EOF; t = cqltext.NextSignificant(text, t.End) {
		if cqltext.IsPunct(text, t, "?") {
			marks = append(marks, t.Start)
		}
	}
	var capMarks []int
	ct := st.def.Text
	for t := cqltext.NextSignificant(ct, 0); t.Kind != cqltext.EOF; t = cqltext.NextSignificant(ct, t.End) {
		if cqltext.IsPunct(ct, t, "?") {
			capMarks = append(capMarks, t.Start)
		}
	}
	out := make([]int, len(st.lits))
	for n, j := range st.lits {
		out[n] = -1
		at := st.def.Values[j].At
		k := sort.SearchInts(capMarks, at)
		if k < len(capMarks) && capMarks[k] == at && k < len(marks) {
			out[n] = marks[k]
		}
	}
	return out
}

// ReplayReport is the "replay" section of the JSON report.
type ReplayReport struct {
	File        string  `json:"file"`
	Speed       string  `json:"speed"`
	Connections int     `json:"connections"`
	Records     int     `json:"records"`
	Replayed    int     `json:"replayed_per_run"`
	SpanS       float64 `json:"span_s"`
	// CapturedOpRate is the rate of the replayed requests in the capture.
	CapturedOpRate float64           `json:"captured_op_rate"`
	Skipped        map[string]int    `json:"skipped"`
	Statements     []ReplayStatement `json:"statements"`
	Keys           ReplayKeys        `json:"keys"`
	// CapturedLatency are the latency percentiles the sidecar saw in the capture, in ms,
	// to set beside each mode's.
	CapturedLatency Latency `json:"captured_latency"`
	// Keyspace is the keyspace the replay owns against a deployment, "" for the embedded
	// node (the captured names).
	Keyspace string `json:"keyspace,omitempty"`
}

// ReplayStatement is one statement's count in the capture and, on average over the
// measured runs, in the replay.
type ReplayStatement struct {
	ID       uint32  `json:"id"`
	Query    string  `json:"query"`
	Prepared bool    `json:"prepared"`
	Captured int     `json:"captured"`
	Replayed float64 `json:"replayed"`
	Errors   float64 `json:"errors"`
}

// ReplayKeys compares how the hottest keys repeat in the capture and in the replay.
type ReplayKeys struct {
	Distinct int         `json:"distinct"`
	Top      []ReplayKey `json:"top"`
	// Collisions counts the captured keys whose replayed values are another's (a key of
	// a type with few values, such as tinyint); Unmatched the requests per run whose key
	// values named none of the capture's keys (0 unless the replay is broken).
	Collisions int     `json:"collisions"`
	Unmatched  float64 `json:"unmatched"`
}

// ReplayKey is one key's share of the requests that name a key, in %.
type ReplayKey struct {
	Key         string  `json:"key"`
	CapturedPct float64 `json:"captured_pct"`
	ReplayedPct float64 `json:"replayed_pct"`
}

// replayReport sums the measured runs.
func (c *checker) replayReport() *ReplayReport {
	rp := c.wl.replay
	speed := "max"
	switch {
	case rp.speed > 0:
		speed = fmt.Sprintf("%gx", rp.speed)
	case c.cfg.Rate > 0:
		speed = fmt.Sprintf("rate %g op/s", c.cfg.Rate)
	}
	rep := &ReplayReport{File: rp.path, Speed: speed, Connections: rp.connections(c.cfg), Records: len(rp.c.Records),
		Replayed: len(rp.ops), SpanS: rp.span.Seconds(), Skipped: rp.skipped, Keyspace: rp.owned}
	if rp.span > 0 {
		rep.CapturedOpRate = float64(len(rp.ops)) / rp.span.Seconds()
	}
	cc := rp.capturedCounts()
	rep.Statements = rp.statementCounts(cc.stmts, c.replayRuns)
	rep.Keys = rp.keyCounts(cc, c.replayRuns)
	rep.CapturedLatency = rp.capturedLatency()
	return rep
}

// capturedCounts are the replayed requests' counts in the capture: by statement, by key,
// and how many name a key.
type capturedCounts struct {
	stmts   map[uint32]int
	keys    []int
	withKey int
}

// capturedCounts counts the replayed requests' statements and keys in the capture.
func (rp *replay) capturedCounts() capturedCounts {
	cc := capturedCounts{stmts: map[uint32]int{}, keys: make([]int, len(rp.keys))}
	for _, op := range rp.ops {
		for j, p := range op.rec.Parts {
			cc.stmts[p.Statement]++
			if k := op.keys[j]; k >= 0 {
				cc.keys[k]++
				cc.withKey++
			}
		}
	}
	return cc
}

// statementCounts sets each statement's captured count beside its replays and errors on
// average over runs, the most captured first.
func (rp *replay) statementCounts(captured map[uint32]int, runs []*replayRun) []ReplayStatement {
	var stmts []ReplayStatement
	for id, n := range captured {
		st := rp.stmts[id]
		s := ReplayStatement{ID: id, Query: st.def.Text, Prepared: st.def.Prepared, Captured: n}
		for _, r := range runs {
			s.Replayed += float64(r.stmts[id].Load())
			s.Errors += float64(r.errs[id].Load())
		}
		if len(runs) > 0 {
			s.Replayed /= float64(len(runs))
			s.Errors /= float64(len(runs))
		}
		stmts = append(stmts, s)
	}
	sort.Slice(stmts, func(i, j int) bool {
		a, b := stmts[i], stmts[j]
		return a.Captured > b.Captured || a.Captured == b.Captured && a.ID < b.ID
	})
	return stmts
}

// keyCounts compares the hottest captured keys' shares of the requests that name a key,
// in the capture and over runs.
func (rp *replay) keyCounts(cc capturedCounts, runs []*replayRun) ReplayKeys {
	keys := ReplayKeys{Distinct: len(rp.keys), Collisions: rp.collisions}
	for _, r := range runs {
		keys.Unmatched += float64(r.other.Load()) / float64(len(runs))
	}
	order := make([]int, len(rp.keys))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := cc.keys[order[i]], cc.keys[order[j]]
		return a > b || a == b && keyHex(rp.keys[order[i]]) < keyHex(rp.keys[order[j]])
	})
	var replayedWithKey int64
	for _, r := range runs {
		for k := range r.keys {
			replayedWithKey += r.keys[k].Load()
		}
		replayedWithKey += r.other.Load()
	}
	for _, k := range order[:min(len(order), capturefile.TopKeys)] {
		rk := ReplayKey{Key: keyHex(rp.keys[k])}
		if cc.withKey > 0 {
			rk.CapturedPct = 100 * float64(cc.keys[k]) / float64(cc.withKey)
		}
		var n int64
		for _, r := range runs {
			n += r.keys[k].Load()
		}
		if replayedWithKey > 0 {
			rk.ReplayedPct = 100 * float64(n) / float64(replayedWithKey)
		}
		keys.Top = append(keys.Top, rk)
	}
	return keys
}

// capturedLatency are the latency percentiles of the replayed requests in the capture.
func (rp *replay) capturedLatency() Latency {
	var lat []int64
	for _, op := range rp.ops {
		lat = append(lat, op.rec.LatencyUS)
	}
	p := capturefile.PercentilesOf(lat)
	return Latency{MeanMs: p.Mean / 1000, P50Ms: float64(p.P50) / 1000, P95Ms: float64(p.P95) / 1000,
		P99Ms: float64(p.P99) / 1000, P999Ms: float64(p.P999) / 1000, MaxMs: float64(p.Max) / 1000}
}

// printReplay prints the captured against the replayed: counts, keys and latency.
func printReplay(out *printer, rep *Report) {
	r := rep.Replay
	if r == nil {
		return
	}
	out.printf("\nReplay of %s at %s over %d connections: %d of %d captured requests per run, captured at %.0f op/s over %.1fs\n",
		r.File, r.Speed, r.Connections, r.Replayed, r.Records, r.CapturedOpRate, r.SpanS)
	for _, k := range sortedKeys(r.Skipped) {
		out.printf("  not replayed: %d %s\n", r.Skipped[k], k)
	}
	out.printf("%-10s %10s %10s %8s  %s\n", "statement", "captured", "replayed", "errors", "query")
	for _, s := range r.Statements {
		q := s.Query
		if len(q) > 70 {
			q = q[:70] + "…"
		}
		out.printf("%-10d %10d %10.0f %8.0f  %s\n", s.ID, s.Captured, s.Replayed, s.Errors, q)
	}
	out.printf("hottest keys (of %d; keyed hashes, never values): captured share → replayed share\n", r.Keys.Distinct)
	for _, k := range r.Keys.Top {
		out.printf("  %s  %5.2f%% → %5.2f%%\n", k.Key, k.CapturedPct, k.ReplayedPct)
	}
	out.printf("%-12s %9s %9s %9s %9s %9s %11s\n", "latency ms", "p50", "p95", "p99", "p99.9", "max", "op/s")
	l := r.CapturedLatency
	out.printf("%-12s %9.3f %9.3f %9.3f %9.3f %9.3f %11.0f\n", "captured*", l.P50Ms, l.P95Ms, l.P99Ms, l.P999Ms, l.MaxMs, r.CapturedOpRate)
	for _, m := range rep.Modes {
		out.printf("%-12s %9.3f %9.3f %9.3f %9.3f %9.3f %11.0f\n", m.Name, m.P50Ms, m.P95Ms, m.P99Ms, m.P999Ms, m.MaxMs, m.OpRate)
	}
	out.printf("* as the sidecar saw it: from the request's arrival to the node's answer; the modes' are the client's, from the intended start\n")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runReplayMode runs one mode's run of a replay: a warmup on the capture's start, then the
// whole capture, measured as any run is.
func (c *checker) runReplayMode(ctx context.Context, m *mode, round, pos int) (*runResult, error) {
	cfg := c.cfg
	workers := cfg.Concurrency
	ops := make([]Op, workers)
	if cfg.Warmup > 0 {
		s, err := c.openReplay(ctx, m.target)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m.name, err)
		}
		c.status(m, round, "warming up", 0)
		warm := runPhase(ctx, phase{clock: c.env.clock, workers: workers, duration: cfg.Warmup, schedule: s.schedule(cfg, workers, cfg.Warmup)}, ops)
		s.close()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.out.printf("Warmed up for %.1fs: %s ops, %s errors\n", warm.elapsed.Seconds(), commas(float64(warm.ops)), commas(float64(warm.errs)))
	}
	s, err := c.openReplay(ctx, m.target)
	if err != nil {
		return nil, fmt.Errorf("mode %s: %w", m.name, err)
	}
	defer s.close()
	c.out.printf("%s\n", intervalHeader)
	p := phase{clock: c.env.clock, workers: workers, interval: cfg.Interval, schedule: s.schedule(cfg, workers, 0),
		onInterval: func(iv Interval, _, _ *hdrhistogram.Histogram) {
			c.out.printf("%s\n", intervalLine(iv))
			c.status(m, round, fmt.Sprintf("%.0fs, %s op/s, p99 %.2f ms", iv.TimeS, commas(iv.OpRate), iv.P99Ms), iv.TimeS)
		}}
	wall := time.Now()
	mr, err := c.measure(ctx, m, p, ops)
	if err != nil {
		return nil, err
	}
	res, cpu, pc, seen0, seen1 := mr.res, mr.cpu, mr.pc, mr.seen0, mr.seen1
	c.replayRuns = append(c.replayRuns, s.run)
	rr := newRunResult(m, round, pos, wall, res, cpu, pc)
	rr.Sidecars = sidecarDelta(cfg.admins(), seen0, seen1)
	printResults(c.out, rr, cfg.Rate > 0 || c.wl.replay.speed > 0)
	return rr, nil
}
