// Package replay plays a capture file (tracecar/capture) back: it reads the capture,
// plans which requests to replay and against which tables, creates those tables and
// preloads the rows the capture reads, sends the requests through loadcheck's own CQL
// connection (cqlconn), and counts what each run replayed, by statement and by key, for
// the "replay" section of the report. It knows nothing of modes, rounds or verdicts: the
// load checker schedules its requests and measures them as any run's.
package replay

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/cql/cqltext"
	"github.com/tracecar/tracecar/loadcheck/values"
)

// A replay plays a capture file (tracecar/capture) back: the captured requests, in order,
// at their recorded times scaled by the speed (open loop, latency from the intended start
// as with --rate), or as fast as the workers go. Before the first run it creates the
// capture's tables and writes a row for each key that the capture reads (as many rows as
// the reads returned), with values of the recorded types and sizes; keys are made from
// their keyed hashes, so a key repeats in the replay as often as in the capture, without
// being known.

var replayKeyspaceRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

// Options are the command line's choices for a replay.
type Options struct {
	// Speed is --replay-speed: 1x, 2x, a positive factor such as 0.5, or max; "" for 1x.
	Speed string
	// Rate is --rate: when positive, the requests are sent in their order at this rate,
	// not at their recorded times.
	Rate float64
	// Keyspace is --replay-keyspace: the keyspace the replay owns against a deployment;
	// "" writes into the captured keyspaces (the embedded node).
	Keyspace string
}

// ErrUsage marks errors in the Options, which the load checker reports as usage errors.
var ErrUsage = errors.New("usage error")

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return ErrUsage }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Replay is a capture file made ready to play. After Load it is read-only, and shared by
// every run.
type Replay struct {
	path   string
	c      *capturefile.Capture
	speed  float64 // 0: as fast as possible
	ops    []replayOp
	stmts  map[uint32]*replayStmt
	tables []*replayTable
	// skipped counts the captured requests that are not replayed, by reason.
	skipped map[string]int
	// conns is the number of captured connections that carried replayed requests.
	conns int
	// keys are the distinct partition keys of the replayed requests.
	keys [][]byte
	// keyIndex finds a key by the values the replay sends for it, so that a run counts
	// the keys it sent, not the ones it meant to; collisions counts the keys whose values
	// cannot be told apart from another's (a tinyint key, say).
	keyIndex   map[string]int
	collisions int
	span       time.Duration
	captured   capturefile.Summary
	// ksMap maps a captured keyspace to the one the replay writes to; tableNames a
	// captured ks.table to its name in CQL text, where it is renamed.
	ksMap      map[string]string
	tableNames map[string]string
	// owned is the keyspace the replay owns against a deployment, "" for the embedded node.
	owned string
}

// Path is the capture file's.
func (rp *Replay) Path() string { return rp.path }

// Speed is the factor of the recorded times, 0 when the requests go in their order as fast
// as the workers go or at a fixed rate.
func (rp *Replay) Speed() float64 { return rp.speed }

// Requests counts the captured requests replayed per run.
func (rp *Replay) Requests() int { return len(rp.ops) }

// Span is the time the replayed requests span in the capture.
func (rp *Replay) Span() time.Duration { return rp.span }

// Tables counts the tables the replay creates.
func (rp *Replay) Tables() int { return len(rp.tables) }

// replayOp is one captured request to replay.
type replayOp struct {
	at    time.Duration // its arrival after the first replayed request's
	rec   *capturefile.Record
	conn  int   // the replay connection it goes to
	keys  []int // per part: the index of its key in replay.keys, or -1
	first bool
}

// replayStmt is a statement as the replay sends it.
type replayStmt struct {
	def   *capturefile.Statement
	text  string // the text to send, its keyspaces mapped; literals still '?'
	table *replayTable
	// lits are the values that are literals, in the text's order, and litAt the offsets
	// of their '?' in text.
	lits  []int
	litAt []int
	// nbound is the number of bound values.
	nbound int
}

// replayTable is a table the replay creates.
type replayTable struct {
	captured *capturefile.Table
	keyspace string // as created
	name     string
	pk, ck   []capturefile.Column // in key order
	// sizes are the regular columns' typical value lengths, from the captured writes.
	sizes map[string]int32
	// rows is, per read key (an index into replay.keys), the rows the reads returned.
	rows map[int]int32
	// keyLens are, per key, its values' lengths, from a request that names it.
	keyLens map[int][]int32
	counter bool
}

