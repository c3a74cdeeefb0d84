package pipeline

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
)

// The workload capture's hooks on the per-frame pipeline (pipeline.go): with no capture
// running they cost one atomic load per request (Capture.Active) and nothing per
// response; while one runs, the request and its response are handed to it through the
// views the pipeline decoded them into.

// captureRequest hands the request in f, of n bytes, arrived at now (0: not read yet), to
// the running capture s, and returns its record for the stream table.
func (c *Conn) captureRequest(s *capture.Session, f *cql.Frame, now int64, n int) *capture.Record {
	if c.capt.sess != s {
		c.capt.sess, c.capt.id = s, s.NewConn()
	}
	if now == 0 {
		now = tracing.Now()
	}
	return s.Request(f, c.capt.id, c.capt.keyspace.Load(), now, n)
}

// captureResponse hands the response in f, arrived at arrived (0: not read yet), to the
// capture of its request's record r.
func captureResponse(r *capture.Record, f *cql.Frame, arrived int64) {
	if arrived == 0 {
		arrived = tracing.Now()
	}
	r.Response(f, arrived)
}
