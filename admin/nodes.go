package admin

import (
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// addNodeRoutes registers the node control endpoints when there is a NodeControl.
func (s *opsAPI) addNodeRoutes() {
	if s.nodes == nil {
		return
	}
	s.exact["/tracecar/node/stop"] = route{http.MethodPost: func(ctx *fasthttp.RequestCtx, _ string) error { return s.nodeOp(ctx, "stop", s.nodes.Stop) }}
	s.exact["/tracecar/node/start"] = route{http.MethodPost: func(ctx *fasthttp.RequestCtx, _ string) error { return s.nodeOp(ctx, "start", s.nodes.Start) }}
	s.exact["/tracecar/nodes"] = route{http.MethodGet: s.getNodes}
}

// getNodes serves GET /tracecar/nodes.
func (s *opsAPI) getNodes(ctx *fasthttp.RequestCtx, _ string) error {
	out := make(adminapi.NodeStates, s.nodes.Len())
	for i := range out {
		out[i] = adminapi.NodeState{Node: i + 1, Up: s.nodes.Up(i)}
	}
	return writeJSON(ctx, out)
}

func (s *opsAPI) nodeOp(ctx *fasthttp.RequestCtx, what string, op func(int) error) error {
	p, err := readParams(ctx, "node")
	if err != nil {
		return err
	}
	n := s.nodes.Len()
	want := "a node number from 1 to " + strconv.Itoa(n)
	v, ok := p["node"]
	if !ok {
		return errorf(http.StatusBadRequest, "missing parameter node: want %s", want)
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 1 || i > n {
		return badParam("node", v, want)
	}
	if err := op(i - 1); err != nil {
		if s.nodeStateErr != nil && s.nodeStateErr(err) {
			return errorf(http.StatusConflict, "%v", err)
		}
		return err
	}
	s.log.Warn().Str("remote", ctx.RemoteAddr().String()).Int("node", i).Msg("node " + what + " through the API")
	return nil
}
