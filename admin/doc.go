// Package admin is tracecar's administrative REST API, served with fasthttp.
//
// It serves ScyllaDB's endpoints for slow-query tracing, trace probability and loggers with
// Scylla's paths, parameters and response shapes, so that scripts written for a Scylla node
// work unchanged against a sidecar:
//
//	GET  /storage_service/slow_query          {"enable":false,"ttl":86400,"threshold":500000,"fast":false}
//	POST /storage_service/slow_query          enable, fast, threshold (µs), ttl (s); each optional
//	GET  /storage_service/trace_probability   a bare number, such as 0.25
//	POST /storage_service/trace_probability   probability in [0,1], required
//	GET  /system/logger                       ["sidecar","tracing",…]
//	POST /system/logger                       level, required: sets every logger
//	GET  /system/logger/{name}                "info"
//	POST /system/logger/{name}                level: error, warn, info, debug or trace
//	GET  /storage_service/logging_level       [{"key":"sidecar","value":"info"},…]
//
// and tracecar's own: GET /tracecar/slow_log?limit=N, /tracecar/sessions/{id},
// /tracecar/status, /metrics (Prometheus text), /healthz and /readyz.
//
// It is stricter than Scylla on purpose. A POST checks every parameter before it applies
// any, then applies them together or not at all. A parameter it does not know, a value it
// cannot parse, an empty value or a repeated parameter is a 400 whose JSON body,
// {"code":400,"message":"…"}, names the parameter and what it accepts; Scylla would ignore
// some of these and half-apply others. Parameters may come in the query string, as Scylla
// takes them, or form-encoded in the body.
//
// Every JSON body is a shape declared in package adminapi, which the clients (tracecar ctl,
// the load checker) decode: writeJSON takes nothing else, and shapes.go converts the
// engine's values into them. A Server takes one Config, whose zero value works; its
// handlers are grouped by concern (scyllaAPI, tracingAPI, opsAPI) over the state they
// share.
//
// With a token configured, every endpoint but /healthz wants "Authorization: Bearer TOKEN"
// and answers 401 otherwise, before it routes, so an unauthenticated client learns nothing
// about what is served. Every change is logged on the admin logger with the remote address
// and the old and new values.
//
// # Layers
//
// The files of the package are layers: a file uses declarations of the files below it,
// never of one above it (ci.TestFilesPointDown fails on a cycle, and prints it). From the
// ground up: what the handlers read and write, the core they share, the handlers by
// endpoint, the server.
//
//	errors.go, write.go     Error and the status of an error; a JSON body written
//	params.go               a request's parameters, read and checked
//	shapes.go               the engine's values converted into adminapi's shapes
//	process.go, shards.go   the process and shards of the status
//	parts.go                what the API needs from each part it serves (Tracer, Loggers,
//	                        Node, AuditLog, Statements, Capture, …)
//	config.go               Config, which names the parts
//	timers.go               the toggles' timers: their state, what each puts back, for=
//
//	core.go                 Server, core (what the handlers share), the groups of handlers
//	                        over it, the route table's types; a change's log line, updateConfig
//	node.go                 calls to the node's API; a change made on the node too
//	toggle.go               a toggle's change under its timer, the expiry, the timers' handover
//
//	storage_service.go      slow_query, trace_probability and logging_level (scyllaAPI)
//	system.go               the loggers, the node's too (scyllaAPI)
//	node_probability.go     the node's own trace probability (scyllaAPI)
//	trace_context.go, trace_filter.go, trace_floor.go, slowlog.go, guardrail.go
//	                        the tracing endpoints (tracingAPI)
//	statements.go, capture.go, audit.go, queries.go, nodes.go, metrics.go, ops.go
//	                        what operates the sidecar (opsAPI)
//	tracecar.go             the status, health, a recorded session; ConfigOnly
//	server.go               New and the route table, Serve, and a request's authentication,
//	                        write gate and routing
package admin
