package sidecar

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// inspectFrame is inspect on a view of frame, as request builds it, with its effect
// applied as the transports apply it.
func (c *conn) inspectFrame(h cql.Header, frame []byte) (rewriteKind, *tracing.Statement, string) {
	c.views.req.Reset(h, frame, c.compressor())
	k, st, probe, fx := c.inspect(&c.views.req)
	if fx != 0 {
		c.apply(fx)
	}
	return k, st, probe
}

// respView is the view of a response frame, as response builds it; nil for a frame whose
// header cannot be read.
func (c *conn) respView(frame []byte) *cql.Frame {
	h, _ := cql.ParseHeader(frame)
	c.views.resp.Reset(h, frame, c.compressor())
	return &c.views.resp
}
