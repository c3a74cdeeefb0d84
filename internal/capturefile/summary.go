package capturefile

import (
	"cmp"
	"encoding/hex"
	"math"
	"slices"
	"strconv"

	"github.com/tracecar/tracecar/internal/cql"
)

// Summary is what `tracecar capture stats` shows of a capture.
type Summary struct {
	Records int     `json:"records"`
	Dropped uint64  `json:"dropped"`
	SpanS   float64 `json:"span_s"`
	// OpRate is the rate of the requests that run statements, over the span between the
	// first and the last of them.
	OpRate float64 `json:"op_rate"`
	// Opcodes counts the requests by opcode.
	Opcodes map[string]int `json:"opcodes"`
	// ProtocolVersions counts the requests by the protocol version of their connection
	// ("v4", "v5"; "unknown" in a file that does not say).
	ProtocolVersions map[string]int `json:"protocol_versions"`
	// Mix counts the statements run by verb (select, insert, update, delete, ...): batches
	// count each of their statements.
	Mix        map[string]int     `json:"mix"`
	Reads      int                `json:"reads"`
	Writes     int                `json:"writes"`
	Errors     int                `json:"errors"`
	Statements []StatementSummary `json:"statements"`
	Keys       KeySummary         `json:"keys"`
	// Latency is the latency the sidecar saw, µs, over the requests that run statements.
	Latency   Percentiles `json:"latency_us"`
	ReqBytes  Percentiles `json:"request_bytes"`
	RespBytes Percentiles `json:"response_bytes"`
	// Values are the bound values' sizes, by CQL type.
	Values []TypeSizes `json:"values"`
}

// StatementSummary is one statement's share of a capture.
type StatementSummary struct {
	ID       uint32  `json:"id"`
	Text     string  `json:"text"`
	Verb     string  `json:"verb"`
	Prepared bool    `json:"prepared"`
	Count    int     `json:"count"`
	SharePct float64 `json:"share_pct"`
	Errors   int     `json:"errors"`
	Rows     int64   `json:"rows"`
	P50US    int64   `json:"p50_us"`
	P99US    int64   `json:"p99_us"`
	// Consistency counts the statement's runs by consistency level, and PageSizes by page
	// size ("none" when the request set none). A batch's statements count the batch's
	// consistency, and no page size.
	Consistency map[string]int `json:"consistency"`
	PageSizes   map[string]int `json:"page_sizes"`
}

// KeySummary is how the partition keys repeat.
type KeySummary struct {
	// WithKey counts the statements run whose partition key is known.
	WithKey  int        `json:"with_key"`
	Distinct int        `json:"distinct"`
	Top      []KeyCount `json:"top"`
}

// KeyCount is one key's count: the hex of its keyed hash, never its value.
type KeyCount struct {
	Key      string  `json:"key"`
	Count    int     `json:"count"`
	SharePct float64 `json:"share_pct"`
}

// Percentiles of a set of figures.
type Percentiles struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   int64   `json:"p50"`
	P95   int64   `json:"p95"`
	P99   int64   `json:"p99"`
	P999  int64   `json:"p999"`
	Max   int64   `json:"max"`
}

// TypeSizes are the sizes of the bound values of one type.
type TypeSizes struct {
	Type    string  `json:"type"`
	Count   int     `json:"count"`
	Nulls   int     `json:"nulls"`
	MeanLen float64 `json:"mean_len"`
	MaxLen  int32   `json:"max_len"`
}

// PercentilesOf returns the percentiles of v, which it sorts.
func PercentilesOf(v []int64) Percentiles {
	p := Percentiles{Count: len(v)}
	if len(v) == 0 {
		return p
	}
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	at := func(q float64) int64 {
		i := int(math.Ceil(q*float64(len(v)))) - 1
		return v[min(max(i, 0), len(v)-1)]
	}
	p.Mean = sum / float64(len(v))
	p.P50, p.P95, p.P99, p.P999, p.Max = at(0.50), at(0.95), at(0.99), at(0.999), v[len(v)-1]
	return p
}

// Reading reports whether a verb reads rows, and Writing whether it writes them.
func Reading(verb string) bool { return verb == "select" }

// Writing reports whether a verb writes rows.
func Writing(verb string) bool {
	return verb == "insert" || verb == "update" || verb == "delete" || verb == "batch"
}

// protocolName names protocol version v as a summary counts it.
func protocolName(v byte) string {
	if v == 0 {
		return "unknown"
	}
	return "v" + strconv.Itoa(int(v))
}

// pageSizeName names a page size as a summary counts it.
func pageSizeName(n int32) string {
	if n < 0 {
		return "none"
	}
	return strconv.Itoa(int(n))
}

// TopKeys is how many keys Summarize lists.
const TopKeys = 10

// Summarize returns the summary of c.
func Summarize(c *Capture) Summary {
	sm := summarizer{s: Summary{Records: len(c.Records), Dropped: c.End.Dropped, Opcodes: map[string]int{}, Mix: map[string]int{},
		ProtocolVersions: map[string]int{}}, byID: map[uint32]*stmtAcc{}, keys: map[string]int{},
		sizes: map[string]*TypeSizes{}, first: -1}
	for i := range c.Records {
		sm.add(c, &c.Records[i])
	}
	sm.statements()
	sm.topKeys()
	sm.valueSizes()
	s := &sm.s
	if sm.ran > 0 {
		s.SpanS = float64(sm.last-sm.first) / 1e6
		if s.SpanS > 0 {
			s.OpRate = float64(sm.ran) / s.SpanS
		}
	}
	s.Latency, s.ReqBytes, s.RespBytes = PercentilesOf(sm.lat), PercentilesOf(sm.req), PercentilesOf(sm.resp)
	return sm.s
}

