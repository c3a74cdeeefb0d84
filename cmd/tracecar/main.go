// Command tracecar is a sidecar for CQL nodes: slow-query tracing toggled over a
// ScyllaDB-compatible REST API, a load checker that measures what each tracing mode costs,
// and an embedded in-memory CQL node.
//
// Usage:
//
//	tracecar node      --listen 127.0.0.1:9042 --api 127.0.0.1:10001 [--auth USER:PASS]
//	tracecar sidecar   --listen 127.0.0.1:9043 --node 127.0.0.1:9042 --admin 127.0.0.1:10000 …
//	tracecar loadcheck [--node HOST:PORT] [--sidecar HOST:PORT --admin URL] …
//	tracecar ctl       [--hosts h1:10000,h2:10000] slow-query|trace-probability|logger|status …
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
