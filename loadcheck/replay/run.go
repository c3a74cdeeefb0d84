package replay

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

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/loadcheck/cqlconn"
	"github.com/tracecar/tracecar/loadcheck/values"
)

// maxReplayConnections bounds --replay-connections.
const maxReplayConnections = 64

// Connections returns the replay connections per run: n (--replay-connections) when
// positive, else as many as the capture's connections that carried replayed requests.
func (rp *Replay) Connections(n int) int {
	if n > 0 {
		return n
	}
	return min(max(rp.conns, 1), maxReplayConnections)
}

// CreateSchema creates the capture's keyspaces (those that do not exist) and tables
// through conn, on the node at target. A table the node cannot create stops the replay
// before anything runs: the keyspaces created are dropped again, so that nothing is left
// half-made. Else undo drops them, for a later step that fails.
func (rp *Replay) CreateSchema(ctx context.Context, conn *cqlconn.Conn, target string) (undo func(), err error) {
	var created []string
	undo = func() {
		for _, ks := range created {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			conn.Query(dctx, "DROP KEYSPACE IF EXISTS "+cql.QuoteName(ks))
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
			return nil, err
		}
		if exists {
			continue
		}
		stmt := "CREATE KEYSPACE " + cql.QuoteName(t.keyspace) + " WITH replication = " + replication(rp.c, t.captured.Keyspace)
		if err := conn.Query(ctx, stmt); err != nil {
			undo()
			return nil, fmt.Errorf("the node at %s cannot create keyspace %s for the replay: %w", target, t.keyspace, err)
		}
		created = append(created, t.keyspace)
	}
	for _, t := range rp.tables {
		if err := conn.Query(ctx, t.createTable()); err != nil {
			undo()
			return nil, fmt.Errorf("the node at %s cannot create table %s.%s of the capture (as %s): %w; nothing was replayed",
				target, t.captured.Keyspace, t.captured.Name, t.createTable(), err)
		}
	}
	return undo, nil
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

// PreloadRows counts the rows Preload writes.
func (rp *Replay) PreloadRows() int { return len(rp.preloadRows()) }

// Preload writes through conn, for every key the capture reads, as many rows as its reads
// returned, with workers goroutines.
func (rp *Replay) Preload(ctx context.Context, conn *cqlconn.Conn, workers int) error {
	rows := rp.preloadRows()
	if len(rows) == 0 {
		return nil
	}
	ids, err := rp.prepareInserts(ctx, conn)
	if err != nil {
		return err
	}
	return rp.writeRows(ctx, conn, rows, ids, workers)
}

// preloadRow is one row the replay's preload writes: its table, key and row index.
type preloadRow struct {
	t   *replayTable
	key int
	i   int
}

// preloadRows lists the rows the capture reads, by table and key in order: as many as
// were seen for each key, one for a table without clustering columns.
func (rp *Replay) preloadRows() []preloadRow {
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
func (rp *Replay) prepareInserts(ctx context.Context, conn *cqlconn.Conn) (map[*replayTable][]byte, error) {
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
func (rp *Replay) writeRows(ctx context.Context, conn *cqlconn.Conn, rows []preloadRow, ids map[*replayTable][]byte, workers int) error {
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
	name := cql.QuoteName(t.keyspace) + "." + cql.QuoteName(t.name)
	var cols, marks, sets, where []string
	for _, c := range t.captured.Columns {
		switch {
		case c.Type == "counter":
			sets = append(sets, cql.QuoteName(c.Name)+" = "+cql.QuoteName(c.Name)+" + 1")
		case c.Kind == capturefile.PartitionKey || c.Kind == capturefile.Clustering:
			cols, marks = append(cols, cql.QuoteName(c.Name)), append(marks, "?")
			where = append(where, cql.QuoteName(c.Name)+" = ?")
		default:
			cols, marks = append(cols, cql.QuoteName(c.Name)), append(marks, "?")
		}
	}
	if t.counter {
		return "UPDATE " + name + " SET " + strings.Join(sets, ", ") + " WHERE " + strings.Join(where, " AND ")
	}
	return "INSERT INTO " + name + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")"
}

// rowValues returns the bound values of t.insert for row i of the partition of key k.
func (t *replayTable) rowValues(rp *Replay, k, i int) []cql.Value {
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

// Run counts what one run replayed, by statement and by key.
type Run struct {
	stmts  map[uint32]*atomic.Int64
	errs   map[uint32]*atomic.Int64
	keys   []atomic.Int64 // by key, as the values sent name it
	other  atomic.Int64   // keys sent that name none of the capture's
	ops    atomic.Int64
	failed atomic.Int64
}

func (rp *Replay) newRun() *Run {
	r := &Run{stmts: map[uint32]*atomic.Int64{}, errs: map[uint32]*atomic.Int64{}, keys: make([]atomic.Int64, len(rp.keys))}
	for id := range rp.stmts {
		r.stmts[id], r.errs[id] = new(atomic.Int64), new(atomic.Int64)
	}
	return r
}

// Session is one run's connections and prepared statements, and the run's counts.
type Session struct {
	rp    *Replay
	conns []*cqlconn.Conn
	ids   []map[uint32][]byte // per connection: prepared statement → id
	run   *Run
}

// Close closes the session's connections.
func (s *Session) Close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// Run returns what the session replayed.
func (s *Session) Run() *Run { return s.run }

// Open opens a run's n connections to target and prepares the statements on each.
func (rp *Replay) Open(ctx context.Context, opts cqlconn.Options, target string, n int) (*Session, error) {
	s := &Session{rp: rp, run: rp.newRun()}
	for range n {
		conn, err := cqlconn.Dial(ctx, opts, target)
		if err != nil {
			s.Close()
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
				s.Close()
				return nil, fmt.Errorf("replay: prepare statement %d (%s): %w", id, st.text, err)
			}
			ids[id] = pid
		}
		s.ids = append(s.ids, ids)
	}
	return s, nil
}

// Times returns the intended starts of the replay's requests, from the run's start: the
// recorded times scaled by the speed, or at rate op/s when the replay has no speed
// (Options.Rate); nil when they go as fast as possible. limit, when positive, keeps the
// requests intended before it (a warmup).
func (rp *Replay) Times(rate float64, limit time.Duration) []time.Duration {
	var at []time.Duration
	switch {
	case rp.speed > 0:
		at = make([]time.Duration, 0, len(rp.ops))
		for _, op := range rp.ops {
			t := time.Duration(float64(op.at) / rp.speed)
			if limit > 0 && t >= limit {
				break
			}
			at = append(at, t)
		}
	case rate > 0:
		period := float64(time.Second) / rate
		at = make([]time.Duration, 0, len(rp.ops))
		for i := range rp.ops {
			t := time.Duration(float64(i) * period)
			if limit > 0 && t >= limit {
				break
			}
			at = append(at, t)
		}
	}
	return at
}

// Worker returns one worker's operation: it sends request i of the replay, and returns
// the rows of its answer. Each worker of a run takes its own.
func (s *Session) Worker() func(ctx context.Context, i int64) (rows int, err error) {
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
func (s *Session) reprepare(ctx context.Context, ci int) error {
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
func (s *Session) sentKey(key []byte) int {
	if len(key) == 0 {
		return -1
	}
	if k, ok := s.rp.keyIndex[string(key)]; ok {
		return k
	}
	return -2
}

// count counts a request replayed, and the keys it sent.
func (s *Session) count(op *replayOp, failed bool, sent []int) {
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
func (s *Session) values(st *replayStmt, p *capturefile.Part, key int, r *capturefile.Record, fill map[[2]int64][]byte, sent *[]byte) (string, []cql.Value) {
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