// parseReplaySpeed reads --replay-speed: 1x, 2x, 0.5x, a bare number, or max.
func parseReplaySpeed(s string) (float64, error) {
	if s == "" {
		return 1, nil
	}
	if strings.EqualFold(s, "max") {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.ToLower(s), "x"), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) || v > 1e6 {
		return 0, usageErrorf("--replay-speed %q: want 1x, 2x, a positive factor such as 0.5 or 10, or max", s)
	}
	return v, nil
}

// Load reads the capture at path and plans its replay. Errors in o wrap ErrUsage.
func Load(path string, o Options) (*Replay, error) {
	speed, err := parseReplaySpeed(o.Speed)
	if err != nil {
		return nil, err
	}
	switch {
	case o.Rate > 0 && o.Speed != "":
		return nil, usageErrorf("--rate and --replay-speed contradict each other: a replay follows the recorded timing (scaled), or a fixed rate; give one")
	case o.Rate > 0:
		speed = 0 // the requests in their order, at the fixed rate
	}
	if path == "" {
		return nil, usageErrorf("--workload replay:FILE: the file is missing")
	}
	c, err := capturefile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rp := &Replay{path: path, c: c, speed: speed, stmts: map[uint32]*replayStmt{}, skipped: map[string]int{},
		ksMap: map[string]string{}, tableNames: map[string]string{}, owned: o.Keyspace}
	rp.captured = capturefile.Summarize(c)
	if ks := o.Keyspace; ks != "" {
		if !replayKeyspaceRE.MatchString(ks) {
			return nil, usageErrorf("--replay-keyspace %q: want a keyspace name of letters, digits and _, at most 48", ks)
		}
		for _, k := range c.Keyspaces {
			if strings.EqualFold(k.Name, ks) {
				return nil, usageErrorf("--replay-keyspace %s is a keyspace of the capture: the replay never writes into the captured keyspaces", ks)
			}
		}
		for _, t := range c.Tables {
			if strings.EqualFold(t.Keyspace, ks) {
				return nil, usageErrorf("--replay-keyspace %s is a keyspace of the capture: the replay never writes into the captured keyspaces", ks)
			}
		}
	}
	if err := rp.plan(); err != nil {
		return nil, err
	}
	return rp, nil
}

// skip reasons
const (
	skipHandshake = "connection handshake and heartbeats (STARTUP, OPTIONS, REGISTER, AUTH)"
	skipPrepare   = "PREPARE (the replay prepares its statements itself)"
	skipSystem    = "statements on the node's own keyspaces (drivers' metadata)"
	skipOther     = "statements other than SELECT, INSERT, UPDATE, DELETE and BATCH (USE, DDL, ...)"
	skipUnknown   = "statements whose text the sidecar never saw (prepared before it started)"
	skipCut       = "requests too large for the capture to keep their values"
)

// plan chooses the records to replay, maps keyspaces and tables, and indexes the keys.
func (rp *Replay) plan() error {
	c := rp.c
	pl := replayPlanner{tables: map[string]*replayTable{}, keyIdx: map[string]int{}, conns: map[uint32]int{}, first: -1}
	for i := range c.Records {
		r := &c.Records[i]
		reason := rp.replayable(r)
		if reason != "" {
			rp.skipped[reason]++
			continue
		}
		op, err := rp.planOp(&pl, r)
		if err != nil {
			return err
		}
		rp.ops = append(rp.ops, op)
	}
	if len(rp.ops) == 0 {
		if len(rp.skipped) == 0 {
			return fmt.Errorf("capture file %s: no request to replay: it holds none", rp.path)
		}
		return fmt.Errorf("capture file %s: no request to replay (%s)", rp.path, rp.SkipSummary())
	}
	// Requests arrive at the sidecar in order per connection, but are written in the
	// order they were answered: play them in the order they arrived.
	slices.SortStableFunc(rp.ops, func(a, b replayOp) int { return cmp.Compare(a.at, b.at) })
	rp.span = rp.ops[len(rp.ops)-1].at
	rp.indexSentKeys()
	rp.conns = len(pl.conns)
	for _, t := range pl.tables {
		rp.tables = append(rp.tables, t)
	}
	slices.SortFunc(rp.tables, func(a, b *replayTable) int {
		return cmp.Or(cmp.Compare(a.keyspace, b.keyspace), cmp.Compare(a.name, b.name))
	})
	return nil
}

