package tracing

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// Request names, as ScyllaDB writes them in system_traces.sessions.request.
const (
	RequestQuery   = "Execute CQL3 query"
	RequestExecute = "Execute CQL3 prepared query"
	RequestBatch   = "Execute batch of CQL3 queries"
	RequestPrepare = "Preparing CQL3 query"
)

// traceable reports whether requests with opcode op get sessions: the four that carry
// CQL. STARTUP, OPTIONS, REGISTER and AUTH_RESPONSE (which carries credentials) never do.
func traceable(op cql.Opcode) bool {
	const mask = 1<<cql.OpQuery | 1<<cql.OpExecute | 1<<cql.OpBatch | 1<<cql.OpPrepare
	return op < 32 && mask&(1<<op) != 0
}

func requestName(op cql.Opcode) string {
	switch op {
	case cql.OpQuery:
		return RequestQuery
	case cql.OpExecute:
		return RequestExecute
	case cql.OpBatch:
		return RequestBatch
	case cql.OpPrepare:
		return RequestPrepare
	}
	return op.String()
}

// maxKeptScratch bounds the decompression and rewrite buffers a Conn keeps between calls.
const maxKeptScratch = 1 << 20

// params collects a request's parameters. With a nil m it only walks the request, which
// validates it without allocating: full mode does that for the "request parsed" event and
// builds the map only for a session that is recorded.
type params struct {
	m       map[string]string
	bind    bool
	prep    *Statements
	queries *queryCache // normalizes query text
}

func (p *params) set(k, v string) {
	if p.m != nil {
		p.m[k] = v
	}
}

// value records bound value i (of statement stmt in a batch, or stmt < 0).
func (p *params) value(stmt, i int, v []byte, unset bool) {
	if p.m == nil {
		return
	}
	var k string
	switch {
	case stmt >= 0:
		k = "param[" + strconv.Itoa(stmt) + "][" + strconv.Itoa(i) + "]"
	case i < len(paramKeys):
		k = paramKeys[i]
	default:
		k = "param[" + strconv.Itoa(i) + "]"
	}
	p.m[k] = renderValue(v, unset, p.bind)
}

// prepared records the text of the statement whose id is id as "query" (of statement
// stmt in a batch, or stmt < 0), and its keyspace as "keyspace", or the id as
// "prepared_id" when this sidecar never saw it prepared.
func (p *params) prepared(stmt int, id []byte) {
	if p.m == nil {
		return
	}
	if st := p.prep.Lookup(id); st != nil && st.Query != "" {
		p.queryText(indexed("query", stmt), st.Query)
		if st.Keyspace != "" {
			p.m[indexed("keyspace", stmt)] = st.Keyspace
		}
		return
	}
	p.m[indexed("prepared_id", stmt)] = "0x" + hex.EncodeToString(id)
}

// maxBoundValue is how much of a bound value BindValues shows.
const maxBoundValue = 256

// paramKeys are the names of the first bound values of a statement, and redactedValues
// the text of a redacted value of each of the first lengths: every recorded session
// names its values, so that they cost no allocation.
var (
	paramKeys      [64]string
	redactedValues [256]string
)

func init() {
	for i := range paramKeys {
		paramKeys[i] = "param[" + strconv.Itoa(i) + "]"
	}
	for n := range redactedValues {
		redactedValues[n] = redacted(n)
	}
}

func redacted(n int) string { return "<redacted: " + strconv.Itoa(n) + " bytes>" }

func renderValue(v []byte, unset, bind bool) string {
	switch {
	case unset:
		return "<unset>"
	case v == nil:
		return "null"
	case !bind && len(v) < len(redactedValues):
		return redactedValues[len(v)]
	case !bind:
		return redacted(len(v))
	case len(v) > maxBoundValue:
		return "0x" + hex.EncodeToString(v[:maxBoundValue]) + "… (" + strconv.Itoa(len(v)) + " bytes)"
	}
	return "0x" + hex.EncodeToString(v)
}

// request records the parameters of the parsed request r into p, as the session record
// shows them. A request that could not be read whole shows what was read before the
// error; its error is the caller's to record.
func (p *params) request(r *cql.Request) {
	if p.m == nil {
		return
	}
	switch r.Opcode {
	case cql.OpQuery, cql.OpPrepare:
		if r.Query != nil {
			p.query("query", r.Query)
		}
	case cql.OpExecute:
		if r.ID != nil {
			p.prepared(-1, r.ID)
		}
	case cql.OpBatch:
		p.batch(r)
		return
	}
	if r.Opcode != cql.OpPrepare {
		p.queryParams(r, -1)
	}
}

