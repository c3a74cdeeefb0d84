package capture

import (
	"encoding/hex"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/cql/cqltext"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// What the writer knows of the statements it has met: each gets a statement entry the
// first time, with its values described (from a prepared statement's bound variables, or
// from the text and the table's schema), and a cached info for its records.

// maxCached bounds the cache of statements by raw text or id; past it the cache starts
// afresh (the entries written stay valid).
const maxCached = 10000

// maxText bounds a statement's text in the file.
const maxText = 64 << 10

type catalog struct {
	// What the catalog uses of its writer, which is above it: whether values are kept, the
	// prepared-statement registry, the keyed hash of a partition key, a table's schema (read
	// once), and the file, where statements are defined.
	keep  bool
	reg   *tracing.Statements
	hash  func(dst []byte, vals [][]byte) []byte
	table func(ks, table string) *capturefile.Table
	out   *capturefile.Writer

	cache     map[string]*stmtInfo // by kind, keyspace in use and raw text, or by prepared id
	byText    map[string]uint32    // statement ids by their entry's identity
	next      uint32
	tables    map[string]*capturefile.Table
	keyspaces map[string]bool
	vals      [][]byte
	lens      []int32
	// Scratch, reused for each record: the cache key, and the parts' slices (the file's
	// writer copies a record at once).
	key     []byte
	partBuf []capturefile.Part
	slab    []int32
	keys    []byte
	kvals   [][]byte
}

// init makes st empty, for a writer that keeps values or not (keep), with what it uses of
// the writer.
func (st *catalog) init(keep bool, reg *tracing.Statements, hash func(dst []byte, vals [][]byte) []byte,
	table func(ks, table string) *capturefile.Table, out *capturefile.Writer) {
	st.keep, st.reg, st.hash, st.table, st.out = keep, reg, hash, table, out
	st.cache = map[string]*stmtInfo{}
	st.byText = map[string]uint32{}
	st.tables = map[string]*capturefile.Table{}
	st.keyspaces = map[string]bool{}
}

// stmtInfo is what a record of a statement needs.
type stmtInfo struct {
	id     uint32
	nbound int      // bound values that the statement's values start with; -1: unknown
	lits   [][]byte // the literals' values, serialized as bound values of their types
	pk     []int    // the values that make the partition key
	secret bool     // a role or user statement: no value, nor its length, is recorded
}

// parts fills rec's statement parts and query parameters from r, whose request the
// frame's view parsed at the connection's protocol version.
func (st *catalog) parts(r *Record, rec *capturefile.Record) error {
	st.partBuf, st.slab, st.keys, st.kvals = st.partBuf[:0], st.slab[:0], st.keys[:0], st.kvals[:0]
	req := &r.req
	if !req.Parsed() {
		return nil
	}
	ks := rec.Keyspace
	switch r.op {
	case cql.OpQuery, cql.OpExecute:
		var info *stmtInfo
		if r.op == cql.OpQuery {
			info = st.query(req.Query, ks, false)
		} else {
			info = st.prepared(req.ID, ks)
		}
		p := part{info: info}
		if !r.cut {
			st.params(req, rec)
			st.vals, st.lens = st.vals[:0], st.lens[:0]
			for _, v := range req.Params.Values {
				st.vals, st.lens = appendValue(st.vals, st.lens, v.Bytes, v.Unset)
			}
			p.vals, p.lens = st.vals, st.lens
		}
		st.partBuf = append(st.partBuf, st.part(p, r.cut))
		rec.Parts = st.partBuf
	case cql.OpPrepare:
		// The statement as EXECUTEs run it, when the answer gave its id.
		var info *stmtInfo
		if len(r.prepID) > 0 {
			info = st.prepared(r.prepID, ks)
		} else {
			info = st.query(req.Query, ks, true)
		}
		st.partBuf = append(st.partBuf, capturefile.Part{Statement: info.id})
		rec.Parts = st.partBuf
	case cql.OpBatch:
		st.batch(r, rec)
	}
	return nil
}

// params sets rec's query parameters from req's: the consistency and flags when they were
// read, the page size and serial consistency when the request was read whole.
func (st *catalog) params(req *cql.Request, rec *capturefile.Record) {
	rec.Consistency, rec.Serial, rec.PageSize, rec.QueryFlags = -1, -1, -1, 0
	if !req.HasParams {
		return
	}
	qp := &req.Params
	rec.Consistency, rec.QueryFlags = int(qp.Consistency), qp.Flags
	if req.Err != nil {
		return
	}
	if qp.HasPageSize() {
		rec.PageSize = qp.PageSize
	}
	if qp.HasSerialConsistency() {
		rec.Serial = int(qp.SerialConsistency)
	}
}

// part is one statement of a request, with its bound values as the request holds them.
type part struct {
	info *stmtInfo
	vals [][]byte // nil entries for null and unset values
	lens []int32
}

// part returns the file's part for p: the values' lengths (bound, then literals), their
// bytes with values=keep, and the keyed hash of the partition key.
func (st *catalog) part(p part, cut bool) capturefile.Part {
	info := p.info
	out := capturefile.Part{Statement: info.id}
	if cut {
		return out
	}
	n := len(p.lens) + len(info.lits)
	at := len(st.slab)
	st.slab = append(st.slab, p.lens...)
	for _, l := range info.lits {
		st.slab = append(st.slab, int32(len(l)))
	}
	out.Lens = st.slab[at:len(st.slab):len(st.slab)]
	if info.secret {
		for i := range out.Lens {
			if out.Lens[i] >= 0 {
				out.Lens[i] = capturefile.LenUnknown
			}
		}
		return out
	}
	if st.keep {
		// Only bound values: a literal is in the text already, unless it was redacted.
		out.Values = make([][]byte, n)
		copy(out.Values, p.vals)
	}
	st.kvals = st.kvals[:0]
	if len(info.pk) > 0 && (info.nbound < 0 || info.nbound == len(p.lens)) {
		for _, i := range info.pk {
			var v []byte
			switch {
			case i < len(p.vals):
				v = p.vals[i]
				if p.lens[i] < 0 {
					return out // a null key: no key
				}
			case i-len(p.vals) < len(info.lits):
				v = info.lits[i-len(p.vals)]
			default:
				return out
			}
			st.kvals = append(st.kvals, v)
		}
		at := len(st.keys)
		st.keys = st.hash(st.keys, st.kvals)
		out.Key = st.keys[at:len(st.keys):len(st.keys)]
	}
	return out
}

// batch fills rec from a BATCH: a part per statement, and the batch's parameters.
func (st *catalog) batch(r *Record, rec *capturefile.Record) {
	req := &r.req
	rec.BatchType = int(req.BatchType)
	for i := range req.Batch {
		bs := &req.Batch[i]
		var info *stmtInfo
		if bs.Prepared {
			info = st.prepared(bs.ID, rec.Keyspace)
		} else {
			info = st.query(bs.Query, rec.Keyspace, false)
		}
		p := part{info: info}
		for _, v := range bs.Values {
			p.vals, p.lens = appendValue(p.vals, p.lens, v.Bytes, v.Unset)
		}
		// The last statement read of a batch cut short may have lost values.
		cut := r.cut || req.Err != nil && i == len(req.Batch)-1
		st.partBuf = append(st.partBuf, st.part(p, cut))
		rec.Parts = st.partBuf
	}
	if req.Err != nil || r.cut {
		return
	}
	rec.Consistency, rec.QueryFlags = int(req.Params.Consistency), req.Params.Flags
	if req.Params.HasSerialConsistency() {
		rec.Serial = int(req.Params.SerialConsistency)
	}
}

func appendValue(vals [][]byte, lens []int32, v []byte, unset bool) ([][]byte, []int32) {
	switch {
	case unset:
		return append(vals, nil), append(lens, capturefile.LenUnset)
	case v == nil:
		return append(vals, nil), append(lens, capturefile.LenNull)
	}
	return append(vals, v), append(lens, int32(len(v)))
}

// cacheKey sets st.key to kind, the keyspace in use and text, and returns the cached info
// of that key, or nil.
func (st *catalog) cacheKey(kind byte, ks string, text []byte) *stmtInfo {
	st.key = append(append(append(append(st.key[:0], kind, 0), ks...), 0), text...)
	return st.cache[string(st.key)]
}

// remember caches info under st.key.
func (st *catalog) remember(info *stmtInfo) *stmtInfo {
	if len(st.cache) >= maxCached {
		st.cache = map[string]*stmtInfo{}
	}
	st.cache[string(st.key)] = info
	return info
}

// prepared returns the info of the prepared statement id, from the sidecar's registry.
func (st *catalog) prepared(id []byte, ksInUse string) *stmtInfo {
	if info := st.cacheKey('p', ksInUse, id); info != nil {
		return info
	}
	var ps *tracing.Statement
	if reg := st.reg; reg != nil {
		if s := reg.Lookup(id); s != nil && s.Query != "" {
			ps = s
		}
	}
	if ps == nil {
		// Prepared before the sidecar saw it: known by id only, and not replayable.
		def := capturefile.Statement{Prepared: true, Verb: "other", Text: "<prepared statement 0x" + hex.EncodeToString(id) + ">"}
		return st.remember(&stmtInfo{id: st.define("p\x00"+def.Text, def), nbound: -1})
	}
	ks := ksInUse
	if ps.Keyspace != "" {
		ks = ps.Keyspace
	}
	if len(ps.Binds) > 0 && ps.Binds[0].Keyspace != "" {
		ks = ps.Binds[0].Keyspace
	}
	binds := ps.Binds
	if binds == nil {
		binds = []cql.ColumnSpec{} // known to have none
	}
	key := append([]byte(nil), st.key...) // describe may read a schema, not the key
	info := st.describe(ps.Query, ks, true, binds, ps.PKIndexes)
	st.key = key
	return st.remember(info)
}

// query returns the info of a statement sent as text: a QUERY's or a batch's, or, with
// prepare, a PREPARE's whose answer did not say its id (its bound variables are then
// unknown).
func (st *catalog) query(text []byte, ksInUse string, prepare bool) *stmtInfo {
	kind := byte('q')
	if prepare {
		kind = 'P'
	}
	if info := st.cacheKey(kind, ksInUse, text); info != nil {
		return info
	}
	key := append([]byte(nil), st.key...)
	info := st.describe(string(text), ksInUse, prepare, nil, nil)
	st.key = key
	return st.remember(info)
}

// describe makes the info of a statement's text, and its entry when it is new. binds are
// a prepared statement's bound variables, when known; pk its partition key indexes.
func (st *catalog) describe(raw, ks string, prepared bool, binds []cql.ColumnSpec, pkIdx []uint16) *stmtInfo {
	raw = raw[:min(len(raw), maxText)]
	norm, _ := cql.NormalizeQuery(raw, st.keep, 0)
	sl := slotsOf(raw, norm)
	tks, table := statements.Target(norm)
	if tks == "" && table != "" {
		tks = ks
	}
	def := capturefile.Statement{Prepared: prepared, Text: norm, Verb: verbOf(norm), Keyspace: tks, Table: table,
		System: statements.IsSystemKeyspace(tks)}
	var tbl *capturefile.Table
	if table != "" && !def.System && tks != "" {
		tbl = st.table(tks, table)
	}
	cols := slotColumns(norm, sl)
	info := &stmtInfo{secret: roleStatement(norm)}
	info.nbound = boundValues(&def, sl, cols, tbl, prepared, binds)
	nbound := len(def.Values)
	info.lits = literalValues(&def, sl, cols, tbl)
	info.pk = partitionKey(&def, tbl, pkIdx)
	def.PK = info.pk
	// Values past the bound ones belong to literals; an unknown number of bound values
	// (a prepared statement not seen prepared) leaves them unreliable.
	if prepared && binds == nil {
		info.lits, info.pk, def.PK = nil, nil, nil
		def.Values = def.Values[:nbound]
		info.nbound = -1
	}
	ident := "q"
	switch {
	case prepared && binds == nil:
		ident = "P" // apart from the same text's entry with its bound variables
	case prepared:
		ident = "p"
	}
	info.id = st.define(ident+"\x00"+tks+"\x00"+norm, def)
	return info
}

// boundValues appends to def's values those bound to it, in their order: one for each
// slot sl that is not a literal, of the column cols names for it, typed by the table's
// schema tbl (nil when unknown) or, prepared, by its bound variables binds; a prepared
// statement whose bound variables are known has exactly those. It returns how many values
// are bound, -1 when that is unknown (prepared, binds unknown).
func boundValues(def *capturefile.Statement, sl []slot, cols []string, tbl *capturefile.Table, prepared bool, binds []cql.ColumnSpec) int {
	nb := 0
	for i, s := range sl {
		if s.literal != "" {
			continue
		}
		v := capturefile.Value{Column: cols[i], At: -1}
		if prepared && nb < len(binds) {
			v.Column, v.Type = binds[nb].Name, binds[nb].Type.String()
		} else {
			v.Type = columnType(tbl, v.Column)
		}
		def.Values = append(def.Values, v)
		nb++
	}
	switch {
	case prepared && binds != nil:
		for ; nb < len(binds); nb++ {
			def.Values = append(def.Values, capturefile.Value{Column: binds[nb].Name, Type: binds[nb].Type.String(), At: -1})
		}
		def.Values = def.Values[:len(binds)]
		return len(binds)
	case !prepared:
		return nb
	}
	return -1
}

// literalValues appends to def's values the literals of slots sl, of the columns cols
// names, typed by the table's schema tbl (nil when unknown) or else by their kind, and
// returns their values serialized as bound values of those types.
func literalValues(def *capturefile.Statement, sl []slot, cols []string, tbl *capturefile.Table) [][]byte {
	var lits [][]byte
	for i, s := range sl {
		if s.literal == "" {
			continue
		}
		typ := columnType(tbl, cols[i])
		if typ == "" {
			typ = literalType(s.literal)
		}
		def.Values = append(def.Values, capturefile.Value{Column: cols[i], Type: typ, Literal: s.literal, At: s.at})
		lits = append(lits, literalValue(s.text, s.literal, typ))
	}
	return lits
}

// partitionKey returns the values of def that make the partition key: a prepared
// statement's own indexes pkIdx, else the values whose columns are the partition key of
// the table tbl (nil when unknown); nil when one is past def's values.
func partitionKey(def *capturefile.Statement, tbl *capturefile.Table, pkIdx []uint16) []int {
	var pk []int
	if len(pkIdx) > 0 {
		for _, i := range pkIdx {
			pk = append(pk, int(i))
		}
	} else if tbl != nil && def.Verb != "ddl" {
		pk = keyValues(tbl, def.Values)
	}
	if len(pk) > 0 && pk[len(pk)-1] >= len(def.Values) {
		return nil
	}
	return pk
}

// define returns the id of the statement entry ident, writing def as a new entry first.
func (st *catalog) define(ident string, def capturefile.Statement) uint32 {
	if id, ok := st.byText[ident]; ok {
		return id
	}
	st.next++
	def.ID = st.next
	st.byText[ident] = def.ID
	st.out.Statement(def)
	return def.ID
}

// keyValues returns the indexes of vals that give each partition key column of t once, by
// equality, in key order; nil when one is missing or given more than once.
func keyValues(t *capturefile.Table, vals []capturefile.Value) []int {
	var key []capturefile.Column
	for _, c := range t.Columns {
		if c.Kind == capturefile.PartitionKey {
			key = append(key, c)
		}
	}
	if len(key) == 0 {
		return nil
	}
	slices.SortFunc(key, func(a, b capturefile.Column) int { return a.Position - b.Position })
	out := make([]int, 0, len(key))
	for _, c := range key {
		at := -1
		for i, v := range vals {
			if v.Column == c.Name {
				if at >= 0 {
					return nil
				}
				at = i
			}
		}
		if at < 0 {
			return nil
		}
		out = append(out, at)
	}
	return out
}

// columnType returns the CQL type of column name in t: the table's, or that of a LIMIT,
// TTL or TIMESTAMP clause.
func columnType(t *capturefile.Table, name string) string {
	switch name {
	case "[limit]", "[ttl]":
		return "int"
	case "[timestamp]":
		return "bigint"
	case "":
		return ""
	}
	if t == nil {
		return ""
	}
	for _, c := range t.Columns {
		if c.Name == name {
			return c.Type
		}
	}
	return ""
}

// verbOf returns what a statement does, from its first word.
func verbOf(text string) string {
	t := cqltext.NextSignificant(text, 0)
	for _, v := range []string{"select", "insert", "update", "delete", "use"} {
		if cqltext.IsKeyword(text, t, v) {
			return v
		}
	}
	switch {
	case cqltext.IsKeyword(text, t, "begin"), cqltext.IsKeyword(text, t, "apply"):
		return "batch"
	case cqltext.IsKeyword(text, t, "create"), cqltext.IsKeyword(text, t, "alter"), cqltext.IsKeyword(text, t, "drop"),
		cqltext.IsKeyword(text, t, "truncate"):
		return "ddl"
	}
	return "other"
}

// roleStatement reports whether text creates or alters a role or user, whose values are
// passwords.
func roleStatement(text string) bool {
	t := cqltext.NextSignificant(text, 0)
	if !cqltext.IsKeyword(text, t, "create") && !cqltext.IsKeyword(text, t, "alter") {
		return false
	}
	n := cqltext.NextSignificant(text, t.End)
	return cqltext.IsKeyword(text, n, "role") || cqltext.IsKeyword(text, n, "user")
}

// slot is one value place of a statement's normalized text: a bind marker, or a literal
// that normalization replaced by '?'.
type slot struct {
	at      int    // offset of the '?' in the normalized text; -1 for a named marker
	tok     int    // index of its token among the normalized text's significant tokens
	literal string // the literal's kind, "" for a bind marker
	text    string // the literal as written in the raw text
}

// slotsOf walks raw and its normalized form together and returns the value places of the
// normalized text, in order. Normalization changes literals only (a literal, or a
// collection of literals, becomes one '?'), so the two texts have the same tokens
// elsewhere; at the first difference that is not that, it stops.
func slotsOf(raw, norm string) []slot {
	rs, ns := cqltext.NewScanner(raw), cqltext.NewScanner(norm)
	next := func(s *cqltext.Scanner[string]) cqltext.Token {
		for {
			t := s.Next()
			if t.Kind != cqltext.Space && t.Kind != cqltext.Comment {
				return t
			}
		}
	}
	var out []slot
	for idx := 0; ; idx++ {
		r, n := next(&rs), next(&ns)
		if n.Kind == cqltext.EOF || r.Kind == cqltext.EOF {
			return out
		}
		rt, nt := raw[r.Start:r.End], norm[n.Start:n.End]
		switch {
		case rt == nt && nt == "?":
			out = append(out, slot{at: n.Start, tok: idx})
		case rt == nt && nt == ":":
			// A named bind marker, :name.
			out = append(out, slot{at: -1, tok: idx})
		case rt == nt:
		case nt == "?" && (rt == "[" || rt == "{"):
			start, depth := r.Start, 1
			for depth > 0 {
				t := next(&rs)
				if t.Kind == cqltext.EOF {
					return out
				}
				switch raw[t.Start:t.End] {
				case "[", "{":
					depth++
				case "]", "}":
					depth--
				}
				r = t
			}
			kind := "collection"
			if rt == "[" {
				kind = "list"
			}
			out = append(out, slot{at: n.Start, tok: idx, literal: kind, text: raw[start:r.End]})
		case nt == "?":
			out = append(out, slot{at: n.Start, tok: idx, literal: literalKind(raw, r), text: rt})
		default:
			return out
		}
	}
}

// literalKind names the kind of a literal token.
func literalKind(text string, t cqltext.Token) string {
	switch t.Kind {
	case cqltext.String:
		return "string"
	case cqltext.Integer:
		return "integer"
	case cqltext.Float:
		return "float"
	case cqltext.Blob:
		return "blob"
	case cqltext.UUID:
		return "uuid"
	case cqltext.Duration:
		return "duration"
	}
	if cqltext.IsKeyword(text, t, "true") || cqltext.IsKeyword(text, t, "false") {
		return "boolean"
	}
	return "float" // NaN, Infinity
}

// literalType is the CQL type a literal of kind most likely has when its column is not
// known.
func literalType(kind string) string {
	switch kind {
	case "string":
		return "text"
	case "integer":
		return "int"
	case "float":
		return "double"
	case "list":
		return "list<text>"
	case "collection":
		return "set<text>"
	}
	return kind // blob, uuid, boolean, duration
}

// literalValue returns a literal's value serialized as a bound value of typ, so that the
// same key hashes alike bound or written in the text; the literal's own text for a type it
// does not convert.
func literalValue(text, kind, typ string) []byte {
	switch kind {
	case "string":
		if strings.HasPrefix(text, "$$") && strings.HasSuffix(text, "$$") && len(text) >= 4 {
			return []byte(text[2 : len(text)-2])
		}
		if len(text) >= 2 {
			return []byte(strings.ReplaceAll(text[1:len(text)-1], "''", "'"))
		}
	case "integer":
		var size int
		switch typ {
		case "int", "date":
			size = 4
		case "bigint", "counter", "timestamp", "time":
			size = 8
		case "smallint":
			size = 2
		case "tinyint":
			size = 1
		case "varint":
			if b, ok := new(big.Int).SetString(text, 10); ok {
				return varint(b)
			}
		}
		if v, err := strconv.ParseInt(text, 10, 64); err == nil && size > 0 {
			b := cql.AppendLong(make([]byte, 0, 8), v)
			return b[8-size:]
		}
	case "uuid":
		if b, err := hex.DecodeString(strings.ReplaceAll(text, "-", "")); err == nil && len(b) == 16 {
			return b
		}
	case "blob":
		if b, err := hex.DecodeString(text[2:]); err == nil {
			return b
		}
	case "boolean":
		if strings.EqualFold(text, "true") {
			return []byte{1}
		}
		return []byte{0}
	}
	return []byte(text)
}

// varint returns b as a CQL varint: big-endian two's complement, in the fewest bytes.
func varint(b *big.Int) []byte {
	if b.Sign() >= 0 {
		out := b.Bytes()
		if len(out) == 0 || out[0]&0x80 != 0 {
			out = append([]byte{0}, out...)
		}
		return out
	}
	// Negative: 2^(8n) + b for the smallest n that keeps the sign bit.
	n := (b.BitLen() + 8) / 8
	m := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
	out := m.Add(m, b).Bytes()
	for len(out) < n {
		out = append([]byte{0xff}, out...)
	}
	return out
}

// slotColumns returns the column each slot of norm is for (see capturefile.Value.Column),
// "" when it cannot be told: the column compared with (c = ?, c < ?, c IN (?, ?)), set
// (SET c = ?, c = c + ?) or inserted (INSERT INTO t (a, b) VALUES (?, ?)), or [limit],
// [ttl] and [timestamp].
func slotColumns(norm string, sl []slot) []string {
	ts := slotTokens{norm: norm}
	for t := cqltext.NextSignificant(norm, 0); t.Kind != cqltext.EOF; t = cqltext.NextSignificant(norm, t.End) {
		ts.toks = append(ts.toks, t)
	}
	insertCols, valuesAt := ts.insertColumns()
	out := make([]string, len(sl))
	for k, s := range sl {
		if valuesAt >= 0 && s.tok > valuesAt {
			if pos, ok := ts.valuePos(valuesAt, s.tok); ok && pos < len(insertCols) {
				out[k] = insertCols[pos]
				continue
			}
		}
		out[k] = ts.column(s.tok)
	}
	return out
}

// slotTokens are the significant tokens of a normalized statement, norm.
type slotTokens struct {
	norm string
	toks []cqltext.Token
}

// kw reports whether token i is keyword w.
func (ts slotTokens) kw(i int, w string) bool {
	return i >= 0 && i < len(ts.toks) && cqltext.IsKeyword(ts.norm, ts.toks[i], w)
}

// punct reports whether token i is punctuation p.
func (ts slotTokens) punct(i int, p string) bool {
	return i >= 0 && i < len(ts.toks) && cqltext.IsPunct(ts.norm, ts.toks[i], p)
}

// name returns the name token i spells, or "" when it is no name.
func (ts slotTokens) name(i int) string {
	if i < 0 || i >= len(ts.toks) || ts.toks[i].Kind != cqltext.Ident && ts.toks[i].Kind != cqltext.QuotedIdent {
		return ""
	}
	return cqltext.Name(ts.norm, ts.toks[i])
}

// insertColumns returns an INSERT's columns, and the token where its VALUES list opens;
// -1 when the statement is no INSERT, or has no VALUES list.
func (ts slotTokens) insertColumns() (cols []string, valuesAt int) {
	if !ts.kw(0, "insert") {
		return nil, -1
	}
	i := 0
	for i < len(ts.toks) && !ts.punct(i, "(") {
		i++
	}
	for i++; i < len(ts.toks) && !ts.punct(i, ")"); i++ {
		if n := ts.name(i); n != "" {
			cols = append(cols, n)
		}
	}
	for ; i < len(ts.toks); i++ {
		if ts.kw(i, "values") && ts.punct(i+1, "(") {
			return cols, i + 1
		}
	}
	return cols, -1
}

// valuePos returns the place of the value at token j in the VALUES list opened at token
// valuesAt, at its first level; ok is false when j is nested in a value.
func (ts slotTokens) valuePos(valuesAt, j int) (pos int, ok bool) {
	depth := 0
	for i := valuesAt + 1; i < j; i++ {
		switch {
		case ts.punct(i, "(") || ts.punct(i, "[") || ts.punct(i, "{"):
			depth++
		case ts.punct(i, ")") || ts.punct(i, "]") || ts.punct(i, "}"):
			depth--
		case depth == 0 && ts.punct(i, ","):
			pos++
		}
	}
	return pos, depth == 0
}

// column returns the column of the slot at token j, told by the tokens before it, or "".
func (ts slotTokens) column(j int) string {
	switch {
	case ts.kw(j-1, "limit"):
		return "[limit]"
	case ts.kw(j-1, "ttl"):
		return "[ttl]"
	case ts.kw(j-1, "timestamp") && (ts.kw(j-2, "using") || ts.kw(j-2, "and")):
		return "[timestamp]"
	case ts.punct(j-1, "=") || ts.punct(j-1, "<") || ts.punct(j-1, ">") || ts.punct(j-1, "<=") || ts.punct(j-1, ">=") ||
		ts.punct(j-1, "!=") || ts.kw(j-1, "contains"):
		return ts.name(j - 2)
	case ts.punct(j-1, "+") || ts.punct(j-1, "-"):
		if ts.punct(j-3, "=") {
			return ts.name(j - 4)
		}
	case ts.punct(j-1, "(") || ts.punct(j-1, ","):
		// c IN (?, ?): back to the list's opening.
		i := j - 1
		for i >= 0 && !ts.punct(i, "(") {
			i--
		}
		if ts.kw(i-1, "in") {
			return ts.name(i - 2)
		}
	}
	return ""
}
