package statements

import (
	"encoding/hex"
	"math"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// The data path: what Request and Response do per request, and the entries they find.

// Ticket carries what Request learnt about a request to its Response. The zero Ticket is
// inactive: its response needs nothing.
type Ticket struct {
	e        *Entry
	floor    *Entry // the statement whose floor trace this request takes
	prepText string // a PREPARE's query text
	start    int64
	active   bool
}

// Active reports whether Response must be called for the ticket's response.
func (t Ticket) Active() bool { return t.active }

// Floor returns the statement whose floor trace the request takes, or nil: the caller
// traces the request fully and hands the entry to the trace, which calls its FloorTraced.
func (t Ticket) Floor() *Entry { return t.floor }

// WantsBody reports whether Response reads the response (Frame.Response) with opcode op:
// the error code of an ERROR, the id of a PREPARE's result and the row count of a RESULT;
// a compressed RESULT other than a Prepared one is read from the start of its body.
func (t Ticket) WantsBody(op cql.Opcode) bool {
	return t.active && (op == cql.OpError || op == cql.OpResult)
}

// Request sees a request that is forwarded to the node, through the view f that the proxy
// decoded it into, and now, the monotonic time of its arrival. It reads the statement from
// the view, which decompresses the body at most once for every reader of the frame.
func (s *Stats) Request(f *cql.Frame, now int64) Ticket {
	op := f.Header.Opcode
	if op == cql.OpPrepare {
		if st, ok := f.Statement(); ok {
			return Ticket{prepText: string(st.Query), active: true}
		}
		return Ticket{}
	}
	on := s.on.Load()
	if !on && !s.floor.on.Load() {
		return Ticket{}
	}
	req, ok := f.Request()
	if !ok {
		return Ticket{}
	}
	var e *Entry
	var p params
	switch op {
	case cql.OpQuery, cql.OpExecute:
		if op == cql.OpQuery {
			e = s.queryEntry(req.Query)
		} else {
			e = s.executeEntry(req.ID)
		}
		p = paramsOf(req)
	case cql.OpBatch:
		if e, p = s.batchEntry(req); e == nil {
			return Ticket{}
		}
	default:
		return Ticket{}
	}
	var fl *Entry
	if s.floor.on.Load() && e.take(now) {
		fl = e
	}
	if !on {
		if fl == nil && now-e.last.Load() > int64(floorSeen) {
			e.last.Store(now) // seen: the floor's arming looks for it
		}
		return Ticket{floor: fl}
	}
	if op == cql.OpQuery && p.cl != 0xffff && e.shape.dmlOrSelect() && !e.shape.system && (p.hasValues || e.literals()) {
		e.count(kindUnprepared)
	}
	e.cls[clIndex(p.cl)].Add(1)
	if !e.shape.system {
		s.countRequest(e, p)
	}
	return Ticket{e: e, floor: fl, start: now, active: true}
}

// floorSeen is how often a statement's last-seen time is stored while only the trace floor
// needs it: the arming only asks whether it was seen since its last trace.
const floorSeen = 100 * time.Millisecond

// countRequest counts the anti-patterns that depend on one request's parameters.
func (s *Stats) countRequest(e *Entry, p params) {
	if e.shape.verb == verbSelect && p.pageSize <= 0 && p.cl != 0xffff {
		e.count(kindUnpagedRead)
	}
	switch p.cl {
	case cql.All:
		e.count(kindCLAll)
	case cql.Any:
		e.count(kindCLAny)
	case cql.Serial, cql.LocalSerial:
		if !e.shape.lwt {
			e.count(kindSerialWithoutLWT)
		}
	}
	if e.shape.allowFiltering {
		e.count(kindAllowFiltering)
	}
	if e.shape.fullScan {
		e.count(kindFullScan)
	}
	if e.shape.selectStar && e.cols > selectStarColumns {
		e.count(kindSelectStar)
	}
}

// Response sees the response to a request whose Ticket is active, through the view f that
// the proxy decoded it into, and now, the monotonic time it arrived. It reads only what it
// needs of the body: nothing for most responses, the start of a compressed RESULT when
// that is enough to count its rows (unless another reader has decompressed it whole).
func (s *Stats) Response(t Ticket, f *cql.Frame, now int64) {
	h := f.Header
	var r *cql.Response
	if t.WantsBody(h.Opcode) {
		r = f.Response() // read once for every reader of the frame
	}
	if t.prepText != "" {
		if r != nil && r.Prepared.ID != nil {
			s.learn(r.Prepared.ID, t.prepText, r.Prepared.ResultColumns)
		}
		return
	}
	e := t.e
	if e == nil {
		return
	}
	us := uint64(0)
	if d := now - t.start; d > 0 {
		us = uint64(d / 1000)
	}
	e.calls.Add(1)
	e.totalUS.Add(us)
	for m := e.maxUS.Load(); us > m && !e.maxUS.CompareAndSwap(m, us); m = e.maxUS.Load() {
	}
	e.hist[bucketOf(us)].Add(1)
	e.last.Store(now)
	switch {
	case r == nil:
	case h.Opcode == cql.OpError:
		if r.ErrorRead() {
			e.errs[errIndex(r.ErrCode)].Add(1)
		}
	case r.Rows >= 0:
		e.rows.Add(uint64(r.Rows))
	}
}

// learn remembers a prepared statement's text by id.
func (s *Stats) learn(id []byte, text string, cols int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.prep[string(id)]; ok && p.text == text {
		p.cols = cols
		return
	}
	k := string(id)
	if len(s.prepList) < maxPrepared {
		s.prepList = append(s.prepList, k)
	} else {
		delete(s.prep, s.prepList[s.prepHead])
		s.prepList[s.prepHead] = k
		s.prepHead = (s.prepHead + 1) % len(s.prepList)
	}
	s.prep[k] = &prepInfo{text: text, cols: cols}
}

// queryEntry returns the entry of a QUERY's text q.
func (s *Stats) queryEntry(q []byte) *Entry {
	s.mu.RLock()
	e := s.raw[string(q)]
	s.mu.RUnlock()
	if e != nil && !e.dead.Load() {
		return e
	}
	norm, _ := cql.NormalizeQuery(string(q), false, maxTextLen)
	e = s.entry(key{text: norm, prepared: false}, -1)
	if len(norm) != len(q) || norm != string(q) {
		e.hasLiterals.Store(true)
	}
	s.mu.Lock()
	if len(s.raw) >= maxRaw {
		s.raw = make(map[string]*Entry)
	}
	s.raw[string(q)] = e
	s.mu.Unlock()
	return e
}

// executeEntry returns the entry of the prepared statement id.
func (s *Stats) executeEntry(id []byte) *Entry {
	s.mu.RLock()
	p := s.prep[string(id)]
	s.mu.RUnlock()
	if p != nil {
		if e := p.entry.Load(); e != nil && !e.dead.Load() {
			return e
		}
	} else {
		// Prepared before this sidecar saw it (or on another sidecar): keyed by its id.
		p = &prepInfo{text: "<prepared statement 0x" + hex.EncodeToString(id) + ">", cols: -1}
		s.learn(id, p.text, -1)
		s.mu.RLock()
		if q := s.prep[string(id)]; q != nil {
			p = q
		}
		s.mu.RUnlock()
	}
	e := s.entry(key{text: p.text, prepared: true}, p.cols)
	p.entry.Store(e)
	return e
}

// batchText returns the text of one of a BATCH's statements (normalized for a query; the
// prepared text, or the id, for a prepared one) and whether it is prepared.
func (s *Stats) batchText(st *cql.BatchStatement) (string, bool) {
	if !st.Prepared {
		text, _ := cql.NormalizeQuery(string(st.Query), false, maxTextLen)
		return text, false
	}
	s.mu.RLock()
	p := s.prep[string(st.ID)]
	s.mu.RUnlock()
	if p != nil {
		return p.text, true
	}
	return "<prepared statement 0x" + hex.EncodeToString(st.ID) + ">", true
}

// batchEntry returns the entry of a BATCH, keyed by its type and its statements' texts.
// Batches allocate their key on every request.
func (s *Stats) batchEntry(req *cql.Request) (*Entry, params) {
	if req.Err != nil {
		return nil, params{}
	}
	var b strings.Builder
	switch req.BatchType {
	case cql.BatchLogged:
		b.WriteString("BATCH LOGGED: ")
	case cql.BatchUnlogged:
		b.WriteString("BATCH UNLOGGED: ")
	default:
		b.WriteString("BATCH COUNTER: ")
	}
	prepared := true
	var first []byte
	samePartition := true
	var sh shape
	for i := range req.Batch {
		st := &req.Batch[i]
		if i > 0 {
			b.WriteString("; ")
		}
		text, isPrepared := s.batchText(st)
		prepared = prepared && isPrepared
		if i == 0 {
			sh = classify(text)
		}
		b.WriteString(text)
		switch {
		case len(st.Values) == 0:
			if i > 0 {
				samePartition = false
			}
		case i == 0:
			first = st.Values[0].Bytes
		case string(st.Values[0].Bytes) != string(first):
			samePartition = false
		}
		if b.Len() > maxTextLen {
			break
		}
	}
	p := params{cl: req.Params.Consistency}
	e := s.entry(key{text: b.String(), prepared: prepared}, -1)
	if e.shape.verb == verbBatch || e.shape.keyspace == "" {
		// The batch's keyspace and table are its first statement's.
		e.shape.keyspace, e.shape.table, e.shape.system = sh.keyspace, sh.table, sh.system
	}
	if req.BatchType == cql.BatchLogged && len(req.Batch) > 1 && !samePartition && !e.shape.system {
		e.count(kindLoggedBatchMultiPartition)
	}
	return e, p
}

// entry finds or makes the entry of k.
func (s *Stats) entry(k key, cols int) *Entry {
	s.mu.RLock()
	e := s.entries[k]
	s.mu.RUnlock()
	if e != nil {
		return e
	}
	sh := shape{}
	if strings.HasPrefix(k.text, "BATCH ") {
		sh.verb = verbBatch
		if i := strings.Index(k.text, ": "); i > 0 {
			first := k.text[i+2:]
			if j := strings.Index(first, "; "); j > 0 {
				first = first[:j]
			}
			f := classify(first)
			sh.keyspace, sh.table, sh.system = f.keyspace, f.table, f.system
		}
	} else {
		sh = classify(k.text)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[k]; e != nil {
		return e
	}
	if len(s.entries) >= s.max {
		s.evictLocked()
	}
	e = &Entry{key: k, shape: sh, cols: cols}
	e.first.Store(s.now())
	e.last.Store(e.first.Load())
	for kind := range e.anti {
		e.anti[kind] = s.anti.counter(antiKind(kind), sh.keyspace, sh.table)
	}
	s.entries[k] = e
	return e
}

// evictLocked removes the least-called entry.
func (s *Stats) evictLocked() {
	var victim *Entry
	least := uint64(math.MaxUint64)
	for _, e := range s.entries {
		if c := e.calls.Load(); c < least || c == least && victim != nil && e.last.Load() < victim.last.Load() {
			victim, least = e, c
		}
	}
	if victim != nil {
		victim.dead.Store(true)
		delete(s.entries, victim.key)
		s.evicted.Add(1)
	}
}
