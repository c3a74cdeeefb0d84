// Command tracecar is a sidecar for CQL nodes: slow-query tracing toggled over a
// ScyllaDB-compatible REST API, a load checker that measures what each tracing mode costs,
// and an embedded in-memory CQL node.
//
// Usage:
//
//	tracecar node      --listen 127.0.0.1:9042 --api 127.0.0.1:10001 [--auth USER:PASS]
//	tracecar sidecar   --listen 127.0.0.1:9043 --node 127.0.0.1:9042 --admin 127.0.0.1:10000 …
//	tracecar loadcheck [--node HOST:PORT [--sidecar HOST:PORT --admin URL] --rate OP/S] …
//	tracecar ctl       [--hosts h1:10000,h2:10000] slow-query|trace-probability|logger|status …
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startCPUProfile(os.Getenv("TRACECAR_CPUPROFILE"))
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(code)
}

// startCPUProfile writes a CPU profile of the whole run to path, when path is set: for
// profiling a sidecar or node under real load.
func startCPUProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tracecar: TRACECAR_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "tracecar: TRACECAR_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
