package pipeline

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// inspectFrame is inspect on a view of frame, as request builds it, with its effect
// applied as the transports apply it.
func (c *Conn) inspectFrame(h cql.Header, frame []byte) (rewriteKind, *tracing.Statement, string) {
	c.Views.req.Reset(h, frame, c.compressor())
	k, st, probe, _ := c.inspect(&c.Views.req)
	return k, st, probe
}

// respView is the view of a response frame, as response builds it; nil for a frame whose
// header cannot be read.
func (c *Conn) respView(frame []byte) *cql.Frame {
	h, _ := cql.ParseHeader(frame)
	c.Views.resp.Reset(h, frame, c.compressor())
	return &c.Views.resp
}
