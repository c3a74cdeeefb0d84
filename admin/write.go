package admin

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// The answers' bodies: every JSON body is a shape of package adminapi, and an error's is
// adminapi.ErrorBody (errors.go).

// writeJSON sends v as a JSON body, 200 unless the status is set. Every body the API
// writes is a shape of package adminapi.
func writeJSON(ctx *fasthttp.RequestCtx, v adminapi.Shape) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
	return nil
}

// writeError sends err as JSON.
func writeError(ctx *fasthttp.RequestCtx, err *Error) {
	writeJSON(ctx, err)
	ctx.SetStatusCode(err.Code)
}
