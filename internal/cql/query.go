package cql

// Query is a QUERY request. It is safe for concurrent use when not modified.
type Query struct {
	Query  string
	Params QueryParams
}

// Opcode returns OpQuery.
func (Query) Opcode() Opcode { return OpQuery }

// AppendBody appends the query string and its parameters.
func (m Query) AppendBody(b []byte, version byte) []byte {
	return AppendQueryParams(AppendLongString(b, m.Query), m.Params, version)
}

// DecodeQuery decodes a QUERY body. Values and the paging state alias body.
func DecodeQuery(body []byte, version byte) (Query, error) {
	var r Request
	if err := r.decode(OpQuery, version, body); err != nil {
		return Query{}, err
	}
	return Query{Query: string(r.Query), Params: r.Params.owned()}, nil
}

// Prepare is a PREPARE request. It is safe for concurrent use.
type Prepare struct {
	Query string
	// Keyspace (protocol v5) is the keyspace the statement is prepared in, over the
	// connection's; empty means the connection's.
	Keyspace string
}

// Opcode returns OpPrepare.
func (Prepare) Opcode() Opcode { return OpPrepare }

// AppendBody appends the query as a [long string], and from v5 on the [int] flags and the
// keyspace.
func (m Prepare) AppendBody(b []byte, version byte) []byte {
	b = AppendLongString(b, m.Query)
	if version < V5 {
		return b
	}
	if m.Keyspace == "" {
		return AppendInt(b, 0)
	}
	return AppendString(AppendInt(b, int32(PrepareWithKeyspace)), m.Keyspace)
}

// DecodePrepare decodes a PREPARE body of the protocol version.
func DecodePrepare(body []byte, version byte) (Prepare, error) {
	d := Decoder{b: body}
	m := Prepare{Query: d.LongString()}
	if version >= V5 && uint32(d.Int())&PrepareWithKeyspace != 0 {
		m.Keyspace = d.String()
	}
	if err := finish(&d); err != nil {
		return Prepare{}, err
	}
	return m, nil
}

// Execute is an EXECUTE request for a prepared statement. It is safe for concurrent use
// when not modified.
type Execute struct {
	ID []byte
	// ResultMetadataID (protocol v5) is the id of the result metadata the client holds for
	// the statement, from its Prepared result or a later Rows result that changed it.
	ResultMetadataID []byte
	Params           QueryParams
}

// Opcode returns OpExecute.
func (Execute) Opcode() Opcode { return OpExecute }

// AppendBody appends the statement id (and from v5 on the result metadata id) and the
// parameters.
func (m Execute) AppendBody(b []byte, version byte) []byte {
	b = AppendShortBytes(b, m.ID)
	if version >= V5 {
		b = AppendShortBytes(b, m.ResultMetadataID)
	}
	return AppendQueryParams(b, m.Params, version)
}

// DecodeExecute decodes an EXECUTE body. The ids, values and paging state alias body.
func DecodeExecute(body []byte, version byte) (Execute, error) {
	var m Execute
	err := DecodeExecuteInto(&m, body, version)
	return m, err
}

// DecodeExecuteInto is DecodeExecute into *m, whose Params.Values' backing array it reuses
// when it is large enough: a server that handles a connection's requests one at a time
// decodes each into the same Execute and allocates nothing for its bound values. On an
// error *m is zero but for that array.
func DecodeExecuteInto(m *Execute, body []byte, version byte) error {
	spare := m.Params.Values[:0]
	var r Request
	r.values = spare // the values are read into it
	if err := r.decode(OpExecute, version, body); err != nil {
		*m = Execute{Params: QueryParams{Values: spare}}
		return err
	}
	q := r.Params.owned()
	if len(q.Values) > 0 {
		q.Values = r.values[:len(q.Values)] // with the array's whole capacity, for the next EXECUTE
	}
	*m = Execute{ID: r.ID, ResultMetadataID: r.ResultMetadataID, Params: q}
	return nil
}

// Batch types.
const (
	BatchLogged   byte = 0
	BatchUnlogged byte = 1
	BatchCounter  byte = 2
)

