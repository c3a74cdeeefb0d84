package admin

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/internal/buildinfo"
)

// Process is the process part of /tracecar/status.
type Process = adminapi.Process

// ProcessPeer is another sidecar process.
type ProcessPeer = adminapi.ProcessPeer

// Handover describes the handover from the predecessor.
type Handover = adminapi.Handover

// build is the running binary, as /tracecar/status names it.
var build = adminapi.Build(buildinfo.Read())

// gated answers a request that the write gate refuses, and reports whether it did. While
// the gate is closed every response closes its connection, reads too: the listener is the
// new process's, and a client's next connection reaches it.
func (s *Server) gated(ctx *fasthttp.RequestCtx, method string) bool {
	if s.writeGate == nil {
		return false
	}
	err := s.writeGate()
	if err == nil {
		return false
	}
	ctx.SetConnectionClose()
	if method == http.MethodGet {
		return false
	}
	writeError(ctx, errorf(http.StatusServiceUnavailable, "%v", err))
	return true
}
