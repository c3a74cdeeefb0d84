package cql

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame is a view of one frame as it crosses a proxy, built once and read by every
// consumer of the frame: the header, the raw bytes, and, on first use only, the body
// decompressed, its prefix (custom payload, tracing id, warnings) and, for a request, its
// statement. No consumer decompresses or re-walks the body on its own; each asks the view,
// which does the work at most once per frame.
//
// The zero Frame holds no frame. Reset makes it a view of the next frame and keeps its
// buffers, so that one Frame per direction of a connection serves every frame without
// allocating once the buffers have grown. The slices a Frame returns are valid until the
// next Reset or Replace. A Frame is not safe for concurrent use.
type Frame struct {
	// Header is the frame's header, as the transport parsed it.
	Header Header

	raw  []byte     // the whole frame: header and body
	comp Compressor // the connection's compressor, when the body is compressed

	have    uint8 // what has been read, see the have* bits
	bodyErr error
	body    []byte // the body, decompressed; aliases raw or buf
	msg     []byte // body after its prefix; aliases body
	payload []byte // the custom payload as a [bytes map], without copying; aliases body
	trace   [16]byte
	stmt    Statement
	// req is the parsed request, made on the first Request and kept with its arrays for
	// the frames after: a connection that never needs one (most responses' views, every
	// connection with nothing that reads parameters) keeps a nil pointer, not 400 bytes.
	req *Request
	// resp is the response read, made on the first Response like req.
	resp      *Response
	result    Message // the RESULT decoded whole, by Result
	resultErr error

	buf      []byte // decompressed bodies
	start    []byte // a compressed body's start, read by Start; grown on first use
	startN   int    // how much of start is read; -1: the start is unreadable
	startMax int    // the most Start was asked for
}

// What a Frame has read.
const (
	haveBody   = 1 << iota // body and bodyErr are set
	haveMsg                // msg, payload and trace are set (msg is nil when unreadable)
	haveStmt               // stmt is set
	haveStart              // start[:startN] is set
	haveTrace              // trace is the response's tracing id
	haveReq                // req is the request parsed
	haveResp               // resp is the response read
	haveResult             // result and resultErr are set
)

// StartSize is the most of a compressed body that Start decompresses without decompressing
// the whole body.
const StartSize = 1024

// maxKeptFrameBuffer is the largest decompression buffer a Frame keeps for the next frame,
// so that an idle connection stays small after a rare large frame.
const maxKeptFrameBuffer = 1 << 20

// ErrNoBody is returned for the body of a frame that was streamed through unread, or whose
// compressed body has no compressor to read it.
var ErrNoBody = errors.New("frame body not available")

// Reset makes f a view of raw, the whole frame whose header is h, compressed with comp
// when h.Flags has FlagCompression. raw may be nil for a frame streamed through unread:
// the view then has a header and no body. f keeps no reference to raw after the next Reset.
func (f *Frame) Reset(h Header, raw []byte, comp Compressor) {
	// Only what the have bits do not guard is set: the readers fill the rest, with the
	// bit that says it is there, so that a frame nobody reads costs a few stores.
	f.Header, f.raw, f.have = h, raw, 0
	f.comp = nil
	if h.Flags&FlagCompression != 0 {
		f.comp = comp
		if cap(f.buf) > maxKeptFrameBuffer {
			f.buf = nil
		}
	}
}

// Raw returns the whole frame, header included, or nil when it was streamed through.
func (f *Frame) Raw() []byte { return f.raw }

// Compressed reports whether the frame's body is compressed.
func (f *Frame) Compressed() bool { return f.Header.Flags&FlagCompression != 0 }

// Compressor returns the compressor of a compressed frame, or nil.
func (f *Frame) Compressor() Compressor { return f.comp }

// Decompressed reports whether the body of a compressed frame has been decompressed (by
// Body, Message or Statement), so that a reader who wants the body later may take it from
// the view rather than decompress a copy of the frame.
func (f *Frame) Decompressed() bool {
	return f.Compressed() && f.have&haveBody != 0 && f.bodyErr == nil
}

