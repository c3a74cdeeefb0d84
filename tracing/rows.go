package tracing

import "github.com/tracecar/tracecar/internal/cql"

// responseRows returns the row count of a RESULT Rows response, or -1: from the view's
// body when it is not compressed, or has been decompressed by another reader. A
// compressed response is not decompressed for this.
func responseRows(f *cql.Frame) int {
	if f.Header.Opcode != cql.OpResult || f.Compressed() && !f.Decompressed() {
		return -1
	}
	rest, err := f.Message()
	if err != nil {
		return -1
	}
	if n, ok := rowsCount(rest); ok {
		return n
	}
	return -1
}

// rowsCount returns the row count of a RESULT Rows body (after the response prefix), for
// db.response.returned_rows, and false for any other result or a body it cannot read. It
// skips the metadata without allocating, since full mode calls it on every traced
// response.
func rowsCount(body []byte) (int, bool) {
	var d cql.Decoder
	d.Reset(body)
	if d.Int() != cql.ResultRows {
		return 0, false
	}
	flags := d.Int()
	cols := int(d.Int())
	if flags&cql.RowsHasMorePages != 0 {
		d.Bytes()
	}
	if flags&cql.RowsNoMetadata == 0 {
		global := flags&cql.RowsGlobalTableSpec != 0
		if global {
			d.StringBytes()
			d.StringBytes()
		}
		for i := 0; i < cols && d.Err() == nil; i++ {
			if !global {
				d.StringBytes()
				d.StringBytes()
			}
			d.StringBytes()
			if !skipType(&d, 0) {
				return 0, false
			}
		}
	}
	n := d.Int()
	if d.Err() != nil || n < 0 {
		return 0, false
	}
	return int(n), true
}

// skipType skips a type <option>, and reports false when it nests deeper than any real
// schema does (a hostile response).
func skipType(d *cql.Decoder, depth int) bool {
	if depth > 32 {
		return false
	}
	ok := true
	switch d.Short() {
	case 0x0000: // custom
		d.StringBytes()
	case 0x0020, 0x0022: // list, set
		ok = skipType(d, depth+1)
	case 0x0021: // map
		ok = skipType(d, depth+1) && skipType(d, depth+1)
	case 0x0030: // UDT
		d.StringBytes()
		d.StringBytes()
		for n := int(d.Short()); n > 0 && ok && d.Err() == nil; n-- {
			d.StringBytes()
			ok = skipType(d, depth+1)
		}
	case 0x0031: // tuple
		for n := int(d.Short()); n > 0 && ok && d.Err() == nil; n-- {
			ok = skipType(d, depth+1)
		}
	}
	return ok
}