// queryParams records the query parameters of r: a QUERY's or EXECUTE's, with their
// values, or a BATCH's (stmt < 0 always; a batch's values are its statements').
func (p *params) queryParams(r *cql.Request, stmt int) {
	if !r.HasParams {
		return
	}
	qp := &r.Params
	p.set("consistency_level", qp.Consistency.String())
	for i, v := range qp.Values {
		p.value(stmt, i, v.Bytes, v.Unset)
	}
	if r.Err != nil {
		return // what follows the values was not read
	}
	if qp.HasPageSize() {
		p.set("page_size", strconv.Itoa(int(qp.PageSize)))
	}
	if qp.HasSerialConsistency() {
		p.set("serial_consistency_level", qp.SerialConsistency.String())
	}
	if r.Version >= cql.V5 {
		if qp.HasKeyspace() {
			p.set("keyspace", string(qp.Keyspace))
		}
		if qp.HasNowInSeconds() {
			p.set("now_in_seconds", strconv.Itoa(int(qp.NowInSeconds)))
		}
	}
}

var batchTypes = [...]string{cql.BatchLogged: "LOGGED", cql.BatchUnlogged: "UNLOGGED", cql.BatchCounter: "COUNTER"}

// batch records a BATCH: its type, each statement's text (or prepared id) and values, and
// its parameters.
func (p *params) batch(r *cql.Request) {
	if r.Batch == nil && r.Err != nil {
		return
	}
	if int(r.BatchType) < len(batchTypes) {
		p.set("batch_type", batchTypes[r.BatchType])
	}
	for i := range r.Batch {
		s := &r.Batch[i]
		if s.Prepared {
			p.prepared(i, s.ID)
		} else {
			p.query(indexed("query", i), s.Query)
		}
		for j, v := range s.Values {
			p.value(i, j, v.Bytes, v.Unset)
		}
	}
	p.queryParams(r, -1)
}

// query records statement text under key k (query or query[i]), normalized: literal values
// redacted unless kept, passwords always redacted, and cut at the maximum length, which
// sets the matching query_truncated parameter.
func (p *params) query(k string, q []byte) {
	if p.m == nil {
		return
	}
	text, truncated := p.queries.normalizeBytes(q)
	p.setQuery(k, text, truncated)
}

// queryText is query for text the sidecar keeps, a prepared statement's.
func (p *params) queryText(k, q string) {
	if p.m == nil {
		return
	}
	text, truncated := p.queries.normalize(q)
	p.setQuery(k, text, truncated)
}

func (p *params) setQuery(k, text string, truncated bool) {
	p.m[k] = text
	if truncated {
		p.m["query_truncated"+strings.TrimPrefix(k, "query")] = "true"
	}
}

// responseInfo is what a traced session needs from a response: the node's tracing id and
// the error, if any.
type responseInfo struct {
	tracingID    [16]byte
	hasTracingID bool
	err          string
}

// readResponse reads the tracing id and the error of a response, from its view: the body
// is decompressed only for those, and then only once for every reader of the frame, and
// an ERROR is read once (Frame.Response) for every reader.
func readResponse(f *cql.Frame) responseInfo {
	var ri responseInfo
	h := f.Header
	if h.Flags&cql.FlagTracing == 0 && h.Opcode != cql.OpError {
		return ri
	}
	if _, err := f.Message(); err != nil {
		if _, berr := f.Body(); berr != nil {
			ri.err = "tracecar: " + berr.Error()
		} else {
			ri.err = "tracecar: malformed response prefix"
		}
		return ri
	}
	ri.tracingID, ri.hasTracingID = f.TracingID()
	if h.Opcode == cql.OpError {
		ri.err = errorText(f.Response())
	}
	return ri
}

// errorText renders an ERROR as "name (0xCODE): message".
func errorText(r *cql.Response) string {
	if !r.ErrorRead() {
		return "malformed ERROR response"
	}
	return fmt.Sprintf("%s (0x%04x): %s", cql.ErrorCodeName(r.ErrCode), r.ErrCode, r.ErrMessage)
}
