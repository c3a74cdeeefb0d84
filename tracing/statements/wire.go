package statements

import (
	"encoding/binary"

	"github.com/tracecar/tracecar/internal/cql"
)

// reader reads the CQL notation from a body without allocating. A read past the end sets
// bad and returns zero values.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte1() byte {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (r *reader) short() int {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(b))
}

func (r *reader) int32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *reader) shortBytes() []byte { return r.take(r.short()) }

func (r *reader) longString() []byte {
	n := r.int32()
	if n < 0 {
		r.bad = true
		return nil
	}
	return r.take(int(n))
}

// value skips a [value]: an int length, then that many bytes (-1 null, -2 unset). It
// returns the bytes.
func (r *reader) value() []byte {
	n := r.int32()
	if n < 0 {
		return nil
	}
	return r.take(int(n))
}

// skipTypeOption skips an [option] that describes a type.
func (r *reader) skipTypeOption(depth int) {
	if depth > 32 {
		r.bad = true
		return
	}
	switch id := r.short(); id {
	case 0x0000: // custom
		r.shortBytes()
	case 0x0020, 0x0022: // list, set
		r.skipTypeOption(depth + 1)
	case 0x0021: // map
		r.skipTypeOption(depth + 1)
		r.skipTypeOption(depth + 1)
	case 0x0030: // UDT
		r.shortBytes()
		r.shortBytes()
		n := r.short()
		for i := 0; i < n && !r.bad; i++ {
			r.shortBytes()
			r.skipTypeOption(depth + 1)
		}
	case 0x0031: // tuple
		n := r.short()
		for i := 0; i < n && !r.bad; i++ {
			r.skipTypeOption(depth + 1)
		}
	}
}

// skipResponsePrefix skips the tracing id, warnings and custom payload that flags announce.
func (r *reader) skipResponsePrefix(flags byte) {
	if flags&cql.FlagTracing != 0 {
		r.take(16)
	}
	if flags&cql.FlagWarning != 0 {
		n := r.short()
		for i := 0; i < n && !r.bad; i++ {
			r.shortBytes()
		}
	}
	if flags&cql.FlagCustomPayload != 0 {
		n := r.short()
		for i := 0; i < n && !r.bad; i++ {
			r.shortBytes()
			r.value()
		}
	}
}

// params are the parts of a QUERY's or EXECUTE's parameters that statistics use.
type params struct {
	cl        cql.Consistency
	hasValues bool
	pageSize  int32 // 0 when absent
	firstVal  []byte
}

// readParams reads <query_parameters> (v3/v4) up to the page size.
func (r *reader) readParams() params {
	var p params
	p.cl = cql.Consistency(r.short())
	flags := r.byte1()
	if flags&cql.QueryValues != 0 {
		n := r.short()
		p.hasValues = n > 0
		for i := 0; i < n && !r.bad; i++ {
			if flags&cql.QueryNamedValues != 0 {
				r.shortBytes()
			}
			v := r.value()
			if i == 0 {
				p.firstVal = v
			}
		}
	}
	if flags&cql.QueryPageSize != 0 {
		p.pageSize = r.int32()
	}
	return p
}

// rowsCount reads the row count of a RESULT body (prefix skipped); ok is false when the
// body is not a Rows result or cannot be read.
func rowsCount(body []byte) (n uint64, ok bool) {
	r := reader{b: body}
	if r.int32() != cql.ResultRows {
		return 0, false
	}
	flags := r.int32()
	cols := int(r.int32())
	if flags&cql.RowsHasMorePages != 0 {
		r.take(int(r.int32()))
	}
	if flags&cql.RowsNoMetadata == 0 {
		if flags&cql.RowsGlobalTableSpec != 0 {
			r.shortBytes()
			r.shortBytes()
		}
		for i := 0; i < cols && !r.bad; i++ {
			if flags&cql.RowsGlobalTableSpec == 0 {
				r.shortBytes()
				r.shortBytes()
			}
			r.shortBytes()
			r.skipTypeOption(0)
		}
	}
	c := r.int32()
	if r.bad || c < 0 {
		return 0, false
	}
	return uint64(c), true
}

// preparedResult reads a RESULT Prepared body (prefix skipped): the statement id and the
// number of columns its rows have (-1 when unknown).
func preparedResult(body []byte, version byte) (id []byte, columns int, ok bool) {
	r := reader{b: body}
	if r.int32() != cql.ResultPrepared {
		return nil, -1, false
	}
	id = r.shortBytes()
	if r.bad {
		return nil, -1, false
	}
	// <metadata> of the bound variables.
	flags := r.int32()
	n := int(r.int32())
	if version >= cql.V4 {
		pk := int(r.int32())
		for i := 0; i < pk && !r.bad; i++ {
			r.short()
		}
	}
	global := flags&cql.RowsGlobalTableSpec != 0
	if global {
		r.shortBytes()
		r.shortBytes()
	}
	for i := 0; i < n && !r.bad; i++ {
		if !global {
			r.shortBytes()
			r.shortBytes()
		}
		r.shortBytes()
		r.skipTypeOption(0)
	}
	// <result_metadata>
	r.int32()
	columns = int(r.int32())
	if r.bad {
		return id, -1, true
	}
	return id, columns, true
}
