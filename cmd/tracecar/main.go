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
//
// # Files
//
// The files are layers: a file uses declarations of the files below it, never of one above
// it (ci.TestFilesPointDown fails on a cycle, and prints it). From the ground up:
//
//	flags.go                  the flag sets and their usage errors, the logging flags, --trace-floor
//	limits.go, memory.go      sizes, protocol versions, connections; --memory-limit
//	tls.go, peers.go          the TLS flags; the map of peers (--cluster-file, --peers)
//	config.go, live.go        the sidecar's --config file; what SIGHUP reloads
//	statements.go, audit.go   the statement statistics' flags and options; the audit log's flags
//	notify.go, queries.go     systemd's notification socket; the proxy's queries, for the admin API
//	children.go, verdict.go   loadcheck's child processes; its verdict's flags
//
//	stack.go                  stackConfig, the stack and its lifecycle, what it holds of a handover
//	guardrail.go, sinks.go    the guardrail's flags and source; the tracing sinks
//	capture.go                the workload capture, and `tracecar capture`
//	embedded.go, auditlog.go  the embedded node and its API; the audit log and its sinks
//	handover.go               the takeover, the control socket's actor, the runtime state
//	shards.go                 the shard-aware port, its status and metrics
//	tracer.go                 the tracer, the admin API's options, the proxy, the listeners
//	start.go                  a stack built from its parts, in order, and started
//	serve.go                  a sidecar's lifecycle group: its stack, signals and control socket
//
//	sidecar.go, node.go       the commands: `tracecar sidecar` and `tracecar node`,
//	loadcheck.go, ctl.go      `tracecar loadcheck` and `tracecar ctl`
//	run.go, main.go           the command line dispatched, and its exit codes
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := startCPUProfile(os.Getenv("TRACECAR_CPUPROFILE"))
	stopAllocs := startAllocProfile(os.Getenv("TRACECAR_ALLOCPROFILE"))
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stopAllocs()
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

// startAllocProfile writes the allocations of the whole run (pprof's allocs profile) to path
// at exit, when path is set: which code allocates how much per request, under real load. It
// samples one allocation per 4 KiB instead of per 512 KiB, and collects before it writes, as
// the profile holds what the last completed collection saw.
func startAllocProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tracecar: TRACECAR_ALLOCPROFILE: %v\n", err)
		return func() {}
	}
	runtime.MemProfileRate = 4096
	return func() {
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			fmt.Fprintf(os.Stderr, "tracecar: TRACECAR_ALLOCPROFILE: %v\n", err)
		}
		f.Close()
	}
}