// Body returns the frame's body, decompressed, with its prefix. It decompresses at most
// once per frame.
func (f *Frame) Body() ([]byte, error) {
	if f.have&haveBody == 0 {
		f.body, f.bodyErr = f.readBody()
		f.have |= haveBody
	}
	return f.body, f.bodyErr
}

func (f *Frame) readBody() ([]byte, error) {
	if len(f.raw) < HeaderSize {
		return nil, ErrNoBody
	}
	body := f.raw[HeaderSize:]
	if !f.Compressed() {
		return body, nil
	}
	if f.comp == nil {
		return nil, ErrNoBody
	}
	out, err := f.comp.Decompress(f.buf[:0], body)
	if err != nil {
		return nil, fmt.Errorf("decompress %s body: %w", f.comp.Name(), err)
	}
	f.buf = out
	return out, nil
}

// Message returns the body after its prefix: after the custom payload of a request; after
// the tracing id, the warnings and the custom payload of a response.
func (f *Frame) Message() ([]byte, error) {
	if f.have&haveMsg == 0 {
		f.readMessage()
	}
	if f.msg == nil {
		if f.bodyErr != nil {
			return nil, f.bodyErr
		}
		return nil, ErrMalformed
	}
	return f.msg, nil
}

func (f *Frame) readMessage() {
	f.have |= haveMsg
	f.msg, f.payload = nil, nil
	body, err := f.Body()
	if err != nil {
		return
	}
	flags := f.Header.Flags
	if flags&(FlagTracing|FlagWarning|FlagCustomPayload) == 0 {
		f.msg = body // the common case: no prefix
		return
	}
	d := Decoder{b: body}
	if f.Header.IsResponse() {
		if flags&FlagTracing != 0 {
			f.trace = d.UUID()
			f.have |= haveTrace
		}
		if flags&FlagWarning != 0 {
			for n := int(d.Short()); n > 0 && d.err == nil; n-- {
				d.StringBytes()
			}
		}
	}
	if flags&FlagCustomPayload != 0 {
		f.payload = skipBytesMap(&d)
	}
	if d.err != nil {
		f.have &^= haveTrace
		f.payload = nil
		return
	}
	f.msg = d.b
	if f.msg == nil {
		f.msg = body[len(body):]
	}
}

// skipBytesMap reads a [bytes map] and returns its encoded bytes, without allocating.
func skipBytesMap(d *Decoder) []byte {
	start := d.b
	for n := int(d.Short()); n > 0 && d.err == nil; n-- {
		d.StringBytes()
		d.Bytes()
	}
	if d.err != nil {
		return nil
	}
	return start[:len(start)-len(d.b)]
}

// CustomPayload returns the frame's custom payload as the encoded [bytes map], or nil when
// it has none. PayloadValue reads a key from it.
func (f *Frame) CustomPayload() []byte {
	if f.have&haveMsg == 0 {
		f.readMessage()
	}
	return f.payload
}

// PayloadValue returns the value of key in an encoded [bytes map] (CustomPayload), without
// allocating, and whether the key is there.
func PayloadValue(payload []byte, key string) ([]byte, bool) {
	d := Decoder{b: payload}
	for n := int(d.Short()); n > 0 && d.err == nil; n-- {
		k := d.StringBytes()
		v := d.Bytes()
		if d.err == nil && string(k) == key {
			return v, true
		}
	}
	return nil, false
}

// TracingID returns the tracing id at the start of a response's body, when the frame has
// FlagTracing and the id could be read.
func (f *Frame) TracingID() ([16]byte, bool) {
	if f.have&haveMsg == 0 {
		f.readMessage()
	}
	return f.trace, f.have&haveTrace != 0
}

// ResponsePrefix returns the prefix of a response body in full (its warnings and custom
// payload decoded, which allocates), for a reader that re-encodes the response, and the
// message after it.
func (f *Frame) ResponsePrefix() (ResponsePrefix, []byte, error) {
	body, err := f.Body()
	if err != nil {
		return ResponsePrefix{}, nil, err
	}
	return ParseResponsePrefix(f.Header.Flags, body)
}

