package cql

import (
	"slices"
	"unsafe"
)

// Request is what a QUERY, PREPARE, EXECUTE or BATCH request says, parsed by
// Frame.Request at the frame's own protocol version: the statement, the query parameters,
// a BATCH's statements, and a v5 EXECUTE's result metadata id. It is the one reader of
// <query_parameters> and of a BATCH body in tracecar: tracing, statement statistics, the
// capture, the trace filter and the proxy read a request through it, so that each request
// is parsed at most once however many of them look.
//
// Its slices alias the message it was parsed from (the frame's body after its prefix),
// or the buffer CopyTo copied it into; they are valid as long as that is. A request that
// cannot be read whole keeps what was read before the error, and says so in Err. The zero
// Request holds nothing. A Request is not safe for concurrent use while it is parsed or
// copied into; afterwards it may be read concurrently.
type Request struct {
	// Opcode is OpQuery, OpPrepare, OpExecute or OpBatch.
	Opcode Opcode
	// Version is the protocol version the request was parsed at, without the response
	// bit.
	Version byte
	// Query is the text of a QUERY or PREPARE.
	Query []byte
	// ID is the prepared id of an EXECUTE.
	ID []byte
	// ResultMetadataID is a v5 EXECUTE's result metadata id.
	ResultMetadataID []byte
	// Params are a QUERY's or EXECUTE's query parameters, and a BATCH's parameters (which
	// carry no values: each statement has its own). A v5 PREPARE's keyspace is in
	// Params.Keyspace.
	Params Params
	// BatchType is a BATCH's type: BatchLogged, BatchUnlogged or BatchCounter.
	BatchType byte
	// Batch is a BATCH's statements, in order.
	Batch []BatchStatement
	// Err is nil for a request read whole, and otherwise what stopped the reading: the
	// fields read before it are set, the rest are zero. HasParams tells whether the
	// parameters' consistency and flags were read.
	Err error
	// HasParams reports whether the consistency and the flags of Params were read.
	HasParams bool

	msg      []byte   // what the slices alias
	values   []Value  // backing array of every Values
	names    [][]byte // backing array of every Names
	batch    []BatchStatement
	trailing bool // bytes were left after the request
}

// Params are the <query_parameters> of a QUERY or EXECUTE, or the parameters of a BATCH,
// as Request holds them. Flags (with ExtFlags) says which optional fields the request
// carries; the others are zero. Slices alias the request's message.
type Params struct {
	Consistency Consistency
	// Flags are the flags of v3 and v4, a [byte], and the first byte of v5's [int].
	Flags byte
	// ExtFlags are the rest of v5's flags (QueryNowInSeconds); its first byte is zero.
	ExtFlags uint32
	// Values are the bound values; a nil Bytes is null.
	Values []Value
	// Names name the values when Flags has QueryNamedValues: Names[i] names Values[i].
	Names             [][]byte
	PageSize          int32
	PagingState       []byte
	SerialConsistency Consistency
	// Timestamp is the default timestamp, in microseconds since the epoch.
	Timestamp int64
	// Keyspace (v5, with QueryWithKeyspace) is the keyspace the statement runs in.
	Keyspace []byte
	// NowInSeconds (v5, with QueryNowInSeconds in ExtFlags) is the time the request runs
	// at, in seconds since the epoch.
	NowInSeconds int32
}

// HasPageSize reports whether the request carries a page size.
func (p *Params) HasPageSize() bool { return p.Flags&QueryPageSize != 0 }

// HasSerialConsistency reports whether the request carries a serial consistency.
func (p *Params) HasSerialConsistency() bool { return p.Flags&QuerySerialConsistency != 0 }

// HasKeyspace reports whether the request names the keyspace it runs in (v5).
func (p *Params) HasKeyspace() bool { return p.Flags&QueryWithKeyspace != 0 }

// HasNowInSeconds reports whether the request carries the time it runs at (v5).
func (p *Params) HasNowInSeconds() bool { return p.ExtFlags&QueryNowInSeconds != 0 }

// BatchStatement is one statement of a BATCH: a query's text, or a prepared statement's id,
// and its bound values.
type BatchStatement struct {
	// Prepared tells whether the statement is a prepared one (ID) or a query (Query).
	Prepared bool
	Query    []byte
	ID       []byte
	Values   []Value
	// Names name the values when the batch's flags have QueryNamedValues.
	Names [][]byte
}

