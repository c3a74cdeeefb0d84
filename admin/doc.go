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
package admin