// Start returns the first bytes of the body, decompressed, up to n (at most StartSize):
// from the whole body when it has been read, and otherwise from the start of a compressed
// body alone, so that a reader who needs only the start (the statement's first words, a
// result's metadata) does not pay for the whole. It returns fewer than n bytes only for a
// shorter body, and nil for a body it cannot read.
func (f *Frame) Start(n int) []byte {
	n = min(n, StartSize)
	if !f.Compressed() || f.have&haveBody != 0 {
		b, err := f.Body()
		if err != nil {
			return nil
		}
		return b[:min(n, len(b))]
	}
	if f.have&haveStart == 0 || n > f.startMax && f.startN == f.startMax {
		// Decompress only as much as asked: the start of a statement is much cheaper
		// than StartSize. A later, longer ask decompresses the longer start.
		f.have |= haveStart
		f.startN, f.startMax = -1, n
		if f.comp != nil && len(f.raw) >= HeaderSize {
			if cap(f.start) < n {
				f.start = make([]byte, 0, n)
			}
			var p []byte
			switch f.comp.Name() {
			case "lz4":
				p = LZ4Prefix(f.start[:0], f.raw[HeaderSize:], n)
			case "snappy":
				p = SnappyPrefix(f.start[:0], f.raw[HeaderSize:], n)
			}
			if p != nil {
				f.start, f.startN = p, len(p)
			}
		}
	}
	if f.startN < 0 {
		return nil
	}
	return f.start[:min(n, f.startN)]
}

// Replace makes f a view of raw, a frame made from f's (its tracing id stripped), whose
// decompressed body is body: readers after the change see the new frame without
// decompressing it again. The message after the prefix is the same, in the same bytes, so
// what Response and Result read of it is kept: the response is read once across the change.
func (f *Frame) Replace(raw, body []byte) {
	h, err := ParseHeader(raw)
	if err != nil {
		f.Reset(f.Header, raw, f.comp)
		return
	}
	comp, kept := f.comp, f.have&(haveResp|haveResult)
	f.Reset(h, raw, comp)
	f.have = kept
	if body != nil {
		f.body, f.bodyErr = body, nil
		f.have |= haveBody
	}
}

// Statement is what a request says of its statement, read once by Frame.Statement: the
// few fields that the proxy reads on every QUERY and EXECUTE it inspects, without walking
// the values. A reader of the parameters takes Frame.Request.
type Statement struct {
	// Query is the text of a QUERY or PREPARE, or of a BATCH's first statement when it is
	// a query; it aliases the frame's body.
	Query []byte
	// ID is the prepared id of an EXECUTE, or of a BATCH's first statement when it is
	// prepared; it aliases the frame's body.
	ID []byte
	// Count is the number of statements of a BATCH, and 1 otherwise.
	Count int
	// Consistency and Flags are a QUERY's or an EXECUTE's query parameters; Flags is the
	// first byte of v5's [int] flags.
	Consistency Consistency
	Flags       byte
	// FlagsAt is the offset in the frame of the query parameters' flags byte of an
	// uncompressed QUERY or EXECUTE (in v5, of the last byte of the [int]: the one that
	// holds Flags), where a proxy may change them in place, or -1.
	FlagsAt int
}

// Statement returns what a QUERY, PREPARE, EXECUTE or BATCH request says of its statement,
// and false for another opcode or a body it cannot read. It reads the body at most once;
// the Statement belongs to f and is valid until the next Reset or Replace.
func (f *Frame) Statement() (*Statement, bool) {
	if f.have&haveStmt == 0 {
		f.have |= haveStmt
		f.readStatement()
	}
	return &f.stmt, f.stmt.Count > 0
}

