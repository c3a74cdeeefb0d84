package admin

import "github.com/valyala/fasthttp"

// The node's own trace probability, which the sidecar's trace_probability leaves alone
// (unless Config.NodeApply says otherwise): /tracecar/node/trace_probability.

// getNodeProbability serves GET /tracecar/node/trace_probability: the node's own
// probability, a bare number.
func (s *scyllaAPI) getNodeProbability(ctx *fasthttp.RequestCtx, _ string) error {
	c, cancel := nodeContext()
	defer cancel()
	p, err := s.node.TraceProbability(c)
	if err != nil {
		return nodeError("node trace_probability", err)
	}
	writeProbability(ctx, p)
	return nil
}

// setNodeProbability serves POST /tracecar/node/trace_probability?probability=P: the
// node's own probability only, the sidecar's stays.
func (s *scyllaAPI) setNodeProbability(ctx *fasthttp.RequestCtx, _ string) error {
	prob, _, err := probabilityParam(ctx, false)
	if err != nil {
		return err
	}
	c, cancel := nodeContext()
	defer cancel()
	if err := s.node.SetTraceProbability(c, prob); err != nil {
		return nodeError("node trace_probability", err)
	}
	s.audit(ctx, "node trace_probability").Str("node", s.node.Kind()).Float64("new", prob).Msg("admin change")
	return nil
}