// Parsed reports whether r holds a parsed request: a QUERY, PREPARE, EXECUTE or BATCH
// whose statement could be read.
func (r *Request) Parsed() bool {
	switch r.Opcode {
	case OpQuery, OpPrepare:
		return r.Query != nil
	case OpExecute:
		return r.ID != nil
	case OpBatch:
		return r.Batch != nil
	}
	return false
}

// Parse makes r the request of opcode op and protocol version version whose message (its
// body after the custom payload) is msg, reusing r's arrays. Most readers take a Request
// from Frame.Request, which parses at most once per frame; Parse is for a reader that
// holds a message and no frame, such as a server. Parse counts as a parse (CountWork).
func (r *Request) Parse(op Opcode, version byte, msg []byte) {
	countWork(WorkParse, msg)
	r.parse(op, version, msg)
}

func (r *Request) parse(op Opcode, version byte, msg []byte) {
	r.reset(op, version, msg)
	var d Decoder
	d.Reset(msg)
	switch op {
	case OpQuery:
		r.Query = d.LongStringBytes()
		r.readParams(&d, true)
	case OpPrepare:
		r.Query = d.LongStringBytes()
		if version >= V5 && d.Len() > 0 && uint32(d.Int())&PrepareWithKeyspace != 0 {
			r.Params.Keyspace = d.StringBytes()
		}
	case OpExecute:
		r.ID = d.ShortBytes()
		if version >= V5 {
			r.ResultMetadataID = d.ShortBytes()
		}
		r.readParams(&d, true)
	case OpBatch:
		r.readBatch(msg)
		return
	default:
		return
	}
	r.Err, r.trailing = d.Err(), d.Len() > 0
	r.share()
}

func (r *Request) reset(op Opcode, version byte, msg []byte) {
	values, names, batch := r.values[:0], r.names[:0], r.batch[:0]
	*r = Request{Opcode: op, Version: version, msg: msg, values: values, names: names, batch: batch}
}

// readParams reads <query_parameters>, or with values false a BATCH's parameters.
func (r *Request) readParams(d *Decoder, values bool) {
	p := &r.Params
	p.Consistency = d.Consistency()
	p.Flags, p.ExtFlags = d.QueryFlags(r.Version)
	if d.Err() != nil {
		return
	}
	r.HasParams = true
	if values && p.Flags&QueryValues != 0 {
		r.readValues(d, p.Flags&QueryNamedValues != 0)
	}
	if values && p.Flags&QueryPageSize != 0 {
		p.PageSize = d.Int()
	}
	if values && p.Flags&QueryPagingState != 0 {
		p.PagingState = d.Bytes()
	}
	if p.Flags&QuerySerialConsistency != 0 {
		p.SerialConsistency = d.Consistency()
	}
	if p.Flags&QueryDefaultTimestamp != 0 {
		p.Timestamp = d.Long()
	}
	if r.Version >= V5 {
		if p.Flags&QueryWithKeyspace != 0 {
			p.Keyspace = d.StringBytes()
		}
		if p.ExtFlags&QueryNowInSeconds != 0 {
			p.NowInSeconds = d.Int()
		}
	}
}

// readValues appends a [short] count of values, named or not, to r.values (and r.names).
// The statement's slices of them are set by share, once the arrays have stopped growing.
func (r *Request) readValues(d *Decoder, named bool) {
	// Each value read takes at least 4 bytes, so a count larger than the message stops at
	// its end: the arrays never grow past what the message holds.
	n := int(d.Short())
	// Room for them at once, as far as the message can hold them (a value takes at least 4
	// bytes), so that a bogus count cannot make a large array.
	r.values = slices.Grow(r.values, min(n, d.Len()/4))
	for i := 0; i < n && d.Err() == nil; i++ {
		var name []byte
		if named {
			name = d.StringBytes()
		}
		v, unset := d.Value()
		if d.Err() != nil {
			break
		}
		if named {
			r.names = append(r.names, name)
		}
		r.values = append(r.values, Value{Bytes: v, Unset: unset})
	}
}

// readBatch reads a BATCH. Whether its values carry names is told by flags that come after
// the statements, so it is read with unnamed values first, as Cassandra writes them, and
// with named values when that does not fit; when neither fits, what the unnamed reading
// got before its error is kept.
func (r *Request) readBatch(msg []byte) {
	if r.readBatchAs(msg, false) == nil {
		return
	}
	if r.readBatchAs(msg, true) == nil {
		return
	}
	r.readBatchAs(msg, false)
}

