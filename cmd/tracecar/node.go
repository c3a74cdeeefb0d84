package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/tracecar/tracecar/logs"
	"github.com/tracecar/tracecar/node"
)

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node", stderr)
	listen := fs.String("listen", "127.0.0.1:9042", "CQL native protocol address")
	api := fs.String("api", "127.0.0.1:10001", "REST API address (loggers, trace_probability); empty disables it")
	auth := fs.String("auth", "", "USER:PASS turns on PasswordAuthenticator")
	maxFrame := maxFrameSizeFlag(fs)
	scylla := fs.Bool("scylla-supported", false, "answer OPTIONS with ScyllaDB's SUPPORTED keys too (SCYLLA_SHARD, SCYLLA_NR_SHARDS, SCYLLA_SHARD_AWARE_PORT, …), to test shard-aware drivers")
	lf := addLogFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *auth != "" && !strings.Contains(*auth, ":") {
		return usageErrorf("--auth must be USER:PASS, got %q", *auth)
	}
	reg, err := lf.registry(stderr)
	if err != nil {
		return err
	}
	defer reg.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	srv := node.New(node.Config{Auth: *auth, Logger: reg.Logger(logs.Node), MaxFrameSize: maxFrame.n, ScyllaSupported: *scylla})
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ctx, ln) }()
	fmt.Fprintf(stdout, "tracecar node: CQL on %s\n", ln.Addr())
	if *api != "" {
		aln, err := net.Listen("tcp", *api)
		if err != nil {
			return fmt.Errorf("listen %s: %w", *api, err)
		}
		fmt.Fprintf(stdout, "tracecar node: API on http://%s\n", aln.Addr())
		go func() { errc <- serveNodeAPI(ctx, aln, srv, reg) }()
	}
	err = <-errc
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// logFlags are the logging flags shared by the long-running commands.
type logFlags struct {
	format, file, level *string
}

func addLogFlags(fs interface {
	String(name, value, usage string) *string
}) logFlags {
	return logFlags{
		format: fs.String("log-format", "console", "log format: console or json"),
		file:   fs.String("log-file", "", "append logs to this file instead of stderr"),
		level:  fs.String("log-level", "info", "initial level of every logger: error, warn, info, debug or trace"),
	}
}

func (f logFlags) registry(stderr io.Writer) (*logs.Registry, error) {
	if *f.format != "console" && *f.format != "json" {
		return nil, usageErrorf("--log-format must be console or json, got %q", *f.format)
	}
	if _, err := logs.ParseLevel(*f.level); err != nil {
		return nil, usageErrorf("--log-level: %v", err)
	}
	return logs.New(logs.Config{Format: *f.format, Writer: stderr, File: *f.file, Level: *f.level})
}
