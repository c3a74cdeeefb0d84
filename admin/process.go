package admin

import (
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