// summarizer is the summary of a capture as Summarize reads its records.
type summarizer struct {
	s     Summary
	byID  map[uint32]*stmtAcc   // the statements run, by id
	keys  map[string]int        // the partition keys written or read, with their count
	sizes map[string]*TypeSizes // the bound values' sizes, by type
	lat   []int64               // the statements' latencies, µs
	req   []int64               // every request's size
	resp  []int64               // every response's size
	first int64                 // when the first statement ran (µs), or -1
	last  int64                 // when the last one ran
	ran   int                   // how many records ran statements
}

// stmtAcc is a statement's summary, with its latencies as they are read.
type stmtAcc struct {
	StatementSummary
	lat []int64
}

// add counts record r of c: its opcode, protocol and sizes, and its statements.
func (sm *summarizer) add(c *Capture, r *Record) {
	sm.s.Opcodes[cql.Opcode(r.Opcode).String()]++
	sm.s.ProtocolVersions[protocolName(r.ProtocolVersion)]++
	sm.req = append(sm.req, int64(r.ReqBytes))
	sm.resp = append(sm.resp, int64(r.RespBytes))
	if r.RespOpcode == OpError {
		sm.s.Errors++
	}
	if len(r.Parts) == 0 || r.Opcode == byte(cql.OpPrepare) {
		return
	}
	sm.ran++
	if sm.first < 0 {
		sm.first = r.AtUS
	}
	sm.last = max(sm.last, r.AtUS)
	sm.lat = append(sm.lat, r.LatencyUS)
	for _, p := range r.Parts {
		sm.addPart(c.Statements[p.Statement], r, p)
	}
}

// addPart counts part p of record r, a run of statement st (nil when the capture does not
// know it): the mix, the statement's own summary, the key and the bound values.
func (sm *summarizer) addPart(st *Statement, r *Record, p Part) {
	verb := "other"
	if st != nil {
		verb = st.Verb
	}
	sm.s.Mix[verb]++
	switch {
	case Reading(verb):
		sm.s.Reads++
	case Writing(verb):
		sm.s.Writes++
	}
	a := sm.statement(p.Statement, st, verb)
	a.Count++
	if r.Consistency >= 0 {
		a.Consistency[cql.Consistency(r.Consistency).String()]++
	}
	if r.Opcode != byte(cql.OpBatch) {
		a.PageSizes[pageSizeName(r.PageSize)]++
	}
	if r.RespOpcode == OpError {
		a.Errors++
	}
	if r.Rows > 0 {
		a.Rows += int64(r.Rows)
	}
	a.lat = append(a.lat, r.LatencyUS)
	if p.Key != nil {
		sm.keys[string(p.Key)]++
		sm.s.Keys.WithKey++
	}
	if st != nil {
		sm.addSizes(st, p.Lens)
	}
}

// statement returns the summary of statement id (st, nil when unknown), new at its first
// run.
func (sm *summarizer) statement(id uint32, st *Statement, verb string) *stmtAcc {
	if a := sm.byID[id]; a != nil {
		return a
	}
	a := &stmtAcc{StatementSummary: StatementSummary{ID: id, Verb: verb,
		Consistency: map[string]int{}, PageSizes: map[string]int{}}}
	if st != nil {
		a.Text, a.Prepared = st.Text, st.Prepared
	} else {
		a.Text = "<unknown statement>"
	}
	sm.byID[id] = a
	return a
}

// addSizes counts the sizes of the values bound to statement st, lens (a negative one as
// a null), by type; the statement's literals are not bound.
func (sm *summarizer) addSizes(st *Statement, lens []int32) {
	for j, n := range lens {
		if j >= len(st.Values) || st.Values[j].Literal != "" {
			continue
		}
		t := cmp.Or(st.Values[j].Type, "unknown")
		ts := sm.sizes[t]
		if ts == nil {
			ts = &TypeSizes{Type: t}
			sm.sizes[t] = ts
		}
		ts.Count++
		if n < 0 {
			ts.Nulls++
			continue
		}
		ts.MeanLen += float64(n)
		ts.MaxLen = max(ts.MaxLen, n)
	}
}

// statements lists the statements run, the most run first, with their latencies and share.
func (sm *summarizer) statements() {
	total := 0
	for _, a := range sm.byID {
		total += a.Count
	}
	for _, a := range sm.byID {
		p := PercentilesOf(a.lat)
		a.P50US, a.P99US = p.P50, p.P99
		if total > 0 {
			a.SharePct = 100 * float64(a.Count) / float64(total)
		}
		sm.s.Statements = append(sm.s.Statements, a.StatementSummary)
	}
	slices.SortFunc(sm.s.Statements, func(a, b StatementSummary) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.ID, b.ID))
	})
}

// topKeys counts the distinct keys and lists the TopKeys most used.
func (sm *summarizer) topKeys() {
	k := &sm.s.Keys
	k.Distinct = len(sm.keys)
	for key, n := range sm.keys {
		k.Top = append(k.Top, KeyCount{Key: hex.EncodeToString([]byte(key)), Count: n,
			SharePct: 100 * float64(n) / float64(k.WithKey)})
	}
	slices.SortFunc(k.Top, func(a, b KeyCount) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key)) })
	if len(k.Top) > TopKeys {
		k.Top = k.Top[:TopKeys]
	}
}

// valueSizes lists the bound values' sizes by type, with the mean length of the non-null.
func (sm *summarizer) valueSizes() {
	for _, ts := range sm.sizes {
		if n := ts.Count - ts.Nulls; n > 0 {
			ts.MeanLen /= float64(n)
		}
		sm.s.Values = append(sm.s.Values, *ts)
	}
	slices.SortFunc(sm.s.Values, func(a, b TypeSizes) int { return cmp.Compare(a.Type, b.Type) })
}