// Request returns what a QUERY, PREPARE, EXECUTE or BATCH request says, parsed at the
// frame's own protocol version (v3, v4 or v5): its statement, its query parameters, a
// BATCH's statements and parameters, a v5 EXECUTE's result metadata id. It returns false
// for another opcode, or a body whose statement cannot be read (Request.Err says why; a
// request cut short keeps what was read). It parses at most once per frame, for every
// reader; the Request belongs to f and is valid until the next Reset or Replace.
func (f *Frame) Request() (*Request, bool) {
	if f.have&haveReq == 0 {
		f.have |= haveReq
		f.readRequest()
	}
	return f.req, f.req.Parsed()
}

// RequestParsed reports whether Request has parsed the frame's request, so that a reader
// who wants it later may copy it (Request.CopyTo) rather than parse a copy of the frame.
func (f *Frame) RequestParsed() bool { return f.have&haveReq != 0 && f.req.Parsed() }

// maxKeptValues bounds the values a Frame's Request keeps room for after a request with
// more, so that a rare huge BATCH does not pin memory.
const maxKeptValues = 4096

func (f *Frame) readRequest() {
	if f.req == nil {
		f.req = new(Request)
	} else if cap(f.req.values) > maxKeptValues || cap(f.req.batch) > maxKeptValues {
		*f.req = Request{}
	}
	op, version := f.Header.Opcode, f.Header.ProtoVersion()
	switch op {
	case OpQuery, OpPrepare, OpExecute, OpBatch:
	default:
		f.req.reset(op, version, nil)
		return
	}
	msg, err := f.Message()
	if err != nil {
		f.req.reset(op, version, nil)
		f.req.Err = err
		return
	}
	f.req.Parse(op, version, msg)
}

// Response returns what a RESULT or ERROR response says (see Response), read at most once
// per frame for every reader; the Response belongs to f and is valid until the next Reset
// or Replace. A plain or already decompressed body is read whole. A compressed RESULT is
// read from the start of its body (Start) unless it is a Prepared result, whose metadata
// may be long, so that counting a page's rows never decompresses the page; a compressed
// ERROR, short, is decompressed whole for its message.
func (f *Frame) Response() *Response {
	if f.have&haveResp == 0 {
		f.have |= haveResp
		f.readResponse()
	}
	return f.resp
}

// ResponseRead reports whether Response has read the frame's response, so that a reader
// who would not pay for reading it may take it when another reader has.
func (f *Frame) ResponseRead() bool { return f.have&haveResp != 0 }

func (f *Frame) readResponse() {
	if f.resp == nil {
		f.resp = new(Response)
	}
	r := f.resp
	op, version := f.Header.Opcode, f.Header.ProtoVersion()
	if op != OpResult && op != OpError {
		*r = Response{Opcode: op, Version: version, Rows: -1}
		return
	}
	if op == OpResult && f.Compressed() && f.have&haveBody == 0 {
		start := f.Start(StartSize)
		rest, err := SkipResponsePrefix(f.Header.Flags, start)
		if start == nil || err != nil {
			*r = Response{Opcode: op, Version: version, Rows: -1, Cut: true, Err: ErrNoBody}
			return
		}
		if len(rest) < 4 || resultKind(rest) != ResultPrepared {
			countWork(WorkResponse, f.raw[HeaderSize:])
			r.parse(op, version, rest, len(start) == StartSize)
			return
		}
	}
	msg, err := f.Message()
	if err != nil {
		*r = Response{Opcode: op, Version: version, Rows: -1, Err: err}
		return
	}
	countWork(WorkResponse, f.raw[HeaderSize:])
	r.parse(op, version, msg, false)
}

// Result returns the whole of a RESULT response's message decoded (DecodeResult), at most
// once per frame for every reader: for a reader that needs the columns or the rows, such
// as a rewrite of a system table's rows or the learning of a prepared statement's bound
// variables. It allocates; the message belongs to f's reader until the next Reset.
func (f *Frame) Result() (Message, error) {
	if f.have&haveResult == 0 {
		f.have |= haveResult
		f.result, f.resultErr = nil, nil
		msg, err := f.Message()
		if err != nil {
			f.resultErr = err
		} else {
			countWork(WorkResult, f.raw[HeaderSize:])
			f.result, f.resultErr = DecodeResult(msg, f.Header.ProtoVersion())
		}
	}
	return f.result, f.resultErr
}