// replayPlanner is what plan learns as it reads the records: the tables by name, the
// keys' indexes, the connections' numbers and the first request's time.
type replayPlanner struct {
	tables map[string]*replayTable
	keyIdx map[string]int
	conns  map[uint32]int
	first  int64 // -1 before the first
}

// planOp makes the replayable record r an op: its statements' keys, learning each table's
// key lengths, rows per key and column sizes, its time from the first and its connection.
func (rp *Replay) planOp(pl *replayPlanner, r *capturefile.Record) (replayOp, error) {
	op := replayOp{rec: r}
	for _, p := range r.Parts {
		st := rp.c.Statements[p.Statement]
		rs, err := rp.statement(st, pl.tables)
		if err != nil {
			return op, err
		}
		k := -1
		if p.Key != nil {
			k = rp.planKey(pl, st, &p, rs.table, r.Rows)
		}
		if t := rs.table; t != nil && (st.Verb == "insert" || st.Verb == "update") {
			for j, v := range st.Values {
				if j < len(p.Lens) && p.Lens[j] > 0 && v.Literal == "" {
					t.sizes[v.Column] = max(t.sizes[v.Column], p.Lens[j])
				}
			}
		}
		op.keys = append(op.keys, k)
	}
	if pl.first < 0 {
		pl.first = r.AtUS
		op.first = true
	}
	op.at = time.Duration(r.AtUS-pl.first) * time.Microsecond
	n, ok := pl.conns[r.Conn]
	if !ok {
		n = len(pl.conns)
		pl.conns[r.Conn] = n
	}
	op.conn = n
	return op, nil
}

// planKey returns the index of part p's key, numbering it when new, and learns its
// columns' lengths and (from a SELECT) its rows in table t.
func (rp *Replay) planKey(pl *replayPlanner, st *capturefile.Statement, p *capturefile.Part, t *replayTable, rows int32) int {
	k, ok := pl.keyIdx[string(p.Key)]
	if !ok {
		k = len(rp.keys)
		pl.keyIdx[string(p.Key)] = k
		rp.keys = append(rp.keys, p.Key)
	}
	if t != nil && t.keyLens[k] == nil && len(st.PK) > 0 {
		lens := make([]int32, len(st.PK))
		for j, vi := range st.PK {
			if vi < len(p.Lens) {
				lens[j] = p.Lens[vi]
			}
		}
		t.keyLens[k] = lens
	}
	if t != nil && st.Verb == "select" && rows > t.rows[k] {
		t.rows[k] = rows
	}
	return k
}

// indexSentKeys maps each key's values as the replay sends them to the key, counting the
// keys whose values are another's as collisions.
func (rp *Replay) indexSentKeys() {
	rp.keyIndex = map[string]int{}
	for _, op := range rp.ops {
		for j, p := range op.rec.Parts {
			k := op.keys[j]
			if k < 0 {
				continue
			}
			b := sentKey(nil, rp.c.Statements[p.Statement], &p, rp.keys[k])
			if o, ok := rp.keyIndex[string(b)]; !ok {
				rp.keyIndex[string(b)] = k
			} else if o != k {
				rp.collisions++
			}
		}
	}
}

