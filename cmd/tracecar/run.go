package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/tracecar/tracecar/internal/buildinfo"
	"github.com/tracecar/tracecar/loadcheck"
)

// Exit codes, a contract of the command line.
const (
	exitOK        = 0
	exitRuntime   = 1
	exitUsage     = 2
	exitGuardrail = 3
)

const usage = `usage: tracecar <command> [flags]

commands:
  node       run the embedded in-memory CQL node
  sidecar    run the CQL proxy with slow-query tracing and the admin API
  loadcheck  measure what each tracing and logging mode costs
  ctl        change tracing or log levels on one or more sidecars
  capture    dump or summarise a workload capture file (capture dump|stats FILE)
  version    print the version, the VCS revision and the Go version (also --version)

Run 'tracecar <command> -h' for the flags of a command.
`

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "node":
		err = runNode(ctx, args[1:], stdout, stderr)
	case "sidecar":
		err = runSidecar(ctx, args[1:], stdout, stderr)
	case "loadcheck":
		err = runLoadcheck(ctx, args[1:], stdout, stderr)
	case "ctl":
		err = runCtl(ctx, args[1:], stdout, stderr)
	case "capture":
		err = runCapture(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "tracecar: version takes no arguments, got %q\n", args[1])
			return exitUsage
		}
		fmt.Fprintln(stdout, buildinfo.Read())
		return exitOK
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "tracecar: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return exitCode(err, stderr)
}

// exitCode maps an error to the exit code: the one place that does.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "tracecar: %v\n", err)
		return exitUsage
	case errors.Is(err, loadcheck.ErrGuardrail):
		fmt.Fprintf(stderr, "tracecar: %v\n", err)
		return exitGuardrail
	default:
		fmt.Fprintf(stderr, "tracecar: %v\n", err)
		return exitRuntime
	}
}
