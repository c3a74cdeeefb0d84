package statements

import "github.com/tracecar/tracecar/internal/cql"

// params are the parts of a QUERY's or EXECUTE's parameters that statistics use.
type params struct {
	cl        cql.Consistency
	hasValues bool
	pageSize  int32 // 0 when absent
}

// readParams reads <query_parameters> of the protocol version up to the page size, without allocating
// (cql.Decoder.QueryParams makes the values' slices).
func readParams(d *cql.Decoder, version byte) params {
	var p params
	p.cl = d.Consistency()
	flags, _ := d.QueryFlags(version)
	if flags&cql.QueryValues != 0 {
		n := d.Short()
		p.hasValues = n > 0
		for ; n > 0 && d.Err() == nil; n-- {
			if flags&cql.QueryNamedValues != 0 {
				d.StringBytes()
			}
			d.Value()
		}
	}
	if flags&cql.QueryPageSize != 0 {
		p.pageSize = d.Int()
	}
	return p
}