// BatchQuery is one statement of a BATCH: a query string, or the id of a prepared
// statement when Prepared is true. Names is used only when the batch's Flags has
// QueryNamedValues. It is safe for concurrent use when not modified.
type BatchQuery struct {
	Prepared bool
	Query    string
	ID       []byte
	Values   []Value
	Names    []string
}

// Batch is a BATCH request. Flags uses the bits QuerySerialConsistency,
// QueryDefaultTimestamp and QueryNamedValues (and in v5 QueryWithKeyspace, and ExtFlags
// QueryNowInSeconds), and is the source of truth for which optional fields are encoded.
// It is safe for concurrent use when not modified.
type Batch struct {
	Type              byte // BatchLogged, BatchUnlogged or BatchCounter
	Queries           []BatchQuery
	Consistency       Consistency
	Flags             byte
	ExtFlags          uint32 // v5's flags beyond the first byte, as in QueryParams
	SerialConsistency Consistency
	Timestamp         int64  // microseconds since the epoch
	Keyspace          string // v5, with QueryWithKeyspace
	NowInSeconds      int32  // v5, with QueryNowInSeconds in ExtFlags
}

// Opcode returns OpBatch.
func (Batch) Opcode() Opcode { return OpBatch }

// AppendBody appends the batch.
func (m Batch) AppendBody(b []byte, version byte) []byte {
	b = append(b, m.Type)
	b = AppendShort(b, uint16(len(m.Queries)))
	for _, q := range m.Queries {
		if q.Prepared {
			b = AppendShortBytes(append(b, 1), q.ID)
		} else {
			b = AppendLongString(append(b, 0), q.Query)
		}
		b = appendValues(b, m.Flags, q.Names, q.Values)
	}
	b = AppendShort(b, uint16(m.Consistency))
	b = appendFlags(b, m.Flags, m.ExtFlags, version)
	return appendParamsTail(b, &QueryParams{Flags: m.Flags, ExtFlags: m.ExtFlags, SerialConsistency: m.SerialConsistency,
		Timestamp: m.Timestamp, Keyspace: m.Keyspace, NowInSeconds: m.NowInSeconds}, version)
}

// DecodeBatch decodes a BATCH body. Ids and values alias body.
//
// Whether values carry names is told by the flags, which come after the statements, so the
// body is read as unnamed values first and, when that does not fit, as named values.
func DecodeBatch(body []byte, version byte) (Batch, error) {
	var r Request
	if err := r.decode(OpBatch, version, body); err != nil {
		return Batch{}, err
	}
	p := r.Params.owned()
	m := Batch{Type: r.BatchType, Consistency: p.Consistency, Flags: p.Flags, ExtFlags: p.ExtFlags,
		SerialConsistency: p.SerialConsistency, Timestamp: p.Timestamp, Keyspace: p.Keyspace, NowInSeconds: p.NowInSeconds}
	if len(r.Batch) > 0 {
		m.Queries = make([]BatchQuery, len(r.Batch))
	}
	for i, st := range r.Batch {
		q := &m.Queries[i]
		q.Prepared, q.ID = st.Prepared, st.ID
		if !st.Prepared {
			q.Query = string(st.Query)
		}
		q.Values, q.Names = st.Values, nameStrings(st.Names)
	}
	return m, nil
}

// decode parses body as the server's decoders read it: whole, or an error. A server's
// parse is its own work, not a reader's of a proxied frame, so it is not counted.
func (r *Request) decode(op Opcode, version byte, body []byte) error {
	r.parse(op, version, body)
	switch {
	case r.Err != nil:
		return r.Err
	case r.trailing:
		return ErrMalformed
	}
	return nil
}

// owned returns p as a QueryParams. Its values are p's, in the array the request read
// them into, which the server's decoders own; the values and the paging state alias the
// message.
func (p *Params) owned() QueryParams {
	return QueryParams{Consistency: p.Consistency, Flags: p.Flags, ExtFlags: p.ExtFlags, PageSize: p.PageSize,
		PagingState: p.PagingState, SerialConsistency: p.SerialConsistency, Timestamp: p.Timestamp,
		Keyspace: string(p.Keyspace), NowInSeconds: p.NowInSeconds, Values: p.Values, Names: nameStrings(p.Names)}
}

// nameStrings returns names as strings, or nil for none.
func nameStrings(names [][]byte) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	return out
}
