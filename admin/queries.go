package admin

import (
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// Limits of /tracecar/queries.
const (
	DefaultQueriesLimit = 100
	MaxQueriesLimit     = 100000
)

// addQueryRoutes adds GET /tracecar/queries when the server has requests in flight to show.
func (s *opsAPI) addQueryRoutes() {
	if s.queries != nil {
		s.exact[adminapi.PathQueries] = route{http.MethodGet: s.getQueries}
	}
}

// getQueries serves GET /tracecar/queries?min_elapsed=D&limit=N: the requests in flight
// for at least D (a duration such as 100ms), longest first, at most N (default 100).
func (s *opsAPI) getQueries(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "min_elapsed", "limit")
	if err != nil {
		return err
	}
	min, _, err := p.duration("min_elapsed", 0, "a duration of 0 or more, such as 100ms or 2s")
	if err != nil {
		return err
	}
	limit, ok, err := p.integer("limit", 1, MaxQueriesLimit, "an integer from 1 to "+strconv.Itoa(MaxQueriesLimit))
	if err != nil {
		return err
	}
	if !ok {
		limit = DefaultQueriesLimit
	}
	out := adminapi.Queries(s.queries(min, int(limit)))
	if out == nil {
		out = adminapi.Queries{}
	}
	return writeJSON(ctx, out)
}