// readStatement fills f.stmt. It reads the notation by hand rather than through a Decoder:
// it runs on every QUERY the proxy inspects, and the common case is a few bounds checks.
func (f *Frame) readStatement() {
	s := &f.stmt
	*s = Statement{FlagsAt: -1}
	op := f.Header.Opcode
	if op != OpQuery && op != OpPrepare && op != OpExecute && op != OpBatch {
		return
	}
	msg, err := f.Message()
	if err != nil {
		return
	}
	var rest []byte
	switch op {
	case OpQuery, OpPrepare:
		if len(msg) < 4 {
			return
		}
		n := int(int32(binary.BigEndian.Uint32(msg)))
		if n < 0 || n > len(msg)-4 {
			return
		}
		s.Query, rest = msg[4:4+n:4+n], msg[4+n:]
	case OpExecute:
		if len(msg) < 2 {
			return
		}
		n := int(binary.BigEndian.Uint16(msg))
		if n > len(msg)-2 {
			return
		}
		s.ID, rest = msg[2:2+n:2+n], msg[2+n:]
		if f.Header.ProtoVersion() >= V5 { // the result metadata id
			if len(rest) < 2 {
				return
			}
			m := int(binary.BigEndian.Uint16(rest))
			if m > len(rest)-2 {
				return
			}
			rest = rest[2+m:]
		}
	case OpBatch:
		f.readBatchStatement(msg)
		return
	}
	s.Count = 1
	if op == OpPrepare {
		return
	}
	at := 2 // the offset of Flags in the parameters: a byte, or in v5 the low byte of an [int]
	if f.Header.ProtoVersion() >= V5 {
		at = 5
	}
	if len(rest) <= at {
		return
	}
	s.Consistency = Consistency(binary.BigEndian.Uint16(rest))
	s.Flags = rest[at]
	if !f.Compressed() {
		s.FlagsAt = len(f.raw) - len(rest) + at
	}
}

// readBatchStatement fills f.stmt from a BATCH: its first statement and their count.
func (f *Frame) readBatchStatement(msg []byte) {
	d := Decoder{b: msg}
	d.Byte() // the batch type
	n := int(d.Short())
	if n == 0 || d.err != nil {
		return
	}
	var q, id []byte
	if d.Byte() == 0 {
		q = d.LongStringBytes()
	} else {
		id = d.ShortBytes()
	}
	if d.err != nil {
		return
	}
	f.stmt.Query, f.stmt.ID, f.stmt.Count = q, id, n
}

// NewFrame returns a view of the frame made of h and the uncompressed body, with h.Length
// set to the body's length: for a caller that holds a body rather than a frame read from a
// connection. It allocates the frame.
func NewFrame(h Header, body []byte) *Frame {
	h.Length = uint32(len(body))
	h.Flags &^= FlagCompression
	f := new(Frame)
	f.Reset(h, append(AppendHeader(make([]byte, 0, HeaderSize+len(body)), h), body...), nil)
	return f
}

// QueryStart returns the text of a QUERY or PREPARE read from the first n bytes of its
// body (Start, which decompresses only them), for a reader that needs only the
// statement's first words: whole reports whether the text ended within them, else text
// is its start. ok is false when the start holds no readable [long string]. A body with a
// custom payload before the statement is not read: ok is false.
func (f *Frame) QueryStart(n int) (text []byte, whole, ok bool) {
	if f.Header.Flags&FlagCustomPayload != 0 {
		return nil, false, false
	}
	p := f.Start(n)
	if len(p) < 4 {
		return nil, false, false
	}
	d := Decoder{b: p}
	l := int(d.Int())
	if l < 0 {
		return nil, false, false
	}
	if q := p[4:]; l <= len(q) {
		return q[:l:l], true, true
	}
	return p[4:], false, true
}
