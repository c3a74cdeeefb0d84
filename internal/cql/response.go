package cql

// Response is what a RESULT or ERROR response says, read by Frame.Response at most once
// per frame for every reader, as Request is for a request: an ERROR's code and message, a
// RESULT's kind, a Rows result's row count and paging state, a Prepared result's id, the
// keyspace of its first bound variable, its result column count and (v5) its result
// metadata id. The cells of the rows are not read, nor the column specs built: a reader
// of the whole result takes Frame.Result.
//
// Its slices alias the message it was read from (the frame's body after its prefix, or the
// start of a compressed body); they are valid as long as that is. The zero Response holds
// nothing. A Response is not safe for concurrent use while it is read; afterwards it may
// be read concurrently.
type Response struct {
	// Opcode is the response's opcode; the fields below are read for OpResult and OpError
	// only.
	Opcode Opcode
	// Version is the protocol version the response was read at, without the response bit.
	Version byte
	// Kind is a RESULT's kind (ResultVoid, ResultRows, …), 0 when it could not be read.
	Kind int32
	// ErrCode and ErrMessage are an ERROR's code and message.
	ErrCode    int32
	ErrMessage []byte
	// Rows is a Rows result's row count, -1 for another response or when the count lies
	// beyond what was read (Cut).
	Rows int
	// PagingState is the paging state of a Rows page that has more after it, nil for the
	// last page.
	PagingState []byte
	// Prepared is what a Prepared result says (ReadPrepared); its ID is nil for another
	// response.
	Prepared PreparedInfo
	// Cut reports that the response was read from the start of a compressed body only
	// (Frame.Start, StartSize bytes), so that a compressed RESULT is not decompressed
	// whole for its kind and row count alone: what lies beyond the start is unread.
	Cut bool
	// Err is nil for a response read whole, and otherwise what stopped the reading.
	Err error
}

// ErrorRead reports whether r is an ERROR whose code and message were read.
func (r *Response) ErrorRead() bool { return r.Opcode == OpError && r.Err == nil }

// Parse makes r the response of opcode op and protocol version version whose message (its
// body after the response prefix) is msg. Most readers take a Response from
// Frame.Response, which reads at most once per frame; Parse is for a reader that holds a
// message and no frame, such as a client. Parse counts as work (CountWork, WorkResponse).
func (r *Response) Parse(op Opcode, version byte, msg []byte) {
	countWork(WorkResponse, msg)
	r.parse(op, version, msg, false)
}

func (r *Response) parse(op Opcode, version byte, msg []byte, cut bool) {
	*r = Response{Opcode: op, Version: version, Rows: -1, Cut: cut}
	d := Decoder{b: msg}
	switch op {
	case OpError:
		r.ErrCode = d.Int()
		r.ErrMessage = d.StringBytes()
		r.Err = d.err
	case OpResult:
		r.Kind = d.Int()
		if d.err != nil {
			r.Kind, r.Err = 0, d.err
			return
		}
		switch r.Kind {
		case ResultRows:
			n, state, ok := RowsPage(msg)
			if ok {
				r.Rows, r.PagingState = n, state
			} else {
				r.Err = ErrMalformed
			}
		case ResultPrepared:
			p, ok := ReadPrepared(msg, version)
			if ok {
				r.Prepared = p
			} else {
				r.Err = ErrMalformed
			}
		}
	}
}

// resultKind returns the kind at the start of a RESULT message of at least 4 bytes.
func resultKind(msg []byte) int32 {
	d := Decoder{b: msg}
	return d.Int()
}
