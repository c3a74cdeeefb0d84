package statements

import "github.com/tracecar/tracecar/internal/cql"

// params are the parts of a QUERY's or EXECUTE's parameters that statistics use.
type params struct {
	cl        cql.Consistency // 0xffff when unreadable
	hasValues bool
	pageSize  int32 // 0 when absent
}

// paramsOf returns the parameters of the parsed request req.
func paramsOf(req *cql.Request) params {
	if req.Err != nil || !req.HasParams {
		return params{cl: 0xffff}
	}
	p := params{cl: req.Params.Consistency, hasValues: len(req.Params.Values) > 0}
	if req.Params.HasPageSize() {
		p.pageSize = req.Params.PageSize
	}
	return p
}