func (r *Request) readBatchAs(msg []byte, named bool) error {
	r.reset(OpBatch, r.Version, msg)
	var d Decoder
	d.Reset(msg)
	r.BatchType = d.Byte()
	n := int(d.Short())
	// Each statement takes at least 5 bytes: its kind, a 2-byte id length, a value count.
	if d.Err() != nil || n*5 > d.Len() {
		d.fail()
	}
	for i := 0; i < n && d.Err() == nil; i++ {
		var s BatchStatement
		switch d.Byte() {
		case 0:
			s.Query = d.LongStringBytes()
		case 1:
			s.Prepared = true
			s.ID = d.ShortBytes()
		default:
			d.fail()
		}
		if d.Err() != nil {
			break
		}
		from := len(r.values)
		r.readValues(&d, named)
		s.Values = r.values[from:len(r.values):len(r.values)] // rebased by share
		r.batch = append(r.batch, s)
	}
	if d.Err() == nil {
		r.readParams(&d, false)
	}
	r.Err, r.trailing = d.Err(), d.Len() > 0
	if r.Err == nil && r.HasParams && (r.Params.Flags&QueryNamedValues != 0) != named {
		r.Err = ErrMalformed
	}
	if r.Err == nil && r.trailing {
		r.Err = ErrMalformed
	}
	r.share()
	return r.Err
}

// share sets the statements' slices of the values and names arrays, which have stopped
// growing.
func (r *Request) share() {
	if r.Opcode != OpBatch {
		if r.Params.Flags&QueryValues != 0 && len(r.values) > 0 {
			r.Params.Values = r.values[:len(r.values):len(r.values)]
			if len(r.names) > 0 {
				r.Params.Names = r.names[:len(r.names):len(r.names)]
			}
		}
		return
	}
	named := len(r.names) > 0
	at := 0
	for i := range r.batch {
		s := &r.batch[i]
		n := len(s.Values)
		s.Values, s.Names = nil, nil
		if n > 0 {
			s.Values = r.values[at : at+n : at+n]
			if named {
				s.Names = r.names[at : at+n : at+n]
			}
		}
		at += n
	}
	r.Batch = r.batch
	if r.Batch == nil && r.Err == nil {
		r.Batch = r.batch[:0:0] // read, and empty
	}
}

// CopyTo makes dst a copy of r whose slices alias buf, which it returns grown to hold r's
// message: for a reader that keeps a request past its frame's life (a slow request's
// record, a capture's queue). It reuses dst's arrays and buf, so that it allocates nothing
// once they have grown. It does not parse, and is not counted as a parse.
func (r *Request) CopyTo(dst *Request, buf []byte) []byte {
	buf = append(buf[:0], r.msg...)
	values, names, batch := dst.values[:0], dst.names[:0], dst.batch[:0]
	*dst = *r
	dst.msg = buf
	dst.Query = rebaseSlice(r.Query, r.msg, buf)
	dst.ID = rebaseSlice(r.ID, r.msg, buf)
	dst.ResultMetadataID = rebaseSlice(r.ResultMetadataID, r.msg, buf)
	p := &dst.Params
	p.PagingState = rebaseSlice(p.PagingState, r.msg, buf)
	p.Keyspace = rebaseSlice(p.Keyspace, r.msg, buf)
	p.Values, p.Names = nil, nil
	for _, v := range r.values {
		values = append(values, Value{Bytes: rebaseSlice(v.Bytes, r.msg, buf), Unset: v.Unset})
	}
	for _, n := range r.names {
		names = append(names, rebaseSlice(n, r.msg, buf))
	}
	for _, s := range r.batch { // s.Values keeps its count, for share
		s.Query, s.ID = rebaseSlice(s.Query, r.msg, buf), rebaseSlice(s.ID, r.msg, buf)
		batch = append(batch, s)
	}
	dst.values, dst.names, dst.batch, dst.Batch = values, names, batch, nil
	dst.share()
	if r.Batch == nil {
		dst.Batch = nil
	}
	return buf
}

// rebaseSlice returns the part of to at the offset in to where s lies in from, keeping
// nil as nil and empty as empty.
func rebaseSlice(s, from, to []byte) []byte {
	if s == nil {
		return nil
	}
	if len(s) == 0 {
		return to[:0:0]
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(s))) - uintptr(unsafe.Pointer(unsafe.SliceData(from))))
	if off < 0 || off+len(s) > len(from) {
		return nil // not of from: never made by Parse
	}
	return to[off : off+len(s) : off+len(s)]
}

// Len returns the length of the message r was parsed from: what CopyTo copies.
func (r *Request) Len() int { return len(r.msg) }

// Consistency returns the request's consistency level, and false when it has none (a
// PREPARE) or it could not be read.
func (r *Request) Consistency() (Consistency, bool) {
	return r.Params.Consistency, r.HasParams
}
