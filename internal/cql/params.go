package cql

// Value is a bound value of a QUERY, EXECUTE or BATCH. A nil Bytes with Unset false is
// null; Unset (protocol v4) leaves the column unchanged. An empty non-nil Bytes is an empty
// value, which differs from null.
type Value struct {
	Bytes []byte
	Unset bool
}

// IsNull reports whether v is the null value.
func (v Value) IsNull() bool { return v.Bytes == nil && !v.Unset }

// AppendValue appends v as a [value].
func AppendValue(b []byte, v Value) []byte {
	if v.Unset {
		return AppendInt(b, -2)
	}
	return AppendBytes(b, v.Bytes)
}

// Query parameter flags of QUERY and EXECUTE (and, for the last three, BATCH).
const (
	QueryValues            byte = 0x01
	QuerySkipMetadata      byte = 0x02
	QueryPageSize          byte = 0x04
	QueryPagingState       byte = 0x08
	QuerySerialConsistency byte = 0x10
	QueryDefaultTimestamp  byte = 0x20
	QueryNamedValues       byte = 0x40
	// QueryWithKeyspace (protocol v5) carries the keyspace the statement runs in, over
	// the connection's (QUERY, BATCH; PrepareWithKeyspace for PREPARE).
	QueryWithKeyspace byte = 0x80
)

// QueryNowInSeconds is a flag of protocol v5's [int] query flags beyond the first byte,
// kept in QueryParams.ExtFlags and Batch.ExtFlags: the request carries the time it runs at
// (now_in_seconds), for TTL liveness and deletion times.
const QueryNowInSeconds uint32 = 0x0100

// PrepareWithKeyspace is the flag of a v5 PREPARE that carries the keyspace the statement
// is prepared in.
const PrepareWithKeyspace uint32 = 0x01

// QueryParams are the <query_parameters> of QUERY and EXECUTE. Flags (with ExtFlags) is
// the source of truth: an optional field is encoded only when its flag is set, whatever
// its value, and the decoder leaves the fields of absent flags zero. A QueryParams is safe
// for concurrent use when not modified.
type QueryParams struct {
	Consistency Consistency
	// Flags are the flags of v3 and v4, a [byte], and the first byte of v5's [int].
	Flags byte
	// ExtFlags are the rest of v5's flags, as on the wire (QueryNowInSeconds); its first
	// byte is ignored. Versions 3 and 4 have none.
	ExtFlags uint32
	Values   []Value
	// Names holds the value names when Flags has QueryNamedValues: Names[i] names Values[i].
	Names             []string
	PageSize          int32
	PagingState       []byte
	SerialConsistency Consistency
	Timestamp         int64 // microseconds since the epoch
	// Keyspace (v5, with QueryWithKeyspace) is the keyspace the statement runs in.
	Keyspace string
	// NowInSeconds (v5, with QueryNowInSeconds in ExtFlags) is the time the request runs
	// at, in seconds since the epoch.
	NowInSeconds int32
}

// appendFlags appends query flags: a [byte] before v5, an [int] from v5 on.
func appendFlags(b []byte, flags byte, ext uint32, version byte) []byte {
	if version >= V5 {
		return AppendInt(b, int32(ext&^0xff|uint32(flags)))
	}
	return append(b, flags)
}

// QueryFlags reads query flags of the given version: a [byte] before v5, an [int] from v5
// on, returned as its first byte and the rest.
func (d *Decoder) QueryFlags(version byte) (flags byte, ext uint32) {
	if version >= V5 {
		v := uint32(d.Int())
		return byte(v), v &^ 0xff
	}
	return d.Byte(), 0
}

// AppendQueryParams appends p as <query_parameters> for the protocol version.
func AppendQueryParams(b []byte, p QueryParams, version byte) []byte {
	b = AppendShort(b, uint16(p.Consistency))
	b = appendFlags(b, p.Flags, p.ExtFlags, version)
	if p.Flags&QueryValues != 0 {
		b = appendValues(b, p.Flags, p.Names, p.Values)
	}
	if p.Flags&QueryPageSize != 0 {
		b = AppendInt(b, p.PageSize)
	}
	if p.Flags&QueryPagingState != 0 {
		b = AppendBytes(b, p.PagingState)
	}
	return appendParamsTail(b, &p, version)
}

// appendParamsTail appends what follows the paging state in <query_parameters>, which a
// BATCH's parameters end with too: the serial consistency, the default timestamp, and v5's
// keyspace and now_in_seconds, each when p's flags say so.
func appendParamsTail(b []byte, p *QueryParams, version byte) []byte {
	if p.Flags&QuerySerialConsistency != 0 {
		b = AppendShort(b, uint16(p.SerialConsistency))
	}
	if p.Flags&QueryDefaultTimestamp != 0 {
		b = AppendLong(b, p.Timestamp)
	}
	if version >= V5 {
		if p.Flags&QueryWithKeyspace != 0 {
			b = AppendString(b, p.Keyspace)
		}
		if p.ExtFlags&QueryNowInSeconds != 0 {
			b = AppendInt(b, p.NowInSeconds)
		}
	}
	return b
}

func appendValues(b []byte, flags byte, names []string, values []Value) []byte {
	b = AppendShort(b, uint16(len(values)))
	for i, v := range values {
		if flags&QueryNamedValues != 0 {
			var n string
			if i < len(names) {
				n = names[i]
			}
			b = AppendString(b, n)
		}
		b = AppendValue(b, v)
	}
	return b
}
