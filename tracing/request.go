package tracing

import (
	"encoding/hex"
	"fmt"
	"strconv"

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

// walkRequest reads a request body (decompressed, custom payload removed) of opcode op and
// protocol version into p. On malformed or truncated input, p keeps what was read before
// the error.
func walkRequest(op cql.Opcode, version byte, body []byte, p *params) error {
	var d cql.Decoder
	d.Reset(body)
	switch op {
	case cql.OpQuery:
		q := d.LongStringBytes()
		if d.Err() == nil {
			p.query("query", q)
		}
		walkQueryParams(&d, version, p, -1)
	case cql.OpExecute:
		id := d.ShortBytes()
		if d.Err() == nil {
			p.prepared(-1, id)
		}
		if version >= cql.V5 {
			d.ShortBytes() // the result metadata id
		}
		walkQueryParams(&d, version, p, -1)
	case cql.OpPrepare:
		q := d.LongStringBytes()
		if d.Err() == nil {
			p.query("query", q)
		}
	case cql.OpBatch:
		return walkBatch(body, version, p)
	}
	return d.Err()
}

func walkQueryParams(d *cql.Decoder, version byte, p *params, stmt int) {
	cl := d.Consistency()
	flags, ext := d.QueryFlags(version)
	if d.Err() != nil {
		return
	}
	p.set("consistency_level", cl.String())
	if flags&cql.QueryValues != 0 {
		n := int(d.Short())
		for i := 0; i < n && d.Err() == nil; i++ {
			if flags&cql.QueryNamedValues != 0 {
				d.StringBytes()
			}
			v, unset := d.Value()
			if d.Err() == nil {
				p.value(stmt, i, v, unset)
			}
		}
	}
	if flags&cql.QueryPageSize != 0 {
		n := d.Int()
		if d.Err() == nil && p.m != nil {
			p.set("page_size", strconv.Itoa(int(n)))
		}
	}
	if flags&cql.QueryPagingState != 0 {
		d.Bytes()
	}
	if flags&cql.QuerySerialConsistency != 0 {
		sc := d.Consistency()
		if d.Err() == nil {
			p.set("serial_consistency_level", sc.String())
		}
	}
	if flags&cql.QueryDefaultTimestamp != 0 {
		d.Long()
	}
	walkV5Params(d, version, flags, ext, p)
}

// walkV5Params reads what v5 adds after the timestamp: the keyspace and now_in_seconds.
func walkV5Params(d *cql.Decoder, version, flags byte, ext uint32, p *params) {
	if version < cql.V5 {
		return
	}
	if flags&cql.QueryWithKeyspace != 0 {
		ks := d.StringBytes()
		if d.Err() == nil && p.m != nil {
			p.set("keyspace", string(ks))
		}
	}
	if ext&cql.QueryNowInSeconds != 0 {
		n := d.Int()
		if d.Err() == nil && p.m != nil {
			p.set("now_in_seconds", strconv.Itoa(int(n)))
		}
	}
}

var batchTypes = [...]string{cql.BatchLogged: "LOGGED", cql.BatchUnlogged: "UNLOGGED", cql.BatchCounter: "COUNTER"}

// walkBatch reads a BATCH. Whether values carry names is told by flags that come after
// the statements, so it tries unnamed values first, as Cassandra writes them.
func walkBatch(body []byte, version byte, p *params) error {
	if p.m == nil {
		if err := walkBatchAs(body, version, p, false); err != nil {
			return walkBatchAs(body, version, p, true)
		}
		return nil
	}
	named := walkBatchAs(body, version, &params{}, false) != nil && walkBatchAs(body, version, &params{}, true) == nil
	return walkBatchAs(body, version, p, named)
}

func walkBatchAs(body []byte, version byte, p *params, named bool) error {
	var d cql.Decoder
	d.Reset(body)
	typ := d.Byte()
	n := int(d.Short())
	if d.Err() != nil {
		return d.Err()
	}
	if int(typ) < len(batchTypes) {
		p.set("batch_type", batchTypes[typ])
	}
	for i := 0; i < n && d.Err() == nil; i++ {
		switch d.Byte() {
		case 0:
			q := d.LongStringBytes()
			if d.Err() == nil {
				p.query(indexed("query", i), q)
			}
		case 1:
			id := d.ShortBytes()
			if d.Err() == nil && p.m != nil {
				p.prepared(i, id)
			}
		default:
			return cql.ErrMalformed
		}
		nv := int(d.Short())
		for j := 0; j < nv && d.Err() == nil; j++ {
			if named {
				d.StringBytes()
			}
			v, unset := d.Value()
			if d.Err() == nil {
				p.value(i, j, v, unset)
			}
		}
	}
	cl := d.Consistency()
	flags, ext := d.QueryFlags(version)
	if d.Err() != nil {
		return d.Err()
	}
	p.set("consistency_level", cl.String())
	if flags&cql.QuerySerialConsistency != 0 {
		sc := d.Consistency()
		if d.Err() == nil {
			p.set("serial_consistency_level", sc.String())
		}
	}
	if flags&cql.QueryDefaultTimestamp != 0 {
		d.Long()
	}
	walkV5Params(&d, version, flags, ext, p)
	if d.Err() == nil && d.Len() != 0 {
		return cql.ErrMalformed
	}
	return d.Err()
}

func indexed(k string, i int) string {
	if i < 0 {
		return k
	}
	return k + "[" + strconv.Itoa(i) + "]"
}

// decodeFast builds the parameters of a slow fast-mode request from the copy its record
// keeps: the frame, decompressed here (the sidecar had not), or its message, decompressed
// by the sidecar already. The copy may be truncated; what could be read is kept. view
// reports whether c.fast is now a view of the copied frame, whose custom payload can be read.
func (c *Conn) decodeFast(r *record) (ps map[string]string, view bool) {
	m := make(map[string]string, 6)
	body := r.buf
	if !r.plain {
		h, err := cql.ParseHeader(r.buf)
		if err != nil {
			m["decode_error"] = err.Error()
			return m, false
		}
		if c.fast == nil {
			c.fast = new(cql.Frame)
		}
		c.fast.Reset(h, r.buf, r.comp)
		if body, err = c.fast.Message(); err != nil {
			m["decode_error"] = err.Error()
			return m, true
		}
		view = true
	}
	if err := walkRequest(r.op, r.version, body, c.t.params(m)); err != nil {
		m["decode_error"] = err.Error()
	}
	return m, view
}

// responseInfo is what a traced session needs from a response: the node's tracing id and
// the error, if any.
type responseInfo struct {
	tracingID    [16]byte
	hasTracingID bool
	err          string
}

// readResponse reads the tracing id and the error of a response, from its view: the body
// is decompressed only for those, and then only once for every reader of the frame.
func readResponse(f *cql.Frame) responseInfo {
	var ri responseInfo
	h := f.Header
	if h.Flags&cql.FlagTracing == 0 && h.Opcode != cql.OpError {
		return ri
	}
	rest, err := f.Message()
	if err != nil {
		if _, berr := f.Body(); berr != nil {
			ri.err = "tracecar: " + berr.Error()
		} else {
			ri.err = "tracecar: malformed response prefix"
		}
		return ri
	}
	ri.tracingID, ri.hasTracingID = f.TracingID()
	if h.Opcode == cql.OpError {
		ri.err = errorText(rest)
	}
	return ri
}

// errorText renders an ERROR body as "name (0xCODE): message".
func errorText(body []byte) string {
	var d cql.Decoder
	d.Reset(body)
	code := d.Int()
	msg := d.String()
	if d.Err() != nil {
		return "malformed ERROR response"
	}
	return fmt.Sprintf("%s (0x%04x): %s", cql.ErrorCodeName(code), code, msg)
}