// SkipSummary says which captured requests are not replayed, and why.
func (rp *Replay) SkipSummary() string {
	var parts []string
	for _, r := range slices.Sorted(mapsKeys(rp.skipped)) {
		parts = append(parts, fmt.Sprintf("%d %s", rp.skipped[r], r))
	}
	if len(parts) == 0 {
		return "every captured request is replayed"
	}
	return "not replayed: " + strings.Join(parts, "; ")
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// replayable returns why r is not replayed, or "".
func (rp *Replay) replayable(r *capturefile.Record) string {
	switch cql.Opcode(r.Opcode) {
	case cql.OpQuery, cql.OpExecute, cql.OpBatch:
	case cql.OpPrepare:
		return skipPrepare
	default:
		return skipHandshake
	}
	if len(r.Parts) == 0 {
		return skipCut
	}
	for _, p := range r.Parts {
		st := rp.c.Statements[p.Statement]
		switch {
		case st == nil || st.Prepared && strings.HasPrefix(st.Text, "<prepared statement"):
			return skipUnknown
		case st.System:
			return skipSystem
		case st.Verb != "select" && st.Verb != "insert" && st.Verb != "update" && st.Verb != "delete" && st.Verb != "batch":
			return skipOther
		case p.Lens == nil && len(st.Values) > 0:
			return skipCut
		}
	}
	return ""
}

// statement returns the replay's form of st, with the table it runs on.
func (rp *Replay) statement(st *capturefile.Statement, tables map[string]*replayTable) (*replayStmt, error) {
	if rs := rp.stmts[st.ID]; rs != nil {
		return rs, nil
	}
	rs := &replayStmt{def: st}
	for i, v := range st.Values {
		if v.Literal != "" {
			rs.lits = append(rs.lits, i)
		} else {
			rs.nbound++
		}
	}
	if st.Table != "" && st.Keyspace != "" {
		key := st.Keyspace + "." + st.Table
		t := tables[key]
		if t == nil {
			var err error
			if t, err = rp.table(st.Keyspace, st.Table, tables); err != nil {
				return nil, err
			}
			tables[key] = t
		}
		rs.table = t
	}
	text, err := rp.mapText(st)
	if err != nil {
		return nil, err
	}
	rs.text = text
	slices.SortFunc(rs.lits, func(a, b int) int { return st.Values[a].At - st.Values[b].At })
	rs.litAt = literalOffsets(rs, text)
	if slices.Contains(rs.litAt, -1) {
		return nil, fmt.Errorf("capture file %s: statement %d: its literals cannot be placed in its text", rp.path, st.ID)
	}
	if st.Prepared && len(rs.lits) > 0 {
		// A prepared statement's literals are fixed: they are filled in once, before it is
		// prepared, with values of their recorded lengths.
		var b strings.Builder
		last := 0
		for n, j := range rs.lits {
			v := st.Values[j]
			b.WriteString(text[last:rs.litAt[n]])
			b.WriteString(values.Literal(v.Literal, v.Type, values.Filler(cmp.Or(v.Type, "text"), int32(values.DefaultLen))))
			last = rs.litAt[n] + 1
		}
		b.WriteString(text[last:])
		rs.text, rs.lits, rs.litAt = b.String(), nil, nil
	}
	rp.stmts[st.ID] = rs
	return rs, nil
}

// table returns the replay's table for the captured ks.name, checked: every column's type
// must be one the replay can create and write.
func (rp *Replay) table(ks, name string, tables map[string]*replayTable) (*replayTable, error) {
	ct := rp.c.Table(ks, name)
	switch {
	case ct == nil:
		return nil, fmt.Errorf("capture file %s: table %s.%s has no schema in the capture", rp.path, ks, name)
	case ct.Error != "":
		return nil, fmt.Errorf("capture file %s: table %s.%s: the sidecar could not read its schema: %s", rp.path, ks, name, ct.Error)
	}
	t := &replayTable{captured: ct, keyspace: ks, name: name, sizes: map[string]int32{}, rows: map[int]int32{}, keyLens: map[int][]int32{}}
	if rp.owned != "" {
		t.keyspace = rp.owned
		rp.ksMap[ks] = rp.owned
		for _, o := range tables {
			if o.name == name && o.captured.Keyspace != ks {
				t.name = ks + "_" + name // two captured keyspaces with this table
				rp.tableNames[ks+"."+name] = cql.QuoteName(t.keyspace) + "." + cql.QuoteName(t.name)
			}
		}
	} else {
		rp.ksMap[ks] = ks
	}
	for _, c := range ct.Columns {
		if err := values.Check(c.Type); err != nil {
			return nil, fmt.Errorf("capture file %s: table %s.%s cannot be created for the replay: column %s has type %s: %v", rp.path, ks, name, c.Name, c.Type, err)
		}
		switch c.Kind {
		case capturefile.PartitionKey:
			t.pk = append(t.pk, c)
		case capturefile.Clustering:
			t.ck = append(t.ck, c)
		}
		if c.Type == "counter" {
			t.counter = true
		}
	}
	if len(t.pk) == 0 {
		return nil, fmt.Errorf("capture file %s: table %s.%s cannot be created for the replay: the capture names no partition key column", rp.path, ks, name)
	}
	byPos := func(a, b capturefile.Column) int { return a.Position - b.Position }
	slices.SortFunc(t.pk, byPos)
	slices.SortFunc(t.ck, byPos)
	return t, nil
}

// createTable returns the CREATE TABLE of t.
func (t *replayTable) createTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s.%s (", cql.QuoteName(t.keyspace), cql.QuoteName(t.name))
	for _, c := range t.captured.Columns {
		fmt.Fprintf(&b, "%s %s", cql.QuoteName(c.Name), c.Type)
		if c.Kind == capturefile.Static {
			b.WriteString(" STATIC")
		}
		b.WriteString(", ")
	}
	b.WriteString("PRIMARY KEY ((")
	for i, c := range t.pk {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(cql.QuoteName(c.Name))
	}
	b.WriteString(")")
	for _, c := range t.ck {
		b.WriteString(", " + cql.QuoteName(c.Name))
	}
	b.WriteString("))")
	var order []string
	for _, c := range t.ck {
		if strings.EqualFold(c.ClusteringOrder, "desc") {
			order = append(order, cql.QuoteName(c.Name)+" DESC")
		} else {
			order = append(order, cql.QuoteName(c.Name)+" ASC")
		}
	}
	if len(order) > 0 && slices.ContainsFunc(order, func(s string) bool { return strings.HasSuffix(s, "DESC") }) {
		b.WriteString(" WITH CLUSTERING ORDER BY (" + strings.Join(order, ", ") + ")")
	}
	return b.String()
}

// mapText returns st's text with its tables named as the replay creates them: in the
// replay's keyspace against a deployment (renamed when two captured keyspaces share a
// table name), and qualified when the statement named its table without a keyspace, so
// that it runs on any connection. Against a deployment it refuses a statement that would
// name a keyspace other than the replay's own.
func (rp *Replay) mapText(st *capturefile.Statement) (string, error) {
	text := st.Text
	var b strings.Builder
	last := 0
	var prev cqltext.Token
	named := func(ks, table string) string {
		if to, ok := rp.tableNames[ks+"."+table]; ok {
			return to
		}
		return cql.QuoteName(rp.ksMap[ks]) + "." + cql.QuoteName(table)
	}
	for t := cqltext.NextSignificant(text, 0); t.Kind != cqltext.EOF; t = cqltext.NextSignificant(text, t.End) {
		isName := t.Kind == cqltext.Ident || t.Kind == cqltext.QuotedIdent
		dot := cqltext.NextSignificant(text, t.End)
		switch {
		case isName && cqltext.IsPunct(text, dot, ".") && !cqltext.IsPunct(text, prev, "."):
			// ks.table
			ks := cqltext.Name(text, t)
			tt := cqltext.NextSignificant(text, dot.End)
			if tt.Kind != cqltext.Ident && tt.Kind != cqltext.QuotedIdent {
				break
			}
			if _, ok := rp.ksMap[ks]; !ok {
				if rp.owned != "" {
					return "", fmt.Errorf("replay: statement %d names keyspace %s, which the capture's schema does not hold: "+
						"against a deployment the replay writes only into --replay-keyspace %s", st.ID, ks, rp.owned)
				}
				break
			}
			b.WriteString(text[last:t.Start])
			b.WriteString(named(ks, cqltext.Name(text, tt)))
			last = tt.End
			prev = tt
			t = tt
			continue
		case isName && st.Table != "" && st.Keyspace != "" && cqltext.Name(text, t) == st.Table && !cqltext.IsPunct(text, prev, ".") &&
			(cqltext.IsKeyword(text, prev, "from") || cqltext.IsKeyword(text, prev, "into") ||
				cqltext.IsKeyword(text, prev, "update") || cqltext.IsKeyword(text, prev, "table")):
			// An unqualified table: qualified with the statement's keyspace.
			b.WriteString(text[last:t.Start])
			b.WriteString(named(st.Keyspace, st.Table))
			last = t.End
		}
		prev = t
	}
	b.WriteString(text[last:])
	return b.String(), nil
}

// sentKey appends to dst the values the replay sends for the partition key of part p of
// a request of st, whose keyed hash is key, each preceded by its length.
func sentKey(dst []byte, st *capturefile.Statement, p *capturefile.Part, key []byte) []byte {
	for comp, j := range st.PK {
		n := int32(-1)
		if j < len(p.Lens) {
			n = p.Lens[j]
		}
		v := values.Key(key, comp, st.Values[j].Type, n)
		dst = append(dst, byte(len(v)>>8), byte(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// keyHex returns a key's hash as the reports show it.
func keyHex(k []byte) string { return hex.EncodeToString(k) }

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
